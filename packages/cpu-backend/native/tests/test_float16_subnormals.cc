// float16 subnormals (|x| < 2^-14) on every conversion path, against halves and float32
// bits worked out by hand, with the thread's MXCSR as it starts and with FTZ, DAZ and both
// set (a library loaded into the process may set them on the JS thread; the addon's calls
// run in the default mode since fp_mode.h, but these conversions are right in any mode, as
// the kernels were before). Narrowing: floatToHalf, storeValues and roundValues (the multiversioned row
// loops). Widening: halfToFloat, loadValuesWith every WidenIsa (portable, F16C vcvtph2ps,
// AVX-512) and loadValues / loadRows, and the bag kernels that widen where they read: each
// fused narrow sum (sumVectorRowsWith), combineBagRows' max over rows widened in groups
// (loadRows), and over a bag too large to widen at once (each element by halfToFloat).
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "combine.h"
#include "combine_narrow.h"
#include "storage.h"
#include "test.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define ES_TEST_MXCSR 1
#else
#define ES_TEST_MXCSR 0
#endif

using namespace embedstack;

namespace {

// float32 bits -> the float16 round-to-nearest-even gives (2^-24 is float16's smallest subnormal).
struct Narrow {
  uint32_t f;
  uint16_t h;
};
const Narrow kNarrow[] = {
    {0x33800000u, 0x0001},  // 2^-24: the smallest subnormal
    {0x33000000u, 0x0000},  // 2^-25 = 0.5 * 2^-24: a tie between 0 and 1 -> 0 (even)
    {0x33000001u, 0x0001},  // just above 2^-25 -> 1
    {0x33400000u, 0x0001},  // 0.75 * 2^-24 -> 1
    {0x33c00000u, 0x0002},  // 1.5 * 2^-24: a tie between 1 and 2 -> 2 (even)
    {0x34200000u, 0x0002},  // 2.5 * 2^-24: a tie between 2 and 3 -> 2 (even)
    {0x38000000u, 0x0200},  // 2^-15 = 2^-14 * 0.5 -> 512 * 2^-24
    {0x387f8000u, 0x03fe},  // 1022 * 2^-24, exact
    {0x387fa000u, 0x03fe},  // 1022.5 * 2^-24: a tie between 1022 and 1023 -> 1022 (even)
    {0x387fc000u, 0x03ff},  // 1023 * 2^-24: the largest subnormal (6.0976e-5), exact
    {0x387fe000u, 0x0400},  // 1023.5 * 2^-24: a tie between 1023 and 1024 -> 1024 = 2^-14 (even), the smallest normal
    {0x387fffffu, 0x0400},  // just below 2^-14 -> 2^-14
    {0x38800000u, 0x0400},  // 2^-14
    {0xb3800000u, 0x8001},  // -2^-24
    {0xb2800000u, 0x8000},  // -2^-26 -> -0
    {0xb3000000u, 0x8000},  // -2^-25: a tie -> -0 (even)
    {0x00080000u, 0x0000},  // 2^-130, a float32 subnormal -> 0
    {0x80000001u, 0x8000},  // -2^-149, the smallest float32 subnormal -> -0
    {0x00000000u, 0x0000},
    {0x80000000u, 0x8000},
};

// float16 bits -> float32 bits of its exact value.
struct Wide {
  uint16_t h;
  uint32_t f;
};
const Wide kWide[] = {
    {0x0001, 0x33800000u},  // 2^-24
    {0x0002, 0x34000000u},  // 2^-23
    {0x0003, 0x34400000u},  // 1.5 * 2^-23
    {0x0200, 0x38000000u},  // 2^-15
    {0x03fe, 0x387f8000u},  // 1022 * 2^-24 = 1.99609375 * 2^-15
    {0x03ff, 0x387fc000u},  // 1023 * 2^-24 = 1.998046875 * 2^-15
    {0x0400, 0x38800000u},  // 2^-14, the smallest normal
    {0x8001, 0xb3800000u},  // -2^-24
    {0x83ff, 0xb87fc000u},  // -1023 * 2^-24
    {0x0000, 0x00000000u},
    {0x8000, 0x80000000u},
};
constexpr size_t kWideCases = sizeof(kWide) / sizeof(kWide[0]);

/** The hand-written widening of a half that kNarrow expects (every one is in kWide). */
uint32_t wideOf(uint16_t h) {
  for (const Wide& w : kWide) {
    if (w.h == h) return w.f;
  }
  return 0xffffffffu;
}

/** Row length: three AVX-512 blocks of 16, the AVX-512 half block of 8 and a tail of 5, not a multiple of 4. */
constexpr size_t kRow = 61;

std::string hex(uint32_t x) {
  std::ostringstream s;
  s << "0x" << std::hex << x;
  return s.str();
}

/** The MXCSR modes the checks run under: FTZ (bit 15) and DAZ (bit 6). */
struct Mode {
  const char* name;
  unsigned bits;
};
const Mode kModes[] = {{"default", 0u}, {"FTZ", 0x8000u}, {"DAZ", 0x0040u}, {"FTZ+DAZ", 0x8040u}};

/** Runs `checks` with the mode's FTZ / DAZ bits set on this thread, then restores the MXCSR. */
template <class F>
void underMode(const Mode& m, F checks) {
#if ES_TEST_MXCSR
  const unsigned saved = _mm_getcsr();
  _mm_setcsr((saved & ~0x8040u) | m.bits);
  checks();
  _mm_setcsr(saved);
#else
  if (m.bits == 0) checks();  // FTZ / DAZ are x86 MXCSR bits
#endif
}

#define CHECK_BITS(got, want, path, mode, i)                                                                    \
  do {                                                                                                          \
    const uint32_t g_ = (got), w_ = (want);                                                                     \
    if (g_ != w_)                                                                                               \
      ::estest::fail(__FILE__, __LINE__,                                                                        \
                     std::string(path) + " under " + (mode) + ", case " + std::to_string(i) + ": got " + hex(g_) + \
                         ", want " + hex(w_));                                                                  \
  } while (0)

/** A row of kRow halves: kWide's halves in turn, starting at `shift`, so each lands in every part of a row. */
std::vector<uint16_t> halfRow(size_t shift) {
  std::vector<uint16_t> row(kRow);
  for (size_t i = 0; i < kRow; ++i) row[i] = kWide[(i + shift) % kWideCases].h;
  return row;
}
uint32_t wantOfRow(size_t shift, size_t i) { return kWide[(i + shift) % kWideCases].f; }

}  // namespace

