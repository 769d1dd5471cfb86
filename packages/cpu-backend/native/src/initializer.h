// Initial values of new rows, bit-compatible with core's random.ts / initialRow
// (the generator and the per-column draw are in random.h, shared with the CUDA
// backend). Immutable after construction: thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "random.h"

namespace embedstack {

struct Initializer {
  InitKind kind = InitKind::kZeros;
  /** constant: a = value; uniform: [a, b); normal / truncatedNormal: mean a, std b. */
  double a = 0;
  double b = 0;
  /** row: [dim]; array: [rows * dim] (static tables). */
  std::vector<float> values;
  uint32_t seed = 0;
  uint32_t stream = 0;

  /** Writes the initial row of `key` (array initializers use `row`) into out[0..dim). */
  void fill(int64_t key, size_t row, size_t dim, float* out) const;
  /** True when the value depends on the key (so it cannot be computed once per table). */
  bool perKey() const {
    return kind == InitKind::kUniform || kind == InitKind::kNormal || kind == InitKind::kTruncatedNormal ||
           kind == InitKind::kArray;
  }
};

}  // namespace embedstack
