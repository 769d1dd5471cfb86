// The float64-vector sums of the sum / mean / sqrtn kernels without clipping: bag_sum.h's
// block policy (Acc, zero, add, addScaled, store, sums) with explicit AVX2 / AVX-512 float64
// vectors, each stored value widened where the loop reads it. Used by the bag
// (combine_narrow.cc: float32, float16 and bfloat16 rows) and by the planned / sharded bag
// (combine_plan.cc: float32 rows). A block's sums are the scalar loop's, lane for lane: the
// same operations in the same order, so the same bits. GCC compiles the scalar loops with
// their sums in memory at dim 64 on AVX2 (zeroed by `rep stos` per block; stop 39, stop 40).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "bag_sum.h"
#include "storage.h"
#include "widen_isa.h"

namespace embedstack {
namespace vecsum {

/** A stored type and its scalar widening to float64 (the fallback for a block narrower than a vector). */
struct Bf16Src {
  using Elem = uint16_t;
  static double get(const uint16_t* e, size_t c) { return static_cast<double>(bf16ToFloat(e[c])); }
};
struct F16Src {
  using Elem = uint16_t;
  static double get(const uint16_t* e, size_t c) { return static_cast<double>(halfToFloat(e[c])); }
};
struct F32Src {
  using Elem = float;
  static double get(const float* e, size_t c) { return static_cast<double>(e[c]); }
};

#if ES_WIDEN_AVX2 || ES_WIDEN_AVX512
template <class V, size_t N>
struct VectorAcc {
  typename V::D v[N];  // V::D, not a template argument (that would drop __m512d's attributes)
};

/**
 * The policy (bag_sum.h) of one ISA and storage type V: a block of B >= V::kWidth columns
 * in B / kWidth float64 vectors (V's operations, each on one vector of sums and the next
 * kWidth stored values), a narrower block in scalars. V passes no vector by value here,
 * where its target is not enabled.
 */
template <class V>
struct VectorBlocks {
  using Elem = typename V::Src::Elem;
  static constexpr size_t W = V::kWidth;
  using Scalar = bagsum::ScalarBlocks<typename V::Src>;
  template <size_t B>
  using Acc = std::conditional_t<(B >= W), VectorAcc<V, B / W>, typename Scalar::template Acc<B>>;

