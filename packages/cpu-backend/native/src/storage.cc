#include "storage.h"

#include <vector>

#include "column_blocks.h"
#include "hd.h"
#include "multiversion.h"
#include "widen_isa.h"

// Widening kernels (WidenIsa): which ones a build has is widen_isa.h's choice.

namespace embedstack {

namespace {

/** Widens rows[k] (k < count) into dst rows of `dim`, prefetching ahead (loadRows). */
/** `exactNaN` false: a signalling NaN may come out quiet (loadRows: the bag's double arithmetic quiets it anyway). */
using WidenRowsFn = void (*)(StorageDtype, const void* const*, size_t, size_t, float*, size_t, bool exactNaN);
/** Widens one row exactly (loadValues: no prefetching, nothing to set up). */
using WidenRowFn = void (*)(StorageDtype, const uint16_t*, float*, size_t);
struct WidenKernels {
  WidenRowsFn rows;
  WidenRowFn row;
};

// The kernels' row loop: each row widened by ROW(src, dst, dim) (ROW_BF16 or ROW_HALF by
// the dtype), asking for the row `ahead` on into L2 and the row `nearAhead` on into L1 first,
// as the float32 pooling loop does (column_blocks.h) (a macro, so that the loop is compiled
// for the kernel's own target; an inlined helper would need that target too).
#define ES_WIDEN_ROWS(ROW_BF16, ROW_HALF)                                                   \
  const size_t bytes = dim * 2;                                                             \
  const size_t ahead = prefetchDistance(bytes);                                             \
  const size_t nearAhead = nearPrefetchDistance(ahead);                                     \
  const bool bf16 = d == StorageDtype::kBfloat16;                                           \
  for (size_t k = 0; k < count; ++k) {                                                      \
    if (k + ahead < prefetchCount) prefetchRow<PrefetchTo::kL2>(rows[k + ahead], bytes);    \
    if (k + nearAhead < prefetchCount) prefetchRow(rows[k + nearAhead], bytes);             \
    const uint16_t* s = static_cast<const uint16_t*>(rows[k]);                              \
    if (bf16) {                                                                             \
      ROW_BF16(s, dst + k * dim, dim);                                                      \
    } else if (exactNaN) {                                                                  \
      ROW_HALF<true>(s, dst + k * dim, dim);                                                \
    } else {                                                                                \
      ROW_HALF<false>(s, dst + k * dim, dim);                                               \
    }                                                                                       \
  }

ES_ALWAYS_INLINE inline void bf16RowPortable(const uint16_t* __restrict s, float* __restrict o, size_t n) {
  for (size_t i = 0; i < n; ++i) o[i] = bf16ToFloat(s[i]);
}
template <bool>
ES_ALWAYS_INLINE inline void halfRowPortable(const uint16_t* __restrict s, float* __restrict o, size_t n) {
  for (size_t i = 0; i < n; ++i) o[i] = halfToFloat(s[i]);
}

/** The scalar functions over a row (SSE2 vectorizes them in part). */
void widenPortable(StorageDtype d, const void* const* rows, size_t count, size_t dim, float* dst, size_t prefetchCount, bool exactNaN) {
  ES_WIDEN_ROWS(bf16RowPortable, halfRowPortable)
}
void widenOnePortable(StorageDtype d, const uint16_t* s, float* o, size_t n) {
  if (d == StorageDtype::kBfloat16) {
    bf16RowPortable(s, o, n);
  } else {
    halfRowPortable<true>(s, o, n);
  }
}

#if ES_WIDEN_AVX2 || ES_WIDEN_AVX512
/** A float16 row whose exponents were flagged all ones (Inf / NaN): those values again, by the scalar function. */
__attribute__((noinline)) void fixSpecialHalves(const uint16_t* s, float* o, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if ((s[i] & 0x7c00u) == 0x7c00u) o[i] = halfToFloat(s[i]);
  }
}
#endif

#if ES_WIDEN_AVX2
ES_TARGET_AVX2 ES_ALWAYS_INLINE inline void bf16RowAvx2(const uint16_t* s, float* o, size_t n) {
  size_t i = 0;
  _Pragma("GCC unroll 4")
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    _mm256_storeu_ps(o + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
  }
  for (; i < n; ++i) o[i] = bf16ToFloat(s[i]);
}

template <bool kExactNaN>
ES_TARGET_AVX2 ES_ALWAYS_INLINE inline void halfRowAvx2(const uint16_t* s, float* o, size_t n) {
  const __m128i exp = _mm_set1_epi16(0x7c00);
  __m128i special = _mm_setzero_si128();
  size_t i = 0;
  _Pragma("GCC unroll 4")
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    if (kExactNaN) special = _mm_or_si128(special, _mm_cmpeq_epi16(_mm_and_si128(h, exp), exp));
    _mm256_storeu_ps(o + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) o[i] = halfToFloat(s[i]);
  if (kExactNaN && !_mm_testz_si128(special, special)) fixSpecialHalves(s, o, n);
}

ES_TARGET_AVX2 void widenAvx2(StorageDtype d, const void* const* rows, size_t count, size_t dim, float* dst, size_t prefetchCount, bool exactNaN) {
  ES_WIDEN_ROWS(bf16RowAvx2, halfRowAvx2)
}
ES_TARGET_AVX2 void widenOneAvx2(StorageDtype d, const uint16_t* s, float* o, size_t n) {
  if (d == StorageDtype::kBfloat16) {
    bf16RowAvx2(s, o, n);
  } else {
    halfRowAvx2<true>(s, o, n);
  }
}
#endif

#if ES_WIDEN_AVX512
constexpr __mmask16 kAll16 = 0xffff;

/** x in the low half, zeros above (a cast would leave the upper half undefined). */
ES_TARGET_AVX512 ES_ALWAYS_INLINE inline __m256i zeroExtend(__m128i x) {
#if defined(__clang__) || __GNUC__ >= 10
  return _mm256_zextsi128_si256(x);
#else
  return _mm256_inserti128_si256(_mm256_setzero_si256(), x, 0);  // GCC < 10 has no zext intrinsic
#endif
}

ES_TARGET_AVX512 ES_ALWAYS_INLINE inline void bf16RowAvx512(const uint16_t* s, float* o, size_t n) {
  size_t i = 0;
  _Pragma("GCC unroll 4")
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    // the maskz forms: the plain ones read an undefined register GCC 12 warns about (-Wmaybe-uninitialized)
    _mm512_storeu_ps(o + i, _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAll16, _mm512_maskz_cvtepu16_epi32(kAll16, h), 16)));
  }
  for (; i < n; ++i) o[i] = bf16ToFloat(s[i]);
}

