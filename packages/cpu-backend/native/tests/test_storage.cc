// Narrow value storage: the float16 / bfloat16 conversions against a model written
// with libm (frexp / ldexp / nearbyint in the default round-to-nearest-even mode),
// and the multiversioned row loops against the scalar conversions; the widening kernels
// (portable, F16C, AVX-512) against the scalar functions on every 16-bit value, and the
// narrow bag (each fused kernel too) against the float32 bag over the same rows widened.
#include <cmath>
#include <vector>

#include "combine.h"
#include "combine_narrow.h"
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

TEST(every_widening_kernel_gives_the_scalar_bits_for_every_value) {
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  EXPECT_TRUE(widenIsas().front() == WidenIsa::kPortable);
  for (WidenIsa isa : widenIsas()) {
    for (StorageDtype d : {StorageDtype::kFloat16, StorageDtype::kBfloat16}) {
      std::vector<float> wide(all.size());
      loadValuesWith(isa, d, all.data(), wide.data(), all.size());
      size_t bad = 0;
      for (uint32_t h = 0; h < 65536; ++h) {
        const float want = d == StorageDtype::kFloat16 ? halfToFloat(static_cast<uint16_t>(h)) : bf16ToFloat(static_cast<uint16_t>(h));
        if (estest::floatBits(wide[h]) != estest::floatBits(want)) ++bad;  // NaN payloads too (signalling ones stay signalling)
      }
      EXPECT_EQ(bad, size_t{0});
      // loadRows (the bag's gather): the same double for every value (a signalling NaN may come out quiet)
      if (isa == widenIsas().back()) {
        const void* row = all.data();
        std::vector<float> rows(all.size());
        loadRows(d, &row, 1, all.size(), rows.data(), 1);
        size_t badDouble = 0;
        for (uint32_t h = 0; h < 65536; ++h) {
          const double got = static_cast<double>(rows[h]);
          const double want = static_cast<double>(wide[h]);
          uint64_t a, b;
          std::memcpy(&a, &got, 8);
          std::memcpy(&b, &want, 8);
          if (a != b) ++badDouble;
        }
        EXPECT_EQ(badDouble, size_t{0});
      }
      // every length up to 3 vectors and every 2-byte misalignment; rows of finite values with
      // one Inf / NaN / subnormal at each position in turn (in the first or a later vector
      // block, the AVX-512 half block or the scalar tail), and none (at == n)
      const uint16_t specials[] = {0x7c00, 0xfc00, 0x7c01, 0x7e00, 0xfd55, 0x0001, 0x83ff, 0x7f80, 0xff81};
      for (size_t n = 0; n <= 50; ++n) {
        for (size_t off = 0; off < 3; ++off) {
          for (size_t at = 0; at <= n; ++at) {
            std::vector<uint16_t> src(n + off);
            for (size_t i = 0; i < src.size(); ++i) {
              const uint16_t h = static_cast<uint16_t>((i * 7919u + n * 131u) & 0xffffu);
              src[i] = (h & 0x7c00u) == 0x7c00u ? static_cast<uint16_t>(h ^ 0x4000u) : h;  // exponent not all ones
            }
            if (at < n) src[off + at] = specials[(n + at) % 9];
            std::vector<float> got(n + 1, -7.0f);
            loadValuesWith(isa, d, src.data() + off, got.data(), n);
            for (size_t i = 0; i < n; ++i) {
              const uint16_t h = src[off + i];
              const float want = d == StorageDtype::kFloat16 ? halfToFloat(h) : bf16ToFloat(h);
              EXPECT_EQ(estest::floatBits(got[i]), estest::floatBits(want));
            }
            EXPECT_EQ(got[n], -7.0f);  // nothing written past n
          }
        }
      }
    }
  }
}