TEST(float16_narrowing_rounds_subnormals_to_nearest_even_under_ftz_and_daz) {
  constexpr size_t kCases = sizeof(kNarrow) / sizeof(kNarrow[0]);
  for (const Mode& m : kModes) {
    underMode(m, [&] {
      for (size_t i = 0; i < kCases; ++i) {
        CHECK_BITS(floatToHalf(bitsFloat(kNarrow[i].f)), kNarrow[i].h, "floatToHalf", m.name, i);
      }
      // the row loops, each case at every position of a row (vector body and tail)
      for (size_t shift = 0; shift < kCases; ++shift) {
        std::vector<float> src(kRow);
        for (size_t i = 0; i < kRow; ++i) src[i] = bitsFloat(kNarrow[(i + shift) % kCases].f);
        std::vector<uint16_t> stored(kRow + 2, 0x5555);
        storeValues(StorageDtype::kFloat16, src.data(), stored.data(), kRow);
        std::vector<float> rounded = src;
        roundValues(StorageDtype::kFloat16, rounded.data(), kRow);
        for (size_t i = 0; i < kRow; ++i) {
          const Narrow& c = kNarrow[(i + shift) % kCases];
          CHECK_BITS(stored[i], c.h, "storeValues", m.name, (i + shift) % kCases);
          CHECK_BITS(estest::floatBits(rounded[i]), wideOf(c.h), "roundValues", m.name, (i + shift) % kCases);
        }
        EXPECT_EQ(stored[kRow], 0x5555);
      }
    });
  }
}

