#include "storage.h"

#include <vector>

#include "multiversion.h"

namespace embedstack {

// Each loop is branch-free per element so that the AVX2 / AVX-512 clones vectorize it.

ES_MULTIVERSION
void loadValues(StorageDtype d, const void* src, float* __restrict dst, size_t n) {
  if (d == StorageDtype::kFloat32) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  const uint16_t* __restrict s = static_cast<const uint16_t*>(src);
  if (d == StorageDtype::kBfloat16) {
    for (size_t i = 0; i < n; ++i) dst[i] = bf16ToFloat(s[i]);
  } else {
    for (size_t i = 0; i < n; ++i) dst[i] = halfToFloat(s[i]);
  }
}

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
