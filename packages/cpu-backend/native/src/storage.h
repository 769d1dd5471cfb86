// Reduced-precision value storage (core's TableOptions.storageDtype). A table
// stores each value as float32 (4 bytes), IEEE float16 or bfloat16 (2 bytes);
// every op reads values widened to float32 (exact) and rounds what it stores to
// nearest, ties to even (NaN stays NaN, float16 overflow -> ±Inf), exactly as
// core's roundToStorage. Optimizer slots stay float32. The scalar conversions are
// branch-light integer code so that loops over a row vectorize; the row loops are
// in storage.cc: narrowing is multiversioned, widening (every read; the bag's sums
// widen inside their own loop, combine_narrow.cc) runs one of three kernels picked
// once per process (WidenIsa): F16C / AVX-512 conversions and a 16-bit shift for
// bfloat16 where the build and the CPU have them, the scalar functions below
// otherwise. All give the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace embedstack {

enum class StorageDtype : int { kFloat32 = 0, kFloat16 = 1, kBfloat16 = 2 };

inline size_t storageBytes(StorageDtype d) { return d == StorageDtype::kFloat32 ? 4 : 2; }
inline const char* storageName(StorageDtype d) {
  return d == StorageDtype::kFloat32 ? "float32" : d == StorageDtype::kFloat16 ? "float16" : "bfloat16";
}

inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float bf16ToFloat(uint16_t h) { return bitsFloat(static_cast<uint32_t>(h) << 16); }

inline uint16_t floatToBf16(float f) {
  const uint32_t u = floatBits(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x40u;  // quiet NaN, sign kept
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

inline float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  // Normals: the bits moved into float32 position and the exponent rebiased by 127 - 15.
  const uint32_t normal = (em << 13) + (112u << 23);
  // Subnormals and zero: the mantissa times 2^-24, converted from the integer (exact).
  // No float32 subnormal is read or made, so the value is right with the MXCSR's DAZ
  // (denormals read as zero) or FTZ set, as vcvtph2ps's (which ignores both).
  const uint32_t tiny = floatBits(static_cast<float>(static_cast<int32_t>(em)) * 0x1p-24f);
  const uint32_t special = (em << 13) | 0x7f800000u;  // Inf, NaN
  // all ones or zero: no branch
  const uint32_t isSpecial = 0u - static_cast<uint32_t>(em >= 0x7c00u);
  const uint32_t isTiny = 0u - static_cast<uint32_t>(em < 0x0400u);
  return bitsFloat((special & isSpecial) | (tiny & isTiny) | (normal & ~isTiny & ~isSpecial) | sign);
}

inline uint16_t floatToHalf(float f) {
  uint32_t u = floatBits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  // All three cases computed, one selected by masks (no branch, so row loops vectorize):
  // >= 65536, Inf, NaN:
  const uint32_t big = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
  // below 2^-14, float16 subnormals: adding 0.5 (its ulp is float16's smallest subnormal) rounds to nearest even
  // (the sum is at least 0.5, so FTZ never applies; a float32 subnormal that DAZ reads as 0 rounds to 0 anyway)
  const uint32_t tiny = floatBits(bitsFloat(u) + 0.5f) - (126u << 23);
  // normals: rebias (15 - 127) << 23 and round half to even (may carry into Inf)
  const uint32_t normal = (u + 0xc8000fffu + ((u >> 13) & 1u)) >> 13;
  const uint32_t isBig = 0u - static_cast<uint32_t>(u >= 0x47800000u);
  const uint32_t isTiny = 0u - static_cast<uint32_t>(u < 0x38800000u);
  const uint32_t o = (big & isBig) | (tiny & isTiny & ~isBig) | (normal & ~isTiny & ~isBig);
  return static_cast<uint16_t>(o | sign);
}

/** The bytes of a row's stored values: dim values, padded to 4 bytes so float32 slots stay aligned. */
inline size_t storedValueBytes(StorageDtype d, size_t dim) { return (dim * storageBytes(d) + 3) & ~size_t{3}; }

/** dst[0..n) = the n values stored at src, widened. */
void loadValues(StorageDtype d, const void* src, float* dst, size_t n);
/**
 * dst[k * dim .. (k + 1) * dim) = rows[k] widened (dim values stored as `d`), k < count,
 * asking for rows[k + ahead] (k + ahead < prefetchCount) into the caches on the way:
 * the gather of a narrow bag that the fused kernels (combine_narrow.h) do not take
 * (combine.cc: max / min, clipping, no F16C). One widening kernel call for all rows. A
 * float16 signalling NaN may come out quiet (payload kept): the same double as the
 * scalar value's once converted, which is all the bag kernel does with it.
 */
void loadRows(StorageDtype d, const void* const* rows, size_t count, size_t dim, float* dst, size_t prefetchCount);

/**
 * The widening kernels: portable C++ (the scalar functions above); AVX2 + F16C
 * (8 values per instruction); AVX-512F + F16C (16). Each gives the bits of
 * bf16ToFloat / halfToFloat for every input: vcvtph2ps is exact for normals,
 * subnormals and Inf, but quiets a signalling NaN, so loadValues widens a float16
 * row holding an exponent of all ones again by the scalar function.
 */
enum class WidenIsa : int { kPortable = 0, kAvx2F16c = 1, kAvx512 = 2 };
/**
 * The kernels this build has and this CPU runs, lowest first; loadValues and loadRows
 * use the last. A source build (GCC, x86-64 Linux) has all three and checks the CPU
 * once; a prebuilt level has what its -march gives (baseline: portable only).
 */
const std::vector<WidenIsa>& widenIsas();
/** loadValues with a given kernel (one of widenIsas(); tests compare them). */
void loadValuesWith(WidenIsa isa, StorageDtype d, const void* src, float* dst, size_t n);
/** Stores src[0..n) at dst, rounded. */
void storeValues(StorageDtype d, const float* src, void* dst, size_t n);
/** Rounds v[0..n) in place to what `d` stores (a no-op for float32). */
void roundValues(StorageDtype d, float* v, size_t n);
/** This thread's scratch of at least n floats (one row widened: do not hold two at once). */
float* rowScratch(size_t n);

}  // namespace embedstack
