// A set-associative LRU embedding cache (HugeCTR HPS's L1 "GPU embedding cache",
// here in host memory): `sets` sets of `ways` slots; a key lives only in the set
// chosen by a hash of the key, and a full set evicts its least recently used slot.
// The semantics are core's cache contract (packages/core/src/cache.ts):
//  - set of a key: hashGroup(hashKey(key), sets) (hash.h: MurmurHash3's finalizer,
//    then the high 32 bits scaled to [0, sets));
//  - a clock ticks once per key access (query hit or insert), in batch order; the
//    accessed slot takes the new tick as its stamp (0 = empty slot);
//  - insert: a present key is overwritten; else the set's first empty slot; else the
//    slot with the smallest stamp is evicted;
//  - update overwrites present keys without stamping them; remove empties slots.
// Layout: per slot a tag byte (7 hash bits, SwissTable-style), key + stamp, and row;
// query runs as a rolling pipeline, each stage prefetching for the next (tags, then
// key and stamp, then row) a few keys ahead, so memory accesses overlap.
// Not thread-safe: the N-API layer calls it on the JS thread only (sync ops).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "memory.h"

namespace embedstack {

class SetCache {
 public:
  /** Most slots a cache may have (2^36 rows). */
  static constexpr uint64_t kMaxSlots = uint64_t{1} << 36;
  /** Largest `ways`. */
  static constexpr uint32_t kMaxWays = 64;

  /**
   * `capacity` rows (rounded up to whole sets: sets = ceil(capacity / ways'), ways' =
   * min(ways, max(capacity, 1))), `dim` floats per row. Throws EmbedError
   * (INVALID_ARGUMENT) for bad sizes, or out of memory.
   */
  SetCache(uint64_t capacity, uint32_t dim, uint32_t ways);

  uint32_t dim() const { return dim_; }
  uint32_t ways() const { return ways_; }
  uint64_t sets() const { return sets_; }
  /** Slots: sets * ways. */
  uint64_t capacity() const { return sets_ * ways_; }
  uint64_t size() const { return size_; }

  /** The set of `key`. */
  uint64_t setOf(int64_t key) const;

  /** Copies the rows of present keys to out[i*dim..] (zeros for misses), sets exists[i]; returns the hits. */
  size_t query(const int64_t* keys, size_t n, float* out, uint8_t* exists);
  /** Inserts or overwrites rows; returns how many resident rows were evicted. */
  size_t insert(const int64_t* keys, size_t n, const float* values);
  /** Overwrites the rows of present keys (no stamp); returns how many were present. */
  size_t update(const int64_t* keys, size_t n, const float* values);
  /** Empties the slots of present keys; returns how many were present. */
  size_t remove(const int64_t* keys, size_t n);
  /** Copies the resident keys (slot order) to out[0..size()). */
  void keys(int64_t* out) const;
  void clear();

 private:
  /** Slot index of `key` (hash `h`) in its set, or -1: the set's 7-bit tags are matched 16 at a time, then keys compared. */
  int64_t find(int64_t key, uint64_t h) const;
  /** The first slot of the set at `base` whose tag is `tag`, or -1 (the key may still differ). */
  int64_t firstCandidate(uint64_t base, uint8_t tag) const;

  uint32_t dim_;
  uint32_t ways_;
  uint64_t sets_;
  uint64_t size_ = 0;
  uint64_t clock_ = 0;
  /** A slot's key and last-use stamp (0: empty), side by side: one cache line access confirms and stamps a hit. */
  struct Meta {
    int64_t key;
    uint64_t stamp;
  };
  uint8_t* tagData() const { return static_cast<uint8_t*>(tags_.data()); }
  Meta* metaData() const { return static_cast<Meta*>(meta_.data()); }
  float* rowData() const { return static_cast<float*>(values_.data()); }

  /** Per slot: 0x80 empty, else the key hash's low 7 bits; padded by 16 bytes for whole-vector loads. */
  Block tags_;
  Block meta_;
  /** Rows, [slots * dim]. Blocks are 64-byte aligned (a 64-way set's tags are one cache line). */
  Block values_;
};

}  // namespace embedstack
