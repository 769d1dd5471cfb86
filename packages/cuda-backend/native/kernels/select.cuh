// Radix selection of the rows to keep: among n candidates (rows and/or new keys)
// keep the K best by (score desc, new keys first, smaller signed key), the
// eviction order of core's scores.ts. Each candidate's rank is the 17-byte
// big-endian string [~score (8), resident ? 1 : 0 (1), key ^ 2^63 (8)], unique per
// candidate, so selecting the K smallest strings is exact: one pass per byte,
// most significant first, histograms only the still-undecided candidates, the
// host picks the byte value where the K-th falls, and SelectMark decides every
// candidate on either side of it (keep below, drop above).
#pragma once

#include "launch.h"
#include "sort.cuh"

namespace embedstack {
namespace cuda {

struct SelectCandidate {
  uint64_t score;
  int64_t key;
  uint32_t ref;       // row (resident) or unique index (new key)
  uint32_t resident;  // 1 resident, 0 new
};

enum : uint8_t { kUndecided = 0, kKeep = 1, kDrop = 2 };
constexpr int kSelectBytes = 17;

ES_HD inline uint32_t selectDigit(const SelectCandidate& c, int pass) {
  if (pass < 8) return static_cast<uint32_t>((~c.score >> (8 * (7 - pass))) & 0xffu);
  if (pass == 8) return c.resident ? 1u : 0u;
  const uint64_t k = static_cast<uint64_t>(c.key) ^ 0x8000000000000000ULL;
  return static_cast<uint32_t>((k >> (8 * (16 - pass))) & 0xffu);
}

struct SelectHistogram {
  static constexpr const char* kName = "selectHistogram";
  static constexpr size_t kSharedBytes = kRadixBins * sizeof(uint32_t);
  struct Args {
    const SelectCandidate* c;
    const uint8_t* state;
    size_t n;
    int pass;
    uint32_t* hist;  // [256], accumulated
  };
  ES_KERNEL_BODY
  template <class G>
  ES_HD static void group(G& g, const Args& a, size_t tile) {
    uint32_t* h = reinterpret_cast<uint32_t*>(g.shared);
    clearBins(g, h);
    countTile(
        g, h, tile, a.n, [&](size_t i) { return selectDigit(a.c[i], a.pass); },
        [&](size_t i) { return a.state[i] == kUndecided; });
    g.each([&](int l) {
      for (uint32_t d = static_cast<uint32_t>(l); d < kRadixBins; d += kLanes) {
        if (h[d]) atomicAddU32(&a.hist[d], h[d]);
      }
    });
  }
};

struct SelectMark {
  static constexpr const char* kName = "selectMark";
  struct Args {
    const SelectCandidate* c;
    uint8_t* state;
    int pass;     // -1: decide every undecided candidate as `rest`
    uint32_t at;  // the byte value holding the K-th
    uint8_t rest;
  };
  ES_HD static void thread(const Args& a, size_t i) {
    if (a.state[i] != kUndecided) return;
    if (a.pass < 0) {
      a.state[i] = a.rest;
      return;
    }
    const uint32_t d = selectDigit(a.c[i], a.pass);
    if (d < a.at) a.state[i] = kKeep;
    if (d > a.at) a.state[i] = kDrop;
  }
};

}  // namespace cuda
}  // namespace embedstack