TEST(narrow_bags_equal_the_float32_bag_over_the_widened_rows) {
  // Rows stored narrow, and the same rows widened into a float32 table: every combiner, with
  // and without weights and clipping, bags of 0..40 entries and one past the widening buffer
  // (kWideMaxBytes at this dim), give the same bits from combineBagRows on either, and from
  // each fused narrow kernel (combine_narrow.h) for sums; dim 127 has every column block.
  for (size_t dim : {size_t{1}, size_t{7}, size_t{64}, size_t{127}}) {
    const size_t nrows = 50;
    const std::vector<float> v = randomFloats(nrows * dim);
    for (StorageDtype d : {StorageDtype::kFloat16, StorageDtype::kBfloat16}) {
      const size_t stride = storedValueBytes(d, dim);
      std::vector<uint8_t> stored(nrows * stride);
      std::vector<float> wide(nrows * dim);
      for (size_t r = 0; r < nrows; ++r) {
        std::vector<float> row(v.begin() + static_cast<long>(r * dim), v.begin() + static_cast<long>((r + 1) * dim));
        for (float& x : row) x = std::ldexp(std::fmod(x, 1.0f), static_cast<int>(r % 5));  // finite mostly; NaN stays NaN
        if (r == 3) row[0] = INFINITY;
        storeValues(d, row.data(), stored.data() + r * stride, dim);
        uint16_t* bits = reinterpret_cast<uint16_t*>(stored.data() + r * stride);
        if (r == 5) bits[dim - 1] = d == StorageDtype::kFloat16 ? 0x7c01 : 0x7f81;  // signalling NaNs (never stored by storeValues)
        if (r == 6) bits[0] = d == StorageDtype::kFloat16 ? 0xfd01 : 0xff81;
        loadValues(d, stored.data() + r * stride, wide.data() + r * dim, dim);
      }
      std::vector<int32_t> splits{0};
      std::vector<size_t> ids;
      uint32_t x = 99;
      const size_t big = (size_t{1} << 20) / (dim * sizeof(float)) + 3;
      for (size_t b = 0; b < 60; ++b) {
        const size_t len = b == 17 ? big : b == 18 ? 300 : (b * 7) % 41;
        for (size_t j = 0; j < len; ++j) {
          x = x * 1664525u + 1013904223u;
          ids.push_back((x >> 8) % nrows);
        }
        splits.push_back(static_cast<int32_t>(ids.size()));
      }
      std::vector<const void*> narrowRows(ids.size());
      std::vector<const void*> wideRows(ids.size());
      std::vector<float> weights(ids.size());
      for (size_t j = 0; j < ids.size(); ++j) {
        narrowRows[j] = stored.data() + ids[j] * stride;
        wideRows[j] = wide.data() + ids[j] * dim;
        weights[j] = j % 3 == 0 ? 1.0f : 0.25f * static_cast<float>(j % 7) - 0.5f;
      }
      const size_t bags = splits.size() - 1;
      std::vector<double> acc(dim);
      for (Combiner c : {Combiner::kSum, Combiner::kMean, Combiner::kSqrtn, Combiner::kMax, Combiner::kMin}) {
        for (bool weighted : {false, true}) {
          for (double maxNorm : {0.0, 0.75}) {
            std::vector<float> got(bags * dim, -1.0f);
            std::vector<float> want(bags * dim, -2.0f);
            // two spans, the second starting mid-bag list (entryBase != 0)
            const auto span = [&](size_t half, bool narrow, float* out) {
              const size_t r0 = half == 0 ? 0 : 25;
              const size_t r1 = half == 0 ? 25 : bags;
              const size_t eb = static_cast<size_t>(splits[r0]);
              const float* w = weighted ? weights.data() : nullptr;
              const void* const* rows = (narrow ? narrowRows.data() : wideRows.data()) + eb;
              return BagSpan{splits.data(), r0, r1, rows, eb, w, c, maxNorm, dim, out, acc.data(), narrow ? d : StorageDtype::kFloat32};
            };
            for (size_t half = 0; half < 2; ++half) {
              combineBagRows(span(half, true, got.data()));
              combineBagRows(span(half, false, want.data()));
            }
            size_t bad = 0;
            for (size_t i = 0; i < got.size(); ++i) {
              if (!sameBits(got[i], want[i])) ++bad;
            }
            EXPECT_EQ(bad, size_t{0});
            // every fused kernel the build and CPU have (sum, mean, sqrtn without clipping;
            // the others, and kPortable, decline and write nothing)
            const bool fusable = c != Combiner::kMax && c != Combiner::kMin && maxNorm == 0;
            for (WidenIsa isa : widenIsas()) {
              std::vector<float> fused(bags * dim, -3.0f);
              for (size_t half = 0; half < 2; ++half) {
                EXPECT_EQ(sumVectorRowsWith(isa, span(half, true, fused.data())), fusable && isa != WidenIsa::kPortable);
              }
              size_t badFused = 0;
              for (size_t i = 0; i < fused.size(); ++i) {
                if (fusable && isa != WidenIsa::kPortable ? !sameBits(fused[i], want[i]) : fused[i] != -3.0f) ++badFused;
              }
              EXPECT_EQ(badFused, size_t{0});
            }
          }
        }
      }
    }
  }
}

