// The hash index of a dynamic table: open addressing over groups (group.h), one
// control byte per slot (7-bit hash fragment, or empty / deleted) and an arena row
// index per slot, both in the group's one 64-byte cache line (so a probe costs one
// memory access). Keys live in the arena records, not here, so every int64 value is
// a valid key. Linear probing over groups; the group count is any number
// (multiply-shift), so the index grows in small steps. Two layouts of a group:
//  - narrow (tables whose rows fit 24 bits: at most kNarrowRows = 2^24 rows): 16
//    control bytes + 16 slots x 3-byte rows = 64 bytes. 13 keys per group after a
//    growth or when presized (load 0.81, 4.9 bytes per key), grows at 14.5 (0.91,
//    4.4 bytes per key).
//  - wide (larger tables): 16 control bytes (12 slots, 4 padding bytes held deleted)
//    + 12 x 4-byte rows. 10 keys per group after a growth (0.83, 6.4 bytes per key),
//    grows at 11 (0.92, 5.8 bytes per key).
// Every row value is a valid row in either layout (0..2^24-1 narrow): a slot's
// control byte says whether it is used. A narrow row is read as the 4 bytes ending at
// its last byte, shifted down by 8 (the first row's extra byte is control byte 15),
// so no load leaves the group's line; the wide row is one aligned 4-byte load. The
// hot loops take the layout as two numbers of the View (rowStep, rowShift): no branch.
//
// Densities (why 13 / 14.5 for 16 slots): a simulation of this probe (random keys)
// gives, at 13 keys per group (presized; right after a growth), 3.5% of hits whose
// home group is full with no fragment match (6.0% for the 12-slot layout at 10) and
// 6.1% whose first candidate is not the key (6.3%); an absent key reads 1.64 groups
// (2.22). At 14 (4.6 bytes per key) those are 5.8%, 7.9% and 2.73 groups: more full
// probes than the 12-slot layout has today. At the growth point 14.5 an absent key
// reads 4.3 groups (the 12-slot layout at 11: 6.7); 14.5 / 13 = 1.115x steps rehash
// a grown table as often as 1.1x steps did (8.2 reinsertions per key over 10M keys).
//
// Memory: one 64-byte aligned Block of groups. Not synchronised: the owning table
// holds its lock; concurrent const calls are safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "errors.h"
#include "group.h"
#include "hash.h"
#include "hd.h"
#include "memory.h"

namespace embedstack {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "3-byte rows are read and written little-endian");

class KeyIndex {
 public:
  static constexpr uint32_t kNoRow = UINT32_MAX;
  static constexpr size_t kNoSlot = SIZE_MAX;
  /** Rows a narrow index can hold: 0 .. 2^24 - 1. */
  static constexpr size_t kNarrowRows = size_t{1} << 24;
  /** Slots of a group in either layout, and the bytes of its rows' starting offset. */
  static constexpr size_t kNarrowSlots = 16;
  static constexpr size_t kWideSlots = 12;

  /** Groups for `entries` keys with room to grow: 13 keys per group (narrow), 10 (wide). */
  static size_t groupsFor(size_t entries, bool narrow);

  /** Drops everything and sizes the index to `groups` (>= 1) empty groups of the layout. */
  void reset(size_t groups, bool narrow);
  /** Marks every slot empty, keeping the size and layout. */
  void clear();

  size_t groups() const { return groups_; }
  bool narrow() const { return narrow_; }
  size_t used() const { return used_; }
  size_t tombstones() const { return tombstones_; }
  size_t bytes() const { return groups_block_.bytes(); }
  /** Entries + tombstones allowed: 14.5 per group (narrow), 11 (wide). */
  size_t maxEntries() const { return maxEntries_; }
  /** True when `extra` more entries fit under the maximum load. */
  bool fits(size_t extra) const { return used_ + tombstones_ + extra <= maxEntries_; }

  /**
   * A read-only snapshot of the index's layout for hot loops (its fields live in
   * registers, not reloaded from the object after every store). Valid until the
   * index changes. Slot j's row: the 4 bytes at group + 12 + rowStep * (j + 1),
   * shifted right by rowShift (wide: step 4, shift 0; narrow: step 3, shift 8).
   */
  struct View {
    const uint8_t* base;
    size_t groups;
    uint32_t rowStep;
    uint32_t rowShift;

