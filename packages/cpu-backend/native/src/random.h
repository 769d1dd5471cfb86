// The counter-based generator of core's random.ts and the per-column draw of its
// random initializers (initialRow), bit-compatible with the TypeScript reference:
// 32-bit integer mixing keyed by (seed, stream, key, column, draw), each value
// evaluated in double and rounded to float32 once, so a key's initial row never
// depends on batch order, thread, shard or device. Pure ES_HD functions: the CUDA
// backend runs them on the device too.
#pragma once

#include <cmath>
#include <cstdint>

#include "hd.h"

namespace embedstack {

enum class InitKind : int { kZeros = 0, kOnes, kConstant, kRow, kUniform, kNormal, kTruncatedNormal, kArray };

ES_HD inline uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

/** randomWord's first four rounds (seed, stream, key words): shared by every column of a key. */
ES_HD inline uint32_t keyPrefix(uint32_t seed, uint32_t stream, int64_t key) {
  uint64_t k = static_cast<uint64_t>(key);
  uint32_t h = mix32(seed ^ 0x9e3779b9U);
  h = mix32(h ^ stream);
  h = mix32(h ^ static_cast<uint32_t>(k));
  return mix32(h ^ static_cast<uint32_t>(k >> 32));
}

/** random.ts randomWord(seed, stream, keyLo, keyHi, column, draw). */
ES_HD inline uint32_t randomWord(uint32_t seed, uint32_t stream, int64_t key, uint32_t column, uint32_t draw) {
  return mix32(mix32(keyPrefix(seed, stream, key) ^ column) ^ draw);
}

ES_HD inline double uniform01(uint32_t word) {
  return (static_cast<double>(word >> 8) + 0.5) / 16777216.0;
}

/** Box-Muller, cosine branch, as random.ts (same operation order). */
ES_HD inline double standardNormal(double u1, double u2) {
  const double kPi = 3.141592653589793;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
}

constexpr double kTruncationStds = 2.0;
constexpr int kTruncationAttempts = 16;

/** The standard normal of draws (draw, draw + 1) of a column. */
ES_HD inline double normalDraw(uint32_t columnWord, uint32_t draw) {
  return standardNormal(uniform01(mix32(columnWord ^ draw)), uniform01(mix32(columnWord ^ (draw + 1))));
}

/**
 * Column `column` of a key's initial row for the random kinds (uniform: [a, b);
 * normal / truncatedNormal: mean a, std b), given the key's keyPrefix. Rounded to
 * float32 once, as initialRow does.
 */
ES_HD inline float randomColumn(InitKind kind, double a, double b, uint32_t prefix, uint32_t column) {
  const uint32_t cw = mix32(prefix ^ column);
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
  return static_cast<float>(v);
}

}  // namespace embedstack
