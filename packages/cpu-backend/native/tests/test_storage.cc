// Narrow value storage: the float16 / bfloat16 conversions against a model written
// with libm (frexp / ldexp / nearbyint in the default round-to-nearest-even mode),
// and the multiversioned row loops against the scalar conversions.
#include <cmath>
#include <vector>

#include "storage.h"
#include "test.h"

using namespace embedstack;

namespace {

// x rounded to `precision` significant bits with exponent >= emin (subnormals below), overflow past max -> Inf.
float modelRound(float x, int precision, int emin, double max) {
  if (!std::isfinite(x) || x == 0.0f) return x;
  int e;
  std::frexp(static_cast<double>(x), &e);  // x = m * 2^e, 0.5 <= |m| < 1
  const int exp = std::max(e - 1, emin);
  const double ulp = std::ldexp(1.0, exp - precision + 1);
  const double r = std::nearbyint(static_cast<double>(x) / ulp) * ulp;
  if (std::fabs(r) > max) return x < 0 ? -INFINITY : INFINITY;
  return static_cast<float>(r);
}
float modelHalf(float x) { return modelRound(x, 11, -14, 65504.0); }
float modelBf16(float x) { return modelRound(x, 8, -126, std::ldexp(255.0, 120)); }

bool sameBits(float a, float b) { return (std::isnan(a) && std::isnan(b)) || estest::floatBits(a) == estest::floatBits(b); }

std::vector<float> randomFloats(size_t n) {
  std::vector<float> v(n);
  uint32_t x = 12345;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    const uint32_t u = x ^ (x >> 13) ^ static_cast<uint32_t>(i * 0x9e3779b9u);
    std::memcpy(&v[i], &u, 4);
  }
  return v;
}

}  // namespace

TEST(float16_round_trips_every_value) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = halfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(floatToHalf(f), h);
  }
  EXPECT_EQ(estest::floatBits(halfToFloat(0x3c00)), estest::floatBits(1.0f));
  EXPECT_EQ(estest::floatBits(halfToFloat(0x0001)), estest::floatBits(std::ldexp(1.0f, -24)));
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(NAN))));
}

TEST(float16_and_bfloat16_round_to_nearest_even) {
  for (float x : randomFloats(400000)) {
    EXPECT_TRUE(sameBits(halfToFloat(floatToHalf(x)), modelHalf(x)));
    EXPECT_TRUE(sameBits(bf16ToFloat(floatToBf16(x)), modelBf16(x)));
  }
  EXPECT_EQ(halfToFloat(floatToHalf(65519.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(halfToFloat(floatToHalf(65520.0f))));
  EXPECT_EQ(bf16ToFloat(floatToBf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  EXPECT_EQ(bf16ToFloat(floatToBf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
}

TEST(row_loops_match_the_scalar_conversions) {
  const std::vector<float> v = randomFloats(1000);
  for (StorageDtype d : {StorageDtype::kFloat32, StorageDtype::kFloat16, StorageDtype::kBfloat16}) {
    std::vector<uint8_t> stored(storedValueBytes(d, v.size()));
    std::vector<float> back(v.size());
    std::vector<float> rounded = v;
    storeValues(d, v.data(), stored.data(), v.size());
    loadValues(d, stored.data(), back.data(), v.size());
    roundValues(d, rounded.data(), rounded.size());
    for (size_t i = 0; i < v.size(); ++i) {
      const float want = d == StorageDtype::kFloat32   ? v[i]
                         : d == StorageDtype::kFloat16 ? halfToFloat(floatToHalf(v[i]))
                                                       : bf16ToFloat(floatToBf16(v[i]));
      EXPECT_TRUE(sameBits(back[i], want));
      EXPECT_TRUE(sameBits(rounded[i], want));
    }
  }
  EXPECT_EQ(storedValueBytes(StorageDtype::kBfloat16, 3), size_t{8});
  EXPECT_EQ(storedValueBytes(StorageDtype::kFloat32, 3), size_t{12});
}
