// The bag sum / mean / sqrtn of bfloat16 / float16 rows without clipping, each row
// widened where the pooling loop reads it (bag_sum.h's loop with an F16C / AVX-512
// policy): no float32 copy of the rows. The same bits as the float32 kernel over the
// rows widened (combine.cc's path for max / min, clipping, and CPUs without F16C).
#pragma once

#include "combine.h"
#include "storage.h"

namespace embedstack {

/**
 * Combines a narrow span with the kernel of the best WidenIsa the build and CPU have;
 * false, with nothing written, when the span is float32, takes max / min or clips, or
 * there is no such kernel (kPortable).
 */
bool sumNarrowRows(const BagSpan& s);
/** sumNarrowRows with a given kernel (one of widenIsas(); tests compare them). */
bool sumNarrowRowsWith(WidenIsa isa, const BagSpan& s);

}  // namespace embedstack
