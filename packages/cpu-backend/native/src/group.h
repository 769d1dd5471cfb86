// SwissTable-style control bytes, probed 16 at a time.
//   full slot: 0b0hhhhhhh (7-bit hash fragment); empty: 0x80; deleted: 0xFE.
// SSE2 (`_mm_cmpeq_epi8` + `_mm_movemask_epi8`) where the compiler targets it, a
// portable SWAR version otherwise (or with -DEMBEDSTACK_FORCE_SWAR). Both return
// a mask, one bit per slot. The SWAR fragment match may report false positives
// next to a true match; callers compare keys anyway. Empty masks are exact.
//
// A group is one 64-byte cache line: 16 control bytes, then the slots' row indices,
// so one line brings a probe's fragments and rows together. Two layouts (key_index.h):
// 16 slots with 3-byte rows, or 12 slots with 4-byte rows whose control bytes 12..15
// are padding held at kCtrlDeleted. The matchers report all 16 bytes: padding never
// matches a fragment (high bit clear; a SWAR false positive needs a byte equal to the
// fragment ^ 1) nor matchEmpty, only matchFree, which the index masks to its slots.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__SSE2__) && !defined(EMBEDSTACK_FORCE_SWAR)
#include <emmintrin.h>
#define EMBEDSTACK_GROUP_SSE2 1
#endif

namespace embedstack {

constexpr uint8_t kCtrlEmpty = 0x80;
constexpr uint8_t kCtrlDeleted = 0xFE;
constexpr size_t kGroupWidth = 16;  // control bytes loaded per probe
constexpr size_t kGroupBytes = 64;  // control bytes + row indices of one group

/** Iterates the set bits (slot offsets) of a group mask. */
class BitMask {
 public:
  explicit BitMask(uint32_t mask) : mask_(mask) {}
  explicit operator bool() const { return mask_ != 0; }
  unsigned lowest() const { return static_cast<unsigned>(__builtin_ctz(mask_)); }
  void dropLowest() { mask_ &= mask_ - 1; }
  uint32_t raw() const { return mask_; }

 private:
  uint32_t mask_;
};

/** Name of the compiled probing implementation ("sse2" or "swar"). */
constexpr const char* groupImplementation() {
#ifdef EMBEDSTACK_GROUP_SSE2
  return "sse2";
#else
  return "swar";
#endif
}

#ifdef EMBEDSTACK_GROUP_SSE2

class Group {
 public:
  /** `ctrl` points at 16 control bytes, 16-byte aligned. */
  explicit Group(const uint8_t* ctrl) : v_(_mm_load_si128(reinterpret_cast<const __m128i*>(ctrl))) {}
  BitMask match(uint8_t fragment) const {
    return BitMask(static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_set1_epi8(static_cast<char>(fragment)), v_))));
  }
  BitMask matchEmpty() const {
    return BitMask(static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_set1_epi8(static_cast<char>(kCtrlEmpty)), v_))));
  }
  /** Empty or deleted (high bit set): the bytes an insert may take, padding included (mask it). */
  BitMask matchFree() const { return BitMask(static_cast<uint32_t>(_mm_movemask_epi8(v_))); }

 private:
  __m128i v_;
};

#else

class Group {
 public:
  explicit Group(const uint8_t* ctrl) {
    std::memcpy(&lo_, ctrl, 8);
    std::memcpy(&hi_, ctrl + 8, 8);
  }
  BitMask match(uint8_t fragment) const { return BitMask(gather(eq(lo_, fragment)) | (gather(eq(hi_, fragment)) << 8)); }
  BitMask matchEmpty() const { return BitMask(gather(empty(lo_)) | (gather(empty(hi_)) << 8)); }
  BitMask matchFree() const { return BitMask(gather(lo_ & kMsbs) | (gather(hi_ & kMsbs) << 8)); }

 private:
  static constexpr uint64_t kLsbs = 0x0101010101010101ULL;
  static constexpr uint64_t kMsbs = 0x8080808080808080ULL;
  // High bit of each byte equal to `b` (may also flag the byte above a true match).
  static uint64_t eq(uint64_t w, uint8_t b) {
    uint64_t x = w ^ (kLsbs * b);
    return (x - kLsbs) & ~x & kMsbs;
  }
  // High bit of each empty byte (0x80: high bit set, bit 1 clear; deleted 0xFE has bit 1 set).
  static uint64_t empty(uint64_t w) { return (w & ~(w << 6)) & kMsbs; }
  // Packs the high bits of the 8 bytes into 8 bits (byte k -> bit k).
  static uint32_t gather(uint64_t msbs) { return static_cast<uint32_t>(((msbs >> 7) * 0x0102040810204080ULL) >> 56); }
  uint64_t lo_, hi_;
};

#endif

}  // namespace embedstack
