#include "primitives.h"

#include <vector>

#include "dedupe.cuh"
#include "scan.cuh"
#include "sort.cuh"

namespace embedstack {
namespace cuda {

namespace {

size_t tilesOf(size_t n, size_t tile) {
  return (n + tile - 1) / tile;
}

/**
 * Occurrence indices, positions and counts are uint32 on the device, and 0xffffffff
 * marks an empty dedupe slot: a batch must index below it (V8's typed arrays may be longer).
 */
void checkBatch(size_t n) {
  ES_CHECK(n < kEmptySlot, kInvalidArgument,
           "Expected a batch of at most " << (kEmptySlot - 1) << " keys on the CUDA backend but received " << n);
}

/** Flags (uint8) -> uint32 for the scan, and the scatter of flagged indices. */
struct FlagsToWords {
  static constexpr const char* kName = "flagsToWords";
  struct Args {
    const uint8_t* flags;
    uint32_t* words;
  };
  ES_HD static void thread(const Args& a, size_t i) { a.words[i] = a.flags[i] ? 1u : 0u; }
};

struct ScatterFlagged {
  static constexpr const char* kName = "scatterFlagged";
  struct Args {
    const uint8_t* flags;
    const uint32_t* positions;
    uint32_t* out;
    uint32_t base;
  };
  ES_HD static void thread(const Args& a, size_t i) {
    if (a.flags[i]) a.out[a.positions[i]] = a.base + static_cast<uint32_t>(i);
  }
};

}  // namespace

uint32_t exclusiveScan(Stage& st, const uint32_t* in, uint32_t* out, size_t n) {
  Exec& ex = st.exec();
  if (n == 0) return 0;
  const size_t tiles = tilesOf(n, kScanTile);
  uint32_t* sums = st.scratch<uint32_t>(tiles, "scan tile sums");
  launchGroups<ScanTileSums>(ex, tiles, {in, n, sums});
  uint32_t total;
  if (tiles == 1) {
    total = readBack(ex, sums);
    ex.zero(sums, sizeof(uint32_t));
  } else {
    total = exclusiveScan(st, sums, sums, tiles);
  }
  launchGroups<ScanTiles>(ex, tiles, {in, out, n, sums});
  return total;
}

void sortPairs(Stage& st, uint32_t* keys, uint32_t* values, size_t n, uint32_t keyBits) {
  Exec& ex = st.exec();
  if (n <= 1 || keyBits == 0) return;
  const size_t tiles = tilesOf(n, kSortTile);
  uint32_t* counts = st.scratch<uint32_t>(kRadixBins * tiles, "radix sort counts");
  uint32_t* k2 = st.scratch<uint32_t>(n, "radix sort keys");
  uint32_t* v2 = st.scratch<uint32_t>(n, "radix sort values");
  uint32_t* srcK = keys;
  uint32_t* srcV = values;
  uint32_t* dstK = k2;
  uint32_t* dstV = v2;
  for (uint32_t shift = 0; shift < keyBits; shift += 8) {
    launchGroups<SortHistogram>(ex, tiles, {srcK, n, shift, tiles, counts});
    exclusiveScan(st, counts, counts, kRadixBins * tiles);
    launchGroups<SortScatter>(ex, tiles, {srcK, srcV, n, shift, tiles, counts, dstK, dstV});
    std::swap(srcK, dstK);
    std::swap(srcV, dstV);
  }
  if (srcK != keys) {
    ex.copy(keys, srcK, n * sizeof(uint32_t));
    ex.copy(values, srcV, n * sizeof(uint32_t));
  }
}

Dedupe dedupe(Stage& st, const int64_t* keys, size_t n, bool occurrenceLists) {
  checkBatch(n);
  Exec& ex = st.exec();
  Dedupe d;
  d.n = n;
  d.keys = keys;
  if (n == 0) {
    d.occOffsets = st.scratch<uint32_t>(1, "occurrence offsets");
    ex.zero(d.occOffsets, sizeof(uint32_t));
    return d;
  }
  size_t slots = 64;
  while (slots < 2 * n) slots *= 2;
  uint32_t* table = st.scratch<uint32_t>(slots, "the dedupe table");
  launchThreads<Fill<uint32_t>>(ex, slots, {table, kEmptySlot});
  launchThreads<DedupeInsert>(ex, n, {keys, table, slots - 1});
  uint32_t* first = st.scratch<uint32_t>(n, "first occurrences");
  uint32_t* flag = st.scratch<uint32_t>(n, "first-occurrence flags");
  launchThreads<DedupeFirst>(ex, n, {keys, table, slots - 1, first, flag});
  d.unique = exclusiveScan(st, flag, flag, n);
  const size_t u = d.unique;
  d.uniqueOf = st.scratch<uint32_t>(n, "unique ids");
  d.uniqueKeys = st.scratch<int64_t>(u, "unique keys");
  d.firstOf = st.scratch<uint32_t>(u, "first occurrences");
  d.lastOf = st.scratch<uint32_t>(u, "last occurrences");
  d.countOf = st.scratch<uint32_t>(u + 1, "occurrence counts");
  ex.zero(d.lastOf, u * sizeof(uint32_t));
  ex.zero(d.countOf, (u + 1) * sizeof(uint32_t));
  launchThreads<DedupeAssign>(ex, n, {keys, first, flag, d.uniqueOf, d.uniqueKeys, d.firstOf, d.lastOf, d.countOf});
  if (occurrenceLists) {
    d.occOffsets = st.scratch<uint32_t>(u + 1, "occurrence offsets");
    exclusiveScan(st, d.countOf, d.occOffsets, u + 1);  // countOf[u] is 0: offsets[u] = n
    uint32_t* sortKeys = st.scratch<uint32_t>(n, "occurrence sort keys");
    d.occList = st.scratch<uint32_t>(n, "occurrence lists");
    ex.copy(sortKeys, d.uniqueOf, n * sizeof(uint32_t));
    launchThreads<Iota>(ex, n, {d.occList});
    uint32_t bits = 0;
    while (bits < 32 && (size_t{1} << bits) < u) bits += 8;
    sortPairs(st, sortKeys, d.occList, n, bits);
  }
  return d;
}

void selectKeep(Stage& st, const SelectCandidate* c, size_t n, size_t keep, uint8_t* state) {
  Exec& ex = st.exec();
  if (n == 0) return;
  ex.zero(state, n);
  if (keep == 0 || keep >= n) {
    launchThreads<SelectMark>(ex, n, {c, state, -1, 0, keep == 0 ? kDrop : kKeep});
    return;
  }
  uint32_t* hist = st.scratch<uint32_t>(kRadixBins, "selection histogram");
  std::vector<uint32_t> h(kRadixBins);
  size_t remaining = keep;  // candidates still to keep among the undecided ones
  for (int pass = 0; pass < kSelectBytes; ++pass) {
    ex.zero(hist, kRadixBins * sizeof(uint32_t));
    launchGroups<SelectHistogram>(ex, tilesOf(n, kSortTile), {c, state, n, pass, hist});
    ex.toHost(h.data(), hist, kRadixBins * sizeof(uint32_t));
    size_t below = 0;
    uint32_t at = 0;
    while (below + h[at] < remaining) below += h[at++];
    launchThreads<SelectMark>(ex, n, {c, state, pass, at, kUndecided});
    remaining -= below;
    if (remaining == h[at]) break;  // every candidate left (digit `at`) is kept
  }
  launchThreads<SelectMark>(ex, n, {c, state, -1, 0, kKeep});
}

uint32_t compactIndices(Stage& st, const uint8_t* flags, size_t n, uint32_t* out, uint32_t base) {
  checkBatch(n);
  if (n == 0) return 0;
  Exec& ex = st.exec();
  uint32_t* pos = st.scratch<uint32_t>(n, "compaction positions");
  launchThreads<FlagsToWords>(ex, n, {flags, pos});
  const uint32_t total = exclusiveScan(st, pos, pos, n);
  launchThreads<ScatterFlagged>(ex, n, {flags, pos, out, base});
  return total;
}

}  // namespace cuda
}  // namespace embedstack
