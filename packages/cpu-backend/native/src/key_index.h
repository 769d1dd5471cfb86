// The hash index of a dynamic table: open addressing over groups of 16 slots, one
// control byte per slot (7-bit hash fragment, or empty / deleted) and a 4-byte
// arena row index per slot. Keys live in the arena records, not here, so every
// int64 value is a valid key. Linear probing over 16-aligned groups; the group
// count is any number (multiply-shift), so the index grows by 1.25x steps and
// costs 5 bytes / 0.7..0.875 load = 5.7..7.1 bytes per key.
//
// Memory: two Blocks (control bytes, row indices). Not synchronised: the owning
// table holds its lock; concurrent const calls are safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "group.h"
#include "hash.h"
#include "memory.h"

namespace embedstack {

class KeyIndex {
 public:
  static constexpr uint32_t kNoRow = UINT32_MAX;
  static constexpr size_t kNoSlot = SIZE_MAX;
  /** Entries + tombstones allowed per group (7/8 of 16). */
  static constexpr size_t kMaxPerGroup = 14;

  /** Groups needed to hold `entries` at the post-growth load (0.7). */
  static size_t groupsFor(size_t entries);

  /** Drops everything and sizes the index to `groups` (>= 1) empty groups. */
  void reset(size_t groups);
  /** Marks every slot empty, keeping the size. */
  void clear();

  size_t groups() const { return groups_; }
  size_t used() const { return used_; }
  size_t tombstones() const { return tombstones_; }
  size_t bytes() const { return ctrl_.bytes() + rows_.bytes(); }
  /** True when `extra` more entries fit under the maximum load. */
  bool fits(size_t extra) const { return used_ + tombstones_ + extra <= groups_ * kMaxPerGroup; }

  /** Slot holding `key` (hash `h`), or kNoSlot. `keyAt(row)` reads a row's key. */
  template <class KeyAt>
  size_t find(int64_t key, uint64_t h, const KeyAt& keyAt) const {
    const uint8_t* ctrl = ctrlBytes();
    const uint32_t* rows = rowIndices();
    const uint8_t fragment = hashFragment(h);
    size_t g = hashGroup(h, groups_);
    for (size_t probes = 0; probes < groups_; ++probes) {
      Group group(ctrl + g * kGroupWidth);
      for (BitMask m = group.match(fragment); m; m.dropLowest()) {
        size_t slot = g * kGroupWidth + m.lowest();
        // The SWAR matcher may flag non-full bytes: check the byte before the key.
        if (ctrl[slot] == fragment && keyAt(rows[slot]) == key) return slot;
      }
      if (group.matchEmpty()) return kNoSlot;
      if (++g == groups_) g = 0;
    }
    return kNoSlot;
  }

  /** Places a key known to be absent; returns its slot. Requires fits(1). */
  size_t insert(uint64_t h, uint32_t row);
  /** Frees a slot (empty when its group never filled up, else a tombstone). */
  void erase(size_t slot);

  uint32_t rowAt(size_t slot) const { return rowIndices()[slot]; }
  void setRow(size_t slot, uint32_t row) { rowIndices()[slot] = row; }

  /** Prefetches the control bytes and row indices of the hash's home group. */
  void prefetch(uint64_t h) const {
    size_t g = hashGroup(h, groups_);
    __builtin_prefetch(ctrlBytes() + g * kGroupWidth);
    __builtin_prefetch(rowIndices() + g * kGroupWidth);
  }
  /** Row of the first fragment match in the home group (for prefetching the record), or kNoRow. */
  uint32_t firstCandidate(uint64_t h) const {
    size_t g = hashGroup(h, groups_);
    BitMask m = Group(ctrlBytes() + g * kGroupWidth).match(hashFragment(h));
    return m ? rowIndices()[g * kGroupWidth + m.lowest()] : kNoRow;
  }

 private:
  uint8_t* ctrlBytes() const { return static_cast<uint8_t*>(ctrl_.data()); }
  uint32_t* rowIndices() const { return static_cast<uint32_t*>(rows_.data()); }

  Block ctrl_;
  Block rows_;
  size_t groups_ = 0;
  size_t used_ = 0;
  size_t tombstones_ = 0;
};

}  // namespace embedstack