  template <size_t B>
  static inline void zero(Acc<B>& a) {
    if constexpr (B >= W) {
      for (size_t i = 0; i < B / W; ++i) V::zero(a.v[i]);
    } else {
      Scalar::template zero<B>(a);
    }
  }
  template <size_t B>
  static inline void add(Acc<B>& a, const Elem* e) {
    if constexpr (B >= W) {
      for (size_t i = 0; i < B / W; ++i) V::add(a.v[i], e + i * W);
    } else {
      Scalar::template add<B>(a, e);
    }
  }
  template <size_t B>
  static inline void addScaled(Acc<B>& a, const Elem* e, double w) {
    if constexpr (B >= W) {
      for (size_t i = 0; i < B / W; ++i) V::addScaled(a.v[i], e + i * W, w);
    } else {
      Scalar::template addScaled<B>(a, e, w);
    }
  }
  template <size_t B>
  static inline void store(const Acc<B>& a, float* o, double div) {
    if constexpr (B >= W) {
      if (div == 0) {
        for (size_t i = 0; i < B / W; ++i) V::storeZero(o + i * W);
      } else if (div == 1.0) {
        for (size_t i = 0; i < B / W; ++i) V::store(o + i * W, a.v[i]);
      } else {
        for (size_t i = 0; i < B / W; ++i) V::storeDiv(o + i * W, a.v[i], div);
      }
    } else {
      Scalar::template store<B>(a, o, div);
    }
  }
  template <size_t B>
  static inline double* sums(Acc<B>& a, double* buf) {
    if constexpr (B >= W) {
      for (size_t i = 0; i < B / W; ++i) V::storeSums(buf + i * W, a.v[i]);
      return buf;
    } else {
      return Scalar::template sums<B>(a, buf);
    }
  }
};
#endif

// Each ISA's operations: kWidth stored values widened (float32: as loaded; float16:
// vcvtph2ps, exact but for a signalling NaN, which comes out quiet as its float64
// conversion would make it anyway; bfloat16: a 16-bit shift), converted to float64
// (exact), then the scalar kernel's float64 add, multiply, divide and rounding to float32.

#if ES_WIDEN_AVX2
/** AVX2 + F16C: 4 values per vector. */
template <class SrcType>
struct Avx2Ops {
  using Src = SrcType;
  using Elem = typename Src::Elem;
  static constexpr size_t kWidth = 4;
  using D = __m256d;
  ES_TARGET_AVX2 static inline __m256d load(const Elem* e) {
    if constexpr (std::is_same_v<Src, F32Src>) {
      return _mm256_cvtps_pd(_mm_loadu_ps(e));
    } else {
      const __m128i h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(e));
      if constexpr (std::is_same_v<Src, Bf16Src>) return _mm256_cvtps_pd(_mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(h), 16)));
      return _mm256_cvtps_pd(_mm_cvtph_ps(h));
    }
  }
  ES_TARGET_AVX2 static inline void zero(D& a) { a = _mm256_setzero_pd(); }
  ES_TARGET_AVX2 static inline void add(D& a, const Elem* e) { a = _mm256_add_pd(a, load(e)); }
  ES_TARGET_AVX2 static inline void addScaled(D& a, const Elem* e, double w) { a = _mm256_add_pd(a, _mm256_mul_pd(_mm256_set1_pd(w), load(e))); }
  ES_TARGET_AVX2 static inline void store(float* o, const D& a) { _mm_storeu_ps(o, _mm256_cvtpd_ps(a)); }
  ES_TARGET_AVX2 static inline void storeDiv(float* o, const D& a, double div) { store(o, _mm256_div_pd(a, _mm256_set1_pd(div))); }
  ES_TARGET_AVX2 static inline void storeZero(float* o) { _mm_storeu_ps(o, _mm_setzero_ps()); }
  ES_TARGET_AVX2 static inline void storeSums(double* o, const D& a) { _mm256_storeu_pd(o, a); }
};
#endif

#if ES_WIDEN_AVX512
/** AVX-512F + F16C: 8 values per vector. */
template <class SrcType>
struct Avx512Ops {
  static constexpr __mmask8 kAll8 = 0xff;
  using Src = SrcType;
  using Elem = typename Src::Elem;
  static constexpr size_t kWidth = 8;
  using D = __m512d;
  ES_TARGET_AVX512 static inline __m512d load(const Elem* e) {
    // the maskz forms: the plain ones read an undefined register GCC 12 warns about (-Wmaybe-uninitialized)
    if constexpr (std::is_same_v<Src, F32Src>) {
      return _mm512_maskz_cvtps_pd(kAll8, _mm256_loadu_ps(e));
    } else {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(e));
      if constexpr (std::is_same_v<Src, Bf16Src>) return _mm512_maskz_cvtps_pd(kAll8, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
      return _mm512_maskz_cvtps_pd(kAll8, _mm256_cvtph_ps(h));
    }
  }
  ES_TARGET_AVX512 static inline void zero(D& a) { a = _mm512_setzero_pd(); }
  ES_TARGET_AVX512 static inline void add(D& a, const Elem* e) { a = _mm512_add_pd(a, load(e)); }
  ES_TARGET_AVX512 static inline void addScaled(D& a, const Elem* e, double w) { a = _mm512_add_pd(a, _mm512_mul_pd(_mm512_set1_pd(w), load(e))); }
  ES_TARGET_AVX512 static inline void store(float* o, const D& a) { _mm256_storeu_ps(o, _mm512_maskz_cvtpd_ps(kAll8, a)); }
  ES_TARGET_AVX512 static inline void storeDiv(float* o, const D& a, double div) { store(o, _mm512_div_pd(a, _mm512_set1_pd(div))); }
  ES_TARGET_AVX512 static inline void storeZero(float* o) { _mm256_storeu_ps(o, _mm256_setzero_ps()); }
  ES_TARGET_AVX512 static inline void storeSums(double* o, const D& a) { _mm512_storeu_pd(o, a); }
};
#endif

}  // namespace vecsum
}  // namespace embedstack