template <bool kExactNaN>
ES_TARGET_AVX512 ES_ALWAYS_INLINE inline void halfRowAvx512(const uint16_t* s, float* o, size_t n) {
  const __m256i exp = _mm256_set1_epi16(0x7c00);
  __m256i special = _mm256_setzero_si256();
  size_t i = 0;
  _Pragma("GCC unroll 4")
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    if (kExactNaN) special = _mm256_or_si256(special, _mm256_cmpeq_epi16(_mm256_and_si256(h, exp), exp));
    _mm512_storeu_ps(o + i, _mm512_maskz_cvtph_ps(kAll16, h));
  }
  if (i + 8 <= n) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    if (kExactNaN) special = _mm256_or_si256(special, zeroExtend(_mm_cmpeq_epi16(_mm_and_si128(h, _mm256_castsi256_si128(exp)), _mm256_castsi256_si128(exp))));
    _mm256_storeu_ps(o + i, _mm256_cvtph_ps(h));
    i += 8;
  }
  for (; i < n; ++i) o[i] = halfToFloat(s[i]);
  if (kExactNaN && !_mm256_testz_si256(special, special)) fixSpecialHalves(s, o, n);
}

ES_TARGET_AVX512 void widenAvx512(StorageDtype d, const void* const* rows, size_t count, size_t dim, float* dst, size_t prefetchCount, bool exactNaN) {
  ES_WIDEN_ROWS(bf16RowAvx512, halfRowAvx512)
}
ES_TARGET_AVX512 void widenOneAvx512(StorageDtype d, const uint16_t* s, float* o, size_t n) {
  if (d == StorageDtype::kBfloat16) {
    bf16RowAvx512(s, o, n);
  } else {
    halfRowAvx512<true>(s, o, n);
  }
}
#endif

