// The floating-point mode the kernels compute in: IEEE round to nearest, subnormals kept
// (no flush-to-zero, no denormals-are-zero) and every exception masked: the C default
// (x86-64 MXCSR 0x1F80, AArch64 FPCR 0).
//
// Another library in the process may change the mode of the JS thread (a math library
// built with -ffast-math sets FTZ / DAZ when it loads; one may unmask an exception). The
// sync calls run on that thread, and the pool threads take the mode of the thread that
// created them. So each pool thread sets the default when it starts (setDefaultFpMode),
// and a binding call runs its kernels under DefaultFpMode, which sets the default on the
// calling thread and restores the caller's mode when it ends: the results are the same bits
// whatever mode the caller runs in, and the caller's mode is left as it was.
//
// Cost: reading the mode (stmxcsr / mrs fpcr) and comparing, a few cycles; a caller in
// another mode also pays two writes (ldmxcsr / msr fpcr, tens of cycles each).
#pragma once

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64)
#include <xmmintrin.h>
#define EMBEDSTACK_FP_MODE_X86 1
#elif defined(__aarch64__)
#define EMBEDSTACK_FP_MODE_ARM64 1
#endif

namespace embedstack {

#if defined(EMBEDSTACK_FP_MODE_X86)
using FpMode = uint32_t;
/** MXCSR: every exception masked (bits 7-12), round to nearest (13-14 clear), FTZ (15) and DAZ (6) clear. */
constexpr FpMode kDefaultFpMode = 0x1F80u;
/** The control bits (6-15); bits 0-5 are the sticky exception flags, not part of the mode. */
constexpr FpMode kFpModeControl = 0xFFC0u;
inline FpMode readFpMode() noexcept { return _mm_getcsr(); }
inline void writeFpMode(FpMode m) noexcept { _mm_setcsr(m); }
#elif defined(EMBEDSTACK_FP_MODE_ARM64)
using FpMode = uint64_t;
/** FPCR: round to nearest, FZ / FZ16 / DN / AHP clear, no exception trapped. */
constexpr FpMode kDefaultFpMode = 0;
constexpr FpMode kFpModeControl = ~FpMode{0};  // FPCR holds control bits only (the flags are in FPSR)
inline FpMode readFpMode() noexcept {
  FpMode m;
  __asm__ __volatile__("mrs %0, fpcr" : "=r"(m));
  return m;
}
inline void writeFpMode(FpMode m) noexcept { __asm__ __volatile__("msr fpcr, %0" : : "r"(m)); }
#else
using FpMode = uint32_t;
constexpr FpMode kDefaultFpMode = 0;
constexpr FpMode kFpModeControl = 0;
inline FpMode readFpMode() noexcept { return 0; }
inline void writeFpMode(FpMode) noexcept {}
#endif

/** Whether `m` is the default mode (its exception flags aside). */
inline bool isDefaultFpMode(FpMode m) noexcept { return (m & kFpModeControl) == kDefaultFpMode; }

/** Sets the default mode on this thread (a pool thread as it starts). */
inline void setDefaultFpMode() noexcept {
  if (!isDefaultFpMode(readFpMode())) writeFpMode(kDefaultFpMode);
}

/** The default mode on this thread for the object's lifetime; the thread's own mode is restored after. */
class DefaultFpMode {
 public:
  DefaultFpMode() noexcept : saved_(readFpMode()), changed_(!isDefaultFpMode(saved_)) {
    if (changed_) writeFpMode(kDefaultFpMode);
  }
  ~DefaultFpMode() {
    if (changed_) writeFpMode(saved_);
  }
  DefaultFpMode(const DefaultFpMode&) = delete;
  DefaultFpMode& operator=(const DefaultFpMode&) = delete;

 private:
  const FpMode saved_;
  const bool changed_;
};

}  // namespace embedstack
