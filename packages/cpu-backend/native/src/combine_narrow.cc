#include "combine_narrow.h"

#include "bag_sum.h"
#include "combine_vector.h"
#include "widen_isa.h"

// The pooling loop is bag_sum.h's, generic; each kernel below instantiates it with a
// policy (combine_vector.h) whose operations carry the kernel's target, and is `flatten` so
// that GCC inlines them into it (an always_inline target function cannot be inlined into
// the generic loop).

namespace embedstack {

namespace {

using SumFn = void (*)(const BagSpan&);
struct VectorSums {
  SumFn bf16;
  SumFn f16;
  SumFn f32;
};

#if ES_WIDEN_AVX2 || ES_WIDEN_AVX512
using vecsum::Bf16Src;
using vecsum::F16Src;
using vecsum::F32Src;
using vecsum::VectorBlocks;
#endif

#if ES_WIDEN_AVX2
using vecsum::Avx2Ops;
ES_TARGET_AVX2 __attribute__((flatten)) void sumAvx2Bf16(const BagSpan& s) { bagsum::sumRows<VectorBlocks<Avx2Ops<Bf16Src>>>(s); }
ES_TARGET_AVX2 __attribute__((flatten)) void sumAvx2F16(const BagSpan& s) { bagsum::sumRows<VectorBlocks<Avx2Ops<F16Src>>>(s); }
ES_TARGET_AVX2 __attribute__((flatten)) void sumAvx2F32(const BagSpan& s) { bagsum::sumRows<VectorBlocks<Avx2Ops<F32Src>>>(s); }
#endif

#if ES_WIDEN_AVX512
using vecsum::Avx512Ops;
ES_TARGET_AVX512 __attribute__((flatten)) void sumAvx512Bf16(const BagSpan& s) { bagsum::sumRows<VectorBlocks<Avx512Ops<Bf16Src>>>(s); }
ES_TARGET_AVX512 __attribute__((flatten)) void sumAvx512F16(const BagSpan& s) { bagsum::sumRows<VectorBlocks<Avx512Ops<F16Src>>>(s); }
ES_TARGET_AVX512 __attribute__((flatten)) void sumAvx512F32(const BagSpan& s) { bagsum::sumRows<VectorBlocks<Avx512Ops<F32Src>>>(s); }
#endif

VectorSums vectorSums(WidenIsa isa) {
  switch (isa) {
#if ES_WIDEN_AVX512
    case WidenIsa::kAvx512:
      return {sumAvx512Bf16, sumAvx512F16, sumAvx512F32};
#endif
#if ES_WIDEN_AVX2
    case WidenIsa::kAvx2F16c:
      return {sumAvx2Bf16, sumAvx2F16, sumAvx2F32};
#endif
    default:
      return {nullptr, nullptr, nullptr};
  }
}

bool run(const VectorSums& k, const BagSpan& s) {
  if (s.combiner == Combiner::kMax || s.combiner == Combiner::kMin || s.maxNorm > 0) return false;
  const SumFn f = s.dtype == StorageDtype::kBfloat16 ? k.bf16 : s.dtype == StorageDtype::kFloat16 ? k.f16 : k.f32;
  if (f == nullptr) return false;
  f(s);
  return true;
}

}  // namespace

bool sumVectorRowsWith(WidenIsa isa, const BagSpan& s) { return run(vectorSums(isa), s); }

bool sumVectorRows(const BagSpan& s) {
  static const VectorSums k = vectorSums(widenIsas().back());
  return run(k, s);
}

}  // namespace embedstack