std::vector<WidenIsa> detectWidenIsas() {
  std::vector<WidenIsa> isas{WidenIsa::kPortable};
#if ES_WIDEN_RUNTIME
  __builtin_cpu_init();
  const bool f16c = __builtin_cpu_supports("f16c");
  if (f16c && __builtin_cpu_supports("avx2")) isas.push_back(WidenIsa::kAvx2F16c);
  if (f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f")) isas.push_back(WidenIsa::kAvx512);
#else
#if ES_WIDEN_AVX2
  isas.push_back(WidenIsa::kAvx2F16c);
#endif
#if ES_WIDEN_AVX512
  isas.push_back(WidenIsa::kAvx512);
#endif
#endif
  return isas;
}

WidenKernels widenKernels(WidenIsa isa) {
  switch (isa) {
#if ES_WIDEN_AVX512
    case WidenIsa::kAvx512:
      return {widenAvx512, widenOneAvx512};
#endif
#if ES_WIDEN_AVX2
    case WidenIsa::kAvx2F16c:
      return {widenAvx2, widenOneAvx2};
#endif
    default:
      return {widenPortable, widenOnePortable};
  }
}

/** The kernels of the best ISA, picked at first use. */
const WidenKernels& bestWiden() {
  static const WidenKernels k = widenKernels(widenIsas().back());
  return k;
}

}  // namespace

const std::vector<WidenIsa>& widenIsas() {
  static const std::vector<WidenIsa> isas = detectWidenIsas();
  return isas;
}

void loadValues(StorageDtype d, const void* src, float* dst, size_t n) {
  if (d == StorageDtype::kFloat32) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  bestWiden().row(d, static_cast<const uint16_t*>(src), dst, n);
}

void loadValuesWith(WidenIsa isa, StorageDtype d, const void* src, float* dst, size_t n) {
  if (d == StorageDtype::kFloat32) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  widenKernels(isa).row(d, static_cast<const uint16_t*>(src), dst, n);
}

void loadRows(StorageDtype d, const void* const* rows, size_t count, size_t dim, float* dst, size_t prefetchCount) {
  if (d == StorageDtype::kFloat32) {
    for (size_t k = 0; k < count; ++k) std::memcpy(dst + k * dim, rows[k], dim * sizeof(float));
    return;
  }
  bestWiden().rows(d, rows, count, dim, dst, prefetchCount, false);
}

// Each loop is branch-free per element so that the AVX2 / AVX-512 clones vectorize it.

ES_MULTIVERSION
void storeValues(StorageDtype d, const float* __restrict src, void* dst, size_t n) {
  if (d == StorageDtype::kFloat32) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  uint16_t* __restrict o = static_cast<uint16_t*>(dst);
  if (d == StorageDtype::kBfloat16) {
    for (size_t i = 0; i < n; ++i) o[i] = floatToBf16(src[i]);
  } else {
    for (size_t i = 0; i < n; ++i) o[i] = floatToHalf(src[i]);
  }
}

ES_MULTIVERSION
void roundValues(StorageDtype d, float* v, size_t n) {
  if (d == StorageDtype::kBfloat16) {
    for (size_t i = 0; i < n; ++i) v[i] = bf16ToFloat(floatToBf16(v[i]));
  } else if (d == StorageDtype::kFloat16) {
    for (size_t i = 0; i < n; ++i) v[i] = halfToFloat(floatToHalf(v[i]));
  }
}

float* rowScratch(size_t n) {
  thread_local std::vector<float> scratch;
  if (scratch.size() < n) scratch.resize(n);
  return scratch.data();
}

}  // namespace embedstack
