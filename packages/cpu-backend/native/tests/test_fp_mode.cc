// The floating-point mode the kernels run in (fp_mode.h): DefaultFpMode sets the default on
// the calling thread and gives the caller its own mode back; a pool's threads start in the
// default mode whatever the mode of the thread that created them; a subnormal sum computed
// under DefaultFpMode is the same bits with FTZ / DAZ set by the caller.
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <mutex>
#include <vector>

#include "fp_mode.h"
#include "test.h"
#include "thread_pool.h"

using namespace embedstack;

namespace {

#if defined(EMBEDSTACK_FP_MODE_X86)
constexpr FpMode kFlush = kDefaultFpMode | 0x8000u | 0x0040u;  // FTZ and DAZ
#elif defined(EMBEDSTACK_FP_MODE_ARM64)
constexpr FpMode kFlush = FpMode{1} << 24;  // FPCR.FZ
#else
constexpr FpMode kFlush = 0;
#endif
constexpr bool kHasModes = kFlush != kDefaultFpMode;

/** A float32 subnormal from its bits, and a sum the compiler cannot fold (volatile operands). */
float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float subnormalSum() {
  volatile float a = fromBits(0x00000300u);  // 768 * 2^-149
  volatile float b = fromBits(0x00000005u);  // 5 * 2^-149
  return a + b;                              // 773 * 2^-149: a subnormal, exact
}

/** Runs `fn` with this thread's mode set to `mode`, then restores it; returns the mode `fn` left. */
template <class F>
FpMode withMode(FpMode mode, F fn) {
  const FpMode saved = readFpMode();
  writeFpMode(mode);
  fn();
  const FpMode left = readFpMode();
  writeFpMode(saved);
  return left;
}

}  // namespace

TEST(default_fp_mode_computes_subnormals_and_gives_the_caller_its_mode_back) {
  EXPECT_EQ(estest::floatBits(subnormalSum()), 0x00000305u);
  if (!kHasModes) return;
  uint32_t flushed = 1;
  uint32_t guarded = 0;
  const FpMode left = withMode(kFlush, [&] {
    flushed = estest::floatBits(subnormalSum());
    const DefaultFpMode fp;
    guarded = estest::floatBits(subnormalSum());
  });
  EXPECT_EQ(flushed, 0u);  // DAZ reads the subnormals as 0 (and FTZ would flush the sum)
  EXPECT_EQ(guarded, 0x00000305u);
  EXPECT_EQ(left & kFpModeControl, kFlush & kFpModeControl);
  // the default mode itself is left alone (no write)
  withMode(kDefaultFpMode, [&] {
    const DefaultFpMode fp;
    EXPECT_TRUE(isDefaultFpMode(readFpMode()));
  });
}

TEST(pool_threads_start_in_the_default_fp_mode) {
  if (!kHasModes) return;
  std::vector<FpMode> modes;
  std::vector<uint32_t> sums;
  std::mutex m;
  withMode(kFlush, [&] {
    ThreadPool pool(3, 0);  // created by a thread in the flush mode: its workers inherit it
    for (int round = 0; round < 5; ++round) {
      pool.parallelFor(64, 1, [&](size_t, size_t) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));  // long enough for the workers to take chunks
        const FpMode mode = readFpMode();
        const uint32_t s = estest::floatBits(subnormalSum());
        std::lock_guard<std::mutex> lock(m);
        modes.push_back(mode);
        sums.push_back(s);
      });
    }
  });
  // chunks ran on the caller (flush mode: the binding's DefaultFpMode covers it) and on workers (default)
  size_t onWorkers = 0;
  for (size_t i = 0; i < modes.size(); ++i) {
    if ((modes[i] & kFpModeControl) == (kFlush & kFpModeControl)) continue;  // the calling thread
    ++onWorkers;
    EXPECT_TRUE(isDefaultFpMode(modes[i]));
    EXPECT_EQ(sums[i], 0x00000305u);
  }
  EXPECT_TRUE(onWorkers > 0);
}
