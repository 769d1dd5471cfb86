// Exclusive prefix sums of uint32 arrays, two group kernels per level: each group
// owns a tile of 256 elements (lane l: elements l*8 .. l*8+7 of the tile), sums it,
// the tile sums are scanned (recursively), then each tile is scanned with a
// shuffle-up scan across lanes plus its tile's offset. In place is allowed.
#pragma once

#include "launch.h"

namespace embedstack {
namespace cuda {

constexpr size_t kScanItems = 8;
constexpr size_t kScanTile = kLanes * kScanItems;

struct ScanTileSums {
  static constexpr const char* kName = "scanTileSums";
  static constexpr size_t kSharedBytes = 0;
  struct Args {
    const uint32_t* in;
    size_t n;
    uint32_t* sums;  // [tiles]
  };
  ES_KERNEL_BODY
  template <class G>
  ES_HD static void group(G& g, const Args& a, size_t tile) {
    typename G::template Lanes<uint32_t> s;
    g.each([&](int l) {
      uint32_t acc = 0;
      const size_t base = tile * kScanTile + static_cast<size_t>(l) * kScanItems;
      for (size_t k = 0; k < kScanItems; ++k) {
        if (base + k < a.n) acc += a.in[base + k];
      }
      s[l] = acc;
    });
    for (int m = 16; m >= 1; m >>= 1) {
      typename G::template Lanes<uint32_t> o = g.shflXor(s, m);
      g.each([&](int l) { s[l] += o[l]; });
    }
    g.each([&](int l) {
      if (l == 0) a.sums[tile] = s[l];
    });
  }
};

struct ScanTiles {
  static constexpr const char* kName = "scanTiles";
  static constexpr size_t kSharedBytes = 0;
  struct Args {
    const uint32_t* in;
    uint32_t* out;
    size_t n;
    const uint32_t* offsets;  // [tiles] exclusive tile offsets
  };
  ES_KERNEL_BODY
  template <class G>
  ES_HD static void group(G& g, const Args& a, size_t tile) {
    typename G::template Lanes<uint32_t> v[kScanItems];
    typename G::template Lanes<uint32_t> total;
    g.each([&](int l) {
      const size_t base = tile * kScanTile + static_cast<size_t>(l) * kScanItems;
      uint32_t acc = 0;
      for (size_t k = 0; k < kScanItems; ++k) {
        v[k][l] = base + k < a.n ? a.in[base + k] : 0;
        acc += v[k][l];
      }
      total[l] = acc;
    });
    // inclusive scan of the lane totals, then exclusive by subtracting each lane's own
    typename G::template Lanes<uint32_t> incl = total;
    for (int d = 1; d < kLanes; d <<= 1) {
      typename G::template Lanes<uint32_t> up = g.shflUp(incl, d);
      g.each([&](int l) {
        if (l >= d) incl[l] += up[l];
      });
    }
    g.each([&](int l) {
      const size_t base = tile * kScanTile + static_cast<size_t>(l) * kScanItems;
      uint32_t run = a.offsets[tile] + incl[l] - total[l];
      for (size_t k = 0; k < kScanItems; ++k) {
        if (base + k < a.n) a.out[base + k] = run;
        run += v[k][l];
      }
    });
  }
};

}  // namespace cuda
}  // namespace embedstack
