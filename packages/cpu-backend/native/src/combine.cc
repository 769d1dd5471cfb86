#include "combine.h"

namespace embedstack {

// The hot loop of unweighted bags: float -> double and add, vectorised (with AVX2
// when the CPU has it; the results are identical, IEEE adds are exact-rounded).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(EMBEDSTACK_NO_CLONES)
__attribute__((target_clones("avx2", "default")))
#endif
static void addFloatsToDoubles(double* __restrict acc, const float* __restrict e, size_t dim) {
  for (size_t c = 0; c < dim; ++c) acc[c] += static_cast<double>(e[c]);
}

void RowCombiner::addUnit(const float* e) { addFloatsToDoubles(acc_, e, dim_); }

}  // namespace embedstack