    size_t homeGroup(uint64_t h) const { return hashGroup(h, groups); }
    const uint8_t* group(size_t g) const { return base + g * kGroupBytes; }
    /** The row of slot j of the group at `ctrl`. */
    ES_ALWAYS_INLINE uint32_t row(const uint8_t* ctrl, unsigned j) const {
      uint32_t r;
      std::memcpy(&r, ctrl + (kGroupWidth - 4) + rowStep * (j + 1), sizeof r);
      return r >> rowShift;
    }
    /** The row of the first slot of `m` (a group's fragment match), or kNoRow when it is empty. */
    ES_ALWAYS_INLINE uint32_t firstRow(const uint8_t* ctrl, BitMask m) const {
      return m ? row(ctrl, m.lowest()) : kNoRow;
    }
    /**
     * Probes for `key` from group g: at its slot calls found(slot = group * 16 + j, row) and
     * returns true; false when it is absent.
     */
    template <class KeyAt, class Found>
    ES_ALWAYS_INLINE bool probeKey(int64_t key, uint8_t fragment, size_t g, const KeyAt& keyAt,
                                   Found&& found) const {
      for (size_t probes = 0; probes < groups; ++probes) {
        const uint8_t* ctrl = group(g);
        Group grp(ctrl);
        for (BitMask m = grp.match(fragment); m; m.dropLowest()) {
          const unsigned j = m.lowest();
          // The SWAR matcher may flag non-full bytes: check the byte before the key.
          if (ctrl[j] != fragment) continue;
          const uint32_t r = row(ctrl, j);
          if (keyAt(r) == key) {
            found(g * kGroupWidth + j, r);
            return true;
          }
        }
        if (grp.matchEmpty()) return false;
        if (++g == groups) g = 0;
      }
      return false;
    }
    /** Slot (g * 16 + j) of `key` probing from group g, or kNoSlot. */
    template <class KeyAt>
    size_t findSlot(int64_t key, uint8_t fragment, size_t g, const KeyAt& keyAt) const {
      size_t slot = kNoSlot;
      probeKey(key, fragment, g, keyAt, [&](size_t s, uint32_t) { slot = s; });
      return slot;
    }
    /** Row of `key` probing from group g, or kNoRow. */
    template <class KeyAt>
    uint32_t findRow(int64_t key, uint8_t fragment, size_t g, const KeyAt& keyAt) const {
      uint32_t row = kNoRow;
      probeKey(key, fragment, g, keyAt, [&](size_t, uint32_t r) { row = r; });
      return row;
    }
  };
  View view() const {
    return View{static_cast<const uint8_t*>(groups_block_.data()), groups_, narrow_ ? 3u : 4u, narrow_ ? 8u : 0u};
  }

  /** Slot holding `key` (hash `h`), or kNoSlot. `keyAt(row)` reads a row's key. */
  template <class KeyAt>
  size_t find(int64_t key, uint64_t h, const KeyAt& keyAt) const {
    const View v = view();
    return v.findSlot(key, hashFragment(h), v.homeGroup(h), keyAt);
  }

  /** Places a key known to be absent; returns its slot. Requires fits(1) and, narrow, row < kNarrowRows. */
  size_t insert(uint64_t h, uint32_t row);
  /** Frees a slot (empty when its group never filled up, else a tombstone). */
  void erase(size_t slot);

  uint32_t rowAt(size_t slot) const { return view().row(groupAt(slot / kGroupWidth), slot % kGroupWidth); }
  /** Sets a used slot's row (narrow: row < kNarrowRows). */
  void setRow(size_t slot, uint32_t row);

  /** Prefetches the hash's home group (its control bytes and rows: one line). */
  void prefetch(uint64_t h) const { __builtin_prefetch(groupAt(hashGroup(h, groups_))); }

 private:
  uint8_t* groupAt(size_t g) const { return static_cast<uint8_t*>(groups_block_.data()) + g * kGroupBytes; }
  /** Stores slot j's row in the group at `ctrl` (3 or 4 bytes). */
  void storeRow(uint8_t* ctrl, unsigned j, uint32_t row);
  /** The slots of a group (bits 0..11 or 0..15). */
  uint32_t slotMask() const { return narrow_ ? 0xffffu : 0xfffu; }

  Block groups_block_;
  size_t groups_ = 0;
  bool narrow_ = true;
  size_t maxEntries_ = 0;
  size_t used_ = 0;
  size_t tombstones_ = 0;
};

}  // namespace embedstack
