#include "initializer.h"

#include <cstring>

namespace embedstack {

namespace {

inline double normalDraw(uint32_t columnWord, uint32_t draw) {
  return standardNormal(uniform01(mix32(columnWord ^ draw)), uniform01(mix32(columnWord ^ (draw + 1))));
}

}  // namespace

void Initializer::fill(int64_t key, size_t row, size_t dim, float* out) const {
  switch (kind) {
    case InitKind::kZeros:
      std::memset(out, 0, dim * sizeof(float));
      return;
    case InitKind::kOnes:
      for (size_t c = 0; c < dim; ++c) out[c] = 1.0f;
      return;
    case InitKind::kConstant: {
      const float v = static_cast<float>(a);
      for (size_t c = 0; c < dim; ++c) out[c] = v;
      return;
    }
    case InitKind::kRow:
      std::memcpy(out, values.data(), dim * sizeof(float));
      return;
    case InitKind::kArray:
      std::memcpy(out, values.data() + row * dim, dim * sizeof(float));
      return;
    default:
      break;
  }
  const uint32_t prefix = keyPrefix(seed, stream, key);
  for (size_t c = 0; c < dim; ++c) {
    const uint32_t cw = mix32(prefix ^ static_cast<uint32_t>(c));
    double v;
    if (kind == InitKind::kUniform) {
      v = a + (b - a) * uniform01(mix32(cw ^ 0U));
    } else if (kind == InitKind::kNormal) {
      v = a + b * normalDraw(cw, 0);
    } else {
      double z = 0;
      for (uint32_t attempt = 0; attempt < static_cast<uint32_t>(kTruncationAttempts); ++attempt) {
        z = normalDraw(cw, 2 * attempt);
        if (std::fabs(z) <= kTruncationStds) break;
      }
      // Math.max(-2, Math.min(2, z)): NaN cannot occur (u1 is never 0).
      if (z > kTruncationStds) z = kTruncationStds;
      if (z < -kTruncationStds) z = -kTruncationStds;
      v = a + b * z;
    }
    out[c] = static_cast<float>(v);
  }
}

}  // namespace embedstack
