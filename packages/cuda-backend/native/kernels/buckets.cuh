// The key index of dynamic tables, in the style of HierarchicalKV: buckets of 128
// slots, each slot an 8-bit digest (the hash's top byte) and a 32-bit row, an
// occupancy bitmap per bucket (4 words) instead of a reserved "empty" key, so every
// int64 key is valid, and a sticky overflow flag per bucket. Rows (key, score,
// values) live in the dense row store (rows.cuh); a slot points at one.
//
// One 32-lane group serves one key: lane l owns slots 4l..4l+3, reads their 4
// digests as one word (a bucket's 128 digests are one 128-byte line) and its 4
// occupancy bits, compares them with the key's digest, and checks the candidates'
// keys in the row store; a ballot finds the lane that matched. A key lives in its
// home bucket (hash & mask) or, when that was full at insert time, in a later
// bucket of the run; an insert that passes a full bucket sets its overflow flag,
// and a probe moves on to the next bucket only past a flagged one. The table keeps
// its load at most 1/2, so runs are almost always one bucket long.
#pragma once

#include "hash.h"
#include "launch.h"

namespace embedstack {
namespace cuda {

constexpr uint32_t kBucketSlots = 128;
constexpr uint32_t kOccupancyWords = kBucketSlots / 32;

struct RowMeta {
  int64_t key;
  uint64_t score;
};

struct IndexView {
  uint32_t* slotRow;   // [buckets * 128]
  uint8_t* digests;    // [buckets * 128]
  uint32_t* occupied;  // [buckets * 4] bit s%32 of word s/32: slot s is in use
  uint32_t* overflow;  // [buckets] nonzero: some key of this bucket's run lives further on
  uint64_t mask;       // buckets - 1 (a power of two)
};

ES_HD inline uint64_t homeBucket(uint64_t h, uint64_t mask) {
  return h & mask;
}
ES_HD inline uint32_t digestOf(uint64_t h) {
  return static_cast<uint32_t>(h >> 56);
}

/** Bits 0..3: which of the 4 bytes of `word` equal `digest` (exact, no false positives). */
ES_HD inline uint32_t matchDigests(uint32_t word, uint32_t digest) {
  const uint32_t y = word ^ (digest * 0x01010101u);
  const uint32_t zero = ~(((y & 0x7f7f7f7fu) + 0x7f7f7f7fu) | y | 0x7f7f7f7fu);  // 0x80 in each zero byte
  return ((zero >> 7) & 1u) | ((zero >> 14) & 2u) | ((zero >> 21) & 4u) | ((zero >> 28) & 8u);
}

/** Lane l's 4 occupancy bits of bucket b. */
ES_HD inline uint32_t laneOccupancy(const IndexView& ix, uint64_t b, int l) {
  const uint32_t word = loadRelaxedU32(&ix.occupied[b * kOccupancyWords + static_cast<uint32_t>(l) / 8]);
  return (word >> ((static_cast<uint32_t>(l) % 8) * 4)) & 0xfu;
}

struct Probe {
  uint64_t slot;  // valid when row != kNoRow
  uint32_t row;
};

/** Finds `key` (hash h): its slot and row, or row = kNoRow. Group-uniform result. */
ES_KERNEL_BODY
template <class G>
ES_HD inline Probe probeKey(G& g, const IndexView& ix, const RowMeta* meta, int64_t key, uint64_t h) {
  const uint32_t digest = digestOf(h);
  uint64_t b = homeBucket(h, ix.mask);
  for (uint64_t step = 0; step <= ix.mask; ++step) {
    typename G::template Lanes<uint32_t> hit;
    g.each([&](int l) {
      hit[l] = kNoRow;
      const uint32_t word = reinterpret_cast<const uint32_t*>(ix.digests + b * kBucketSlots)[l];
      uint32_t m = matchDigests(word, digest) & laneOccupancy(ix, b, l);
      while (m) {
        const uint32_t j = static_cast<uint32_t>(lowestBit(m));
        m &= m - 1;
        const uint32_t row = ix.slotRow[b * kBucketSlots + static_cast<uint32_t>(l) * 4 + j];
        if (meta[row].key == key) {
          hit[l] = static_cast<uint32_t>(l) * 4 + j;
          break;
        }
      }
    });
    const uint32_t found = g.ballot([&](int l) { return hit[l] != kNoRow; });
    if (found) {
      const uint64_t slot = b * kBucketSlots + g.shfl(hit, lowestBit(found));
      return {slot, ix.slotRow[slot]};
    }
    if (loadRelaxedU32(&ix.overflow[b]) == 0) break;
    b = (b + 1) & ix.mask;
  }
  return {0, kNoRow};
}

/**
 * Inserts a key known to be absent and unique among this launch's inserts, pointing
 * at `row`. Concurrent inserts claim slots with atomicOr on the occupancy words.
 * Returns false only if every bucket is full (the table's load bound prevents it).
 */
ES_KERNEL_BODY
template <class G>
ES_HD inline bool insertKey(G& g, const IndexView& ix, uint64_t h, uint32_t row) {
  const uint32_t digest = digestOf(h);
  uint64_t b = homeBucket(h, ix.mask);
  for (uint64_t step = 0; step <= ix.mask; ++step) {
    for (;;) {
      typename G::template Lanes<uint32_t> free;
      g.each([&](int l) { free[l] = ~laneOccupancy(ix, b, l) & 0xfu; });
      const uint32_t withRoom = g.ballot([&](int l) { return free[l] != 0; });
      if (!withRoom) break;
      const int leader = lowestBit(withRoom);
      typename G::template Lanes<uint32_t> won;
      g.each([&](int l) {
        won[l] = 0;
        if (l != leader) return;
        const uint32_t j = static_cast<uint32_t>(lowestBit(free[l]));
        const uint32_t bit = 1u << ((static_cast<uint32_t>(l) % 8) * 4 + j);
        const uint32_t old = atomicOrU32(&ix.occupied[b * kOccupancyWords + static_cast<uint32_t>(l) / 8], bit);
        if (old & bit) return;  // another insert took it first
        const uint64_t slot = b * kBucketSlots + static_cast<uint32_t>(l) * 4 + j;
        ix.slotRow[slot] = row;
        ix.digests[slot] = static_cast<uint8_t>(digest);
        won[l] = 1;
      });
      if (g.ballot([&](int l) { return won[l] != 0; })) return true;
    }
    g.each([&](int l) {
      if (l == 0) atomicOrU32(&ix.overflow[b], 1u);
    });
    b = (b + 1) & ix.mask;
  }
  return false;
}

/** Inserts keys[i] -> row (rows[i], or rowBase + i) for each i whose row is not kNoRow (absent, distinct keys). */
struct IndexInsert {
  static constexpr const char* kName = "indexInsert";
  static constexpr size_t kSharedBytes = 0;
  struct Args {
    IndexView ix;
    const int64_t* keys;  // null: the key of rows[i] in meta
    const RowMeta* meta;
    const uint32_t* rows;  // null: rowBase + i
    uint32_t rowBase;
    uint32_t* failed;  // set to 1 when a bucket run had no room
  };
  ES_KERNEL_BODY
  template <class G>
  ES_HD static void group(G& g, const Args& a, size_t i) {
    const uint32_t row = a.rows ? a.rows[i] : a.rowBase + static_cast<uint32_t>(i);
    if (row == kNoRow) return;
    const int64_t key = a.keys ? a.keys[i] : a.meta[row].key;
    if (!insertKey(g, a.ix, hashKey(key), row)) {
      g.each([&](int l) {
        if (l == 0) *a.failed = 1;
      });
    }
  }
};

/** Frees the slots of the keys of rows[i] (resident rows about to leave). */
struct IndexErase {
  static constexpr const char* kName = "indexErase";
  static constexpr size_t kSharedBytes = 0;
  struct Args {
    IndexView ix;
    const RowMeta* meta;
    const uint32_t* rows;
  };
  ES_KERNEL_BODY
  template <class G>
  ES_HD static void group(G& g, const Args& a, size_t i) {
    const int64_t key = a.meta[a.rows[i]].key;
    const Probe p = probeKey(g, a.ix, a.meta, key, hashKey(key));
    g.each([&](int l) {
      if (l != 0 || p.row == kNoRow) return;
      const uint32_t bit = 1u << (p.slot % 32);
      atomicAndU32(&a.ix.occupied[p.slot / 32], ~bit);
    });
  }
};

/** Points the slot of the key now at row to[i] (moved from from[i]) at to[i]. */
struct IndexRelink {
  static constexpr const char* kName = "indexRelink";
  static constexpr size_t kSharedBytes = 0;
  struct Args {
    IndexView ix;
    const RowMeta* meta;
    const uint32_t* to;
  };
  ES_KERNEL_BODY
  template <class G>
  ES_HD static void group(G& g, const Args& a, size_t i) {
    const uint32_t row = a.to[i];
    const int64_t key = a.meta[row].key;
    const Probe p = probeKey(g, a.ix, a.meta, key, hashKey(key));
    g.each([&](int l) {
      if (l == 0 && p.row != kNoRow) a.ix.slotRow[p.slot] = row;
    });
  }
};

}  // namespace cuda
}  // namespace embedstack
