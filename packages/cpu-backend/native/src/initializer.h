// Initial values of new rows, bit-compatible with core's random.ts / initialRow:
// a counter-based generator keyed by (seed, stream, key, column, draw), evaluated
// in double and rounded to float32 once, so a key's initial row never depends on
// batch order, thread or shard. Immutable after construction: thread-safe.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace embedstack {

inline uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

/** randomWord's first four rounds (seed, stream, key words): shared by every column of a key. */
inline uint32_t keyPrefix(uint32_t seed, uint32_t stream, int64_t key) {
  uint64_t k = static_cast<uint64_t>(key);
  uint32_t h = mix32(seed ^ 0x9e3779b9U);
  h = mix32(h ^ stream);
  h = mix32(h ^ static_cast<uint32_t>(k));
  return mix32(h ^ static_cast<uint32_t>(k >> 32));
}

/** random.ts randomWord(seed, stream, keyLo, keyHi, column, draw). */
inline uint32_t randomWord(uint32_t seed, uint32_t stream, int64_t key, uint32_t column, uint32_t draw) {
  return mix32(mix32(keyPrefix(seed, stream, key) ^ column) ^ draw);
}

inline double uniform01(uint32_t word) {
  return (static_cast<double>(word >> 8) + 0.5) / 16777216.0;
}

/** Box-Muller, cosine branch, as random.ts (same operation order). */
inline double standardNormal(double u1, double u2) {
  const double kPi = 3.141592653589793;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
}

constexpr double kTruncationStds = 2.0;
constexpr int kTruncationAttempts = 16;

enum class InitKind : int { kZeros = 0, kOnes, kConstant, kRow, kUniform, kNormal, kTruncatedNormal, kArray };

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
