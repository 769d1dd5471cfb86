// The hash index of a dynamic table: open addressing over groups (group.h), one
// control byte per slot (7-bit hash fragment, or empty / deleted) and a 4-byte
// arena row index per slot, both in the group's one cache line (so a probe costs
// one memory access). Keys live in the arena records, not here, so every int64
// value is a valid key. Linear probing over groups; the group count is any number
// (multiply-shift), so the index grows in 1.1x steps and costs 64 bytes per
// 10..11 keys = 5.8..6.4 bytes per key.
//
// Memory: one 64-byte aligned Block of groups. Not synchronised: the owning table
// holds its lock; concurrent const calls are safe.
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
  /** Entries + tombstones allowed per group (11 of 12 slots). */
  static constexpr size_t kMaxPerGroup = 11;

  /** Groups for `entries` keys with room to grow: 10 keys per group (load 0.83). */
  static size_t groupsFor(size_t entries);

  /** Drops everything and sizes the index to `groups` (>= 1) empty groups. */
  void reset(size_t groups);
  /** Marks every slot empty, keeping the size. */
  void clear();

  size_t groups() const { return groups_; }
  size_t used() const { return used_; }
  size_t tombstones() const { return tombstones_; }
  size_t bytes() const { return groups_block_.bytes(); }
  /** True when `extra` more entries fit under the maximum load. */
  bool fits(size_t extra) const { return used_ + tombstones_ + extra <= groups_ * kMaxPerGroup; }

  /** Slot holding `key` (hash `h`), or kNoSlot. `keyAt(row)` reads a row's key. */
  template <class KeyAt>
  size_t find(int64_t key, uint64_t h, const KeyAt& keyAt) const {
    const uint8_t fragment = hashFragment(h);
    size_t g = hashGroup(h, groups_);
    for (size_t probes = 0; probes < groups_; ++probes) {
      const uint8_t* ctrl = groupAt(g);
      const uint32_t* rows = rowsOf(ctrl);
      Group group(ctrl);
      for (BitMask m = group.match(fragment); m; m.dropLowest()) {
        const unsigned j = m.lowest();
        // The SWAR matcher may flag non-full bytes: check the byte before the key.
        if (ctrl[j] == fragment && keyAt(rows[j]) == key) return g * kGroupSlots + j;
      }
      if (group.matchEmpty()) return kNoSlot;
      if (++g == groups_) g = 0;
    }
    return kNoSlot;
  }

  /** The row indices of a group (after its 16 control bytes). */
  static uint32_t* rowsOf(const uint8_t* group) {
    return reinterpret_cast<uint32_t*>(const_cast<uint8_t*>(group) + kGroupWidth);
  }

  /**
   * A read-only snapshot of the index's layout for hot loops (its fields live in
   * registers, not reloaded from the object after every store). Valid until the
   * index changes.
   */
  struct View {
    const uint8_t* base;
    size_t groups;

    size_t homeGroup(uint64_t h) const { return hashGroup(h, groups); }
    const uint8_t* group(size_t g) const { return base + g * kGroupBytes; }
    /** Row of `key` probing from group g, or kNoRow. */
    template <class KeyAt>
    uint32_t findRow(int64_t key, uint8_t fragment, size_t g, const KeyAt& keyAt) const {
      for (size_t probes = 0; probes < groups; ++probes) {
        const uint8_t* ctrl = group(g);
        const uint32_t* rows = rowsOf(ctrl);
        Group grp(ctrl);
        for (BitMask m = grp.match(fragment); m; m.dropLowest()) {
          const unsigned j = m.lowest();
          if (ctrl[j] == fragment && keyAt(rows[j]) == key) return rows[j];
        }
        if (grp.matchEmpty()) return kNoRow;
        if (++g == groups) g = 0;
      }
      return kNoRow;
    }
    /** Row of the first fragment match in group g (a prefetch hint), or kNoRow. */
    uint32_t firstCandidate(size_t g, uint8_t fragment) const {
      const uint8_t* ctrl = group(g);
      BitMask m = Group(ctrl).match(fragment);
      return m ? rowsOf(ctrl)[m.lowest()] : kNoRow;
    }
  };
  View view() const { return View{static_cast<const uint8_t*>(groups_block_.data()), groups_}; }

  /** Places a key known to be absent; returns its slot. Requires fits(1). */
  size_t insert(uint64_t h, uint32_t row);
  /** Frees a slot (empty when its group never filled up, else a tombstone). */
  void erase(size_t slot);

  uint32_t rowAt(size_t slot) const { return rowsOf(groupAt(slot / kGroupSlots))[slot % kGroupSlots]; }
  void setRow(size_t slot, uint32_t row) { rowsOf(groupAt(slot / kGroupSlots))[slot % kGroupSlots] = row; }

  /** Prefetches the hash's home group (its control bytes and rows: one line). */
  void prefetch(uint64_t h) const { __builtin_prefetch(groupAt(hashGroup(h, groups_))); }
  /** Row of the first fragment match in the home group (for prefetching the record), or kNoRow. */
  uint32_t firstCandidate(uint64_t h) const {
    const uint8_t* ctrl = groupAt(hashGroup(h, groups_));
    BitMask m = Group(ctrl).match(hashFragment(h));
    return m ? rowsOf(ctrl)[m.lowest()] : kNoRow;
  }

 private:
  uint8_t* groupAt(size_t g) const { return static_cast<uint8_t*>(groups_block_.data()) + g * kGroupBytes; }

  Block groups_block_;
  size_t groups_ = 0;
  size_t used_ = 0;
  size_t tombstones_ = 0;
};

}  // namespace embedstack
