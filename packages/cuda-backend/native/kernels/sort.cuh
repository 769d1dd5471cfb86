// Stable LSD radix sort of (uint32 key, uint32 value) pairs, 8 bits per pass. A
// group owns a tile of 256 elements taken as 8 chunks of 32 (lane l of chunk c is
// element tile*256 + c*32 + l), so tile order, chunk order and lane order are the
// input order:
//  - SortHistogram counts the tile's digits in shared memory into
//    counts[digit * tiles + tile] (digit-major, so one exclusive scan gives every
//    (digit, tile) its output offset);
//  - SortScatter ranks each chunk's lanes among the lanes with the same digit
//    (matchAny: a warp match on the device, emulated on the host) and writes them
//    at offset + rank, then the last lane of each digit advances that offset.
#pragma once

#include "launch.h"

namespace embedstack {
namespace cuda {

constexpr size_t kSortChunks = 8;
constexpr size_t kSortTile = kLanes * kSortChunks;
constexpr uint32_t kRadixBins = 256;

ES_HD inline uint32_t radixDigit(uint32_t key, uint32_t shift) {
  return (key >> shift) & 0xffu;
}

/** Zeroes a group's 256 shared bins (then syncs). */
ES_KERNEL_BODY
template <class G>
ES_HD inline void clearBins(G& g, uint32_t* bins) {
  g.each([&](int l) {
    for (uint32_t d = static_cast<uint32_t>(l); d < kRadixBins; d += kLanes) bins[d] = 0;
  });
  g.sync();
}

/** Counts digit(i) into the group's shared bins for the elements of a tile that `counted(i)` accepts (then syncs). */
ES_KERNEL_BODY
template <class G, class Digit, class Counted>
ES_HD inline void countTile(G& g, uint32_t* bins, size_t tile, size_t n, Digit&& digit, Counted&& counted) {
  g.each([&](int l) {
    for (size_t c = 0; c < kSortChunks; ++c) {
      const size_t i = tile * kSortTile + c * kLanes + static_cast<size_t>(l);
      if (i < n && counted(i)) atomicAddU32(&bins[digit(i)], 1u);
    }
  });
  g.sync();
}

struct SortHistogram {
  static constexpr const char* kName = "sortHistogram";
  static constexpr size_t kSharedBytes = kRadixBins * sizeof(uint32_t);
  struct Args {
    const uint32_t* keys;
    size_t n;
    uint32_t shift;
    size_t tiles;
    uint32_t* counts;  // [256 * tiles]
  };
  ES_KERNEL_BODY
  template <class G>
  ES_HD static void group(G& g, const Args& a, size_t tile) {
    uint32_t* hist = reinterpret_cast<uint32_t*>(g.shared);
    clearBins(g, hist);
    countTile(
        g, hist, tile, a.n, [&](size_t i) { return radixDigit(a.keys[i], a.shift); }, [](size_t) { return true; });
    g.each([&](int l) {
      for (uint32_t d = static_cast<uint32_t>(l); d < kRadixBins; d += kLanes) a.counts[d * a.tiles + tile] = hist[d];
    });
  }
};

struct SortScatter {
  static constexpr const char* kName = "sortScatter";
  static constexpr size_t kSharedBytes = kRadixBins * sizeof(uint32_t);
  struct Args {
    const uint32_t* keys;
    const uint32_t* values;
    size_t n;
    uint32_t shift;
    size_t tiles;
    const uint32_t* offsets;  // scanned counts
    uint32_t* outKeys;
    uint32_t* outValues;
  };
  ES_KERNEL_BODY
  template <class G>
  ES_HD static void group(G& g, const Args& a, size_t tile) {
    uint32_t* next = reinterpret_cast<uint32_t*>(g.shared);
    g.each([&](int l) {
      for (uint32_t d = static_cast<uint32_t>(l); d < kRadixBins; d += kLanes) next[d] = a.offsets[d * a.tiles + tile];
    });
    g.sync();
    for (size_t c = 0; c < kSortChunks; ++c) {
      const size_t first = tile * kSortTile + c * kLanes;
      if (first >= a.n) break;  // group-uniform
      typename G::template Lanes<uint32_t> digit;
      g.each([&](int l) {
        const size_t i = first + static_cast<size_t>(l);
        digit[l] = i < a.n ? radixDigit(a.keys[i], a.shift) : kRadixBins;  // past the end: a digit of its own
      });
      typename G::template Lanes<uint32_t> peers = g.matchAny(digit);
      g.each([&](int l) {
        const size_t i = first + static_cast<size_t>(l);
        if (i >= a.n) return;
        const uint32_t pos = next[digit[l]] + static_cast<uint32_t>(popc32(peers[l] & lanesBelow(l)));
        a.outKeys[pos] = a.keys[i];
        a.outValues[pos] = a.values[i];
      });
      g.sync();
      g.each([&](int l) {
        const size_t i = first + static_cast<size_t>(l);
        if (i < a.n && highestBit(peers[l]) == l) next[digit[l]] += static_cast<uint32_t>(popc32(peers[l]));
      });
      g.sync();
    }
  }
};

}  // namespace cuda
}  // namespace embedstack
