// Key hashing for the dynamic table and the batch dedupe (ES_HD: the CUDA backend
// hashes with it too). Keys are int64 (int32 keys are sign-extended), every value
// valid: no sentinel keys.
#pragma once

#include <cstdint>

#include "hd.h"

namespace embedstack {

/** MurmurHash3's 64-bit finalizer: full avalanche, 2 multiplies. */
ES_HD inline uint64_t hashKey(int64_t key) {
  uint64_t k = static_cast<uint64_t>(key);
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

/** The 7-bit fragment stored in a slot's control byte (low bits of the hash). */
ES_HD inline uint8_t hashFragment(uint64_t h) {
  return static_cast<uint8_t>(h & 0x7f);
}

/** Group of a hash among `groups` (< 2^32) groups: high 32 bits, multiply-shift (no power of two needed). */
ES_HD inline uint64_t hashGroup(uint64_t h, uint64_t groups) {
  return ((h >> 32) * groups) >> 32;
}

}  // namespace embedstack