TEST(float32_fused_bag_sums_equal_a_plain_float64_loop) {
  // The float32 bag sum / mean / sqrtn kernels (combine_narrow.h: one per WidenIsa, and
  // combineBagRows, which picks the best) against the plain definition written out here:
  // per bag, per column, 0.0 plus each entry's value widened to float64 times its weight, in
  // bag order, divided by 1 (sum), the weight sum (mean) or the root of the squared weights'
  // sum (sqrtn), rounded to float32 once; a zero divisor gives 0. Rows hold random bit
  // patterns (NaNs, infinities, subnormals), -0.0 everywhere in one row, values that cancel;
  // bags of 0..40 entries and one of 300; dims with every column block (1..130).
  for (size_t dim : {size_t{1}, size_t{3}, size_t{4}, size_t{7}, size_t{8}, size_t{64}, size_t{127}, size_t{130}}) {
    const size_t nrows = 40;
    std::vector<float> v = randomFloats(nrows * dim);
    for (size_t r = 0; r < nrows; ++r) {
      for (size_t c = 0; c < dim; ++c) {
        float& x = v[r * dim + c];
        if (r % 4 != 0) x = std::ldexp(std::fmod(x, 1.0f), static_cast<int>(r % 7) * 9 - 20);  // finite (NaN stays NaN)
        if (r == 2) x = -0.0f;
        if (r == 3) x = c % 2 ? 1e30f : -1e30f;
      }
    }
    std::vector<int32_t> splits{0};
    std::vector<size_t> ids;
    uint32_t x = 7;
    for (size_t b = 0; b < 50; ++b) {
      const size_t len = b == 11 ? 300 : b == 12 ? 1 : (b * 5) % 41;
      for (size_t j = 0; j < len; ++j) {
        x = x * 1664525u + 1013904223u;
        ids.push_back(b == 12 ? 2 : (x >> 8) % nrows);  // bag 12: the -0.0 row alone
      }
      splits.push_back(static_cast<int32_t>(ids.size()));
    }
    std::vector<const void*> rows(ids.size());
    std::vector<float> weights(ids.size());
    for (size_t j = 0; j < ids.size(); ++j) {
      rows[j] = v.data() + ids[j] * dim;
      weights[j] = j % 3 == 0 ? 1.0f : 0.25f * static_cast<float>(j % 7) - 0.5f;
    }
    const size_t bags = splits.size() - 1;
    std::vector<double> acc(dim);
    for (Combiner c : {Combiner::kSum, Combiner::kMean, Combiner::kSqrtn}) {
      for (bool weighted : {false, true}) {
        std::vector<float> want(bags * dim);
        for (size_t b = 0; b < bags; ++b) {
          double wsum = 0, wsq = 0;
          for (int32_t j = splits[b]; j < splits[b + 1]; ++j) {
            const double w = weighted ? weights[j] : 1.0;
            wsum += w;
            wsq += w * w;
          }
          const double div = c == Combiner::kSum ? 1.0 : c == Combiner::kMean ? wsum : std::sqrt(wsq);
          for (size_t col = 0; col < dim; ++col) {
            double s = 0.0;
            for (int32_t j = splits[b]; j < splits[b + 1]; ++j) s = s + (weighted ? weights[j] : 1.0) * static_cast<double>(v[ids[j] * dim + col]);
            want[b * dim + col] = div == 0 ? 0.0f : static_cast<float>(s / div);
          }
        }
        const auto span = [&](size_t half, float* out) {
          const size_t r0 = half == 0 ? 0 : 20, r1 = half == 0 ? 20 : bags;
          const size_t eb = static_cast<size_t>(splits[r0]);
          return BagSpan{splits.data(), r0, r1, rows.data() + eb, eb, weighted ? weights.data() : nullptr, c, 0.0, dim, out, acc.data(), StorageDtype::kFloat32};
        };
        const auto bad = [&](const std::vector<float>& got) {
          size_t n = 0;
          for (size_t i = 0; i < got.size(); ++i) n += sameBits(got[i], want[i]) ? 0 : 1;
          return n;
        };
        std::vector<float> got(bags * dim, -1.0f);
        for (size_t half = 0; half < 2; ++half) combineBagRows(span(half, got.data()));
        EXPECT_EQ(bad(got), size_t{0});
        for (WidenIsa isa : widenIsas()) {
          std::vector<float> fused(bags * dim, -1.0f);
          for (size_t half = 0; half < 2; ++half) EXPECT_EQ(sumVectorRowsWith(isa, span(half, fused.data())), isa != WidenIsa::kPortable);
          if (isa != WidenIsa::kPortable) EXPECT_EQ(bad(fused), size_t{0});
        }
      }
    }
  }
}