TEST(float16_widening_is_exact_for_subnormals_on_every_path_under_ftz_and_daz) {
  for (const Mode& m : kModes) {
    underMode(m, [&] {
      for (size_t i = 0; i < kWideCases; ++i) {
        CHECK_BITS(estest::floatBits(halfToFloat(kWide[i].h)), kWide[i].f, "halfToFloat", m.name, i);
      }
      for (size_t shift = 0; shift < kWideCases; ++shift) {
        const std::vector<uint16_t> row = halfRow(shift);
        std::vector<float> got(kRow);
        for (WidenIsa isa : widenIsas()) {
          const std::string path = "loadValuesWith(isa " + std::to_string(static_cast<int>(isa)) + ")";
          loadValuesWith(isa, StorageDtype::kFloat16, row.data(), got.data(), kRow);
          for (size_t i = 0; i < kRow; ++i) CHECK_BITS(estest::floatBits(got[i]), wantOfRow(shift, i), path, m.name, (i + shift) % kWideCases);
        }
        loadValues(StorageDtype::kFloat16, row.data(), got.data(), kRow);
        for (size_t i = 0; i < kRow; ++i) CHECK_BITS(estest::floatBits(got[i]), wantOfRow(shift, i), "loadValues", m.name, (i + shift) % kWideCases);
        const void* rows[1] = {row.data()};
        loadRows(StorageDtype::kFloat16, rows, 1, kRow, got.data(), 1);
        for (size_t i = 0; i < kRow; ++i) CHECK_BITS(estest::floatBits(got[i]), wantOfRow(shift, i), "loadRows", m.name, (i + shift) % kWideCases);
      }
    });
  }
}

TEST(float16_bags_read_subnormals_exactly_under_ftz_and_daz) {
  // kWideCases bags of one entry each (row `shift` for bag `shift`): a bag's sum, mean and
  // max are its row's values; then one bag of 4400 entries of row 0 (more than kWideMaxBytes
  // once widened: its elements widened one at a time), whose max is row 0 again.
  std::vector<std::vector<uint16_t>> rowsData;
  for (size_t shift = 0; shift < kWideCases; ++shift) rowsData.push_back(halfRow(shift));
  std::vector<const void*> rows;
  std::vector<int32_t> splits{0};
  for (size_t b = 0; b < kWideCases; ++b) {
    rows.push_back(rowsData[b].data());
    splits.push_back(static_cast<int32_t>(rows.size()));
  }
  std::vector<double> acc(kRow);
  const auto span = [&](const std::vector<int32_t>& sp, const std::vector<const void*>& rs, Combiner c, float* out) {
    return BagSpan{sp.data(), 0, sp.size() - 1, rs.data(), 0, nullptr, c, 0.0, kRow, out, acc.data(), StorageDtype::kFloat16};
  };
  // sums start from +0, so a bag of one -0 sums to +0 (as core's reference); max keeps -0
  const auto checkBags = [&](const std::vector<float>& out, bool sum, const std::string& path, const char* mode) {
    for (size_t b = 0; b < kWideCases; ++b) {
      for (size_t i = 0; i < kRow; ++i) {
        const uint32_t want = wantOfRow(b, i);
        CHECK_BITS(estest::floatBits(out[b * kRow + i]), sum && want == 0x80000000u ? 0u : want, path, mode, (i + b) % kWideCases);
      }
    }
  };
  const std::vector<const void*> bigRows(4400, rowsData[0].data());
  const std::vector<int32_t> bigSplits{0, static_cast<int32_t>(bigRows.size())};
  for (const Mode& m : kModes) {
    underMode(m, [&] {
      for (Combiner c : {Combiner::kSum, Combiner::kMean, Combiner::kMax}) {
        std::vector<float> out(kWideCases * kRow, -1.0f);
        combineBagRows(span(splits, rows, c, out.data()));
        checkBags(out, c != Combiner::kMax, "combineBagRows(" + std::to_string(static_cast<int>(c)) + ")", m.name);
      }
      for (WidenIsa isa : widenIsas()) {
        std::vector<float> out(kWideCases * kRow, -1.0f);
        if (!sumVectorRowsWith(isa, span(splits, rows, Combiner::kSum, out.data()))) continue;  // kPortable has none
        checkBags(out, true, "sumVectorRowsWith(isa " + std::to_string(static_cast<int>(isa)) + ")", m.name);
      }
      std::vector<float> out(kRow, -1.0f);
      combineBagRows(span(bigSplits, bigRows, Combiner::kMax, out.data()));
      for (size_t i = 0; i < kRow; ++i) CHECK_BITS(estest::floatBits(out[i]), wantOfRow(0, i), "combineBagRows(max, one large bag)", m.name, i % kWideCases);
    });
  }
}
