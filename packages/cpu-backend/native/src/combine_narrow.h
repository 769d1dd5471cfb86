// The bag sum / mean / sqrtn without clipping in explicit AVX2 / AVX-512 float64 vectors:
// bag_sum.h's loop with a policy whose sums are vector registers, each row widened where
// the loop reads it (bfloat16 / float16: no float32 copy of the rows; float32: to float64).
// The same bits as combine.cc's scalar loop (the path for max / min, clipping, and CPUs or
// builds without these kernels), which GCC compiles with its sums in memory at dim 64 on
// AVX2 (zeroed by `rep stos` per block, two spilled): this kernel took 0.76-0.83x its
// CPU time on a 1M x 64 float32 bag (2-vCPU Zen 3, stop 39).
#pragma once

#include "combine.h"
#include "storage.h"

namespace embedstack {

/**
 * Combines a span (any storage dtype) with the kernel of the best WidenIsa the build and
 * CPU have; false, with nothing written, when the span takes max / min or clips, or there
 * is no such kernel (kPortable).
 */
bool sumVectorRows(const BagSpan& s);
/** sumVectorRows with a given kernel (one of widenIsas(); tests compare them). */
bool sumVectorRowsWith(WidenIsa isa, const BagSpan& s);

}  // namespace embedstack
