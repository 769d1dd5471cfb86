#include "key_index.h"

#include <cstring>

namespace embedstack {

static_assert(kGroupWidth + KeyIndex::kWideSlots * 4 == kGroupBytes, "a wide group is one cache line");
static_assert(kGroupWidth + KeyIndex::kNarrowSlots * 3 == kGroupBytes, "a narrow group is one cache line");
static_assert(KeyIndex::kNarrowSlots == kGroupWidth, "a narrow group's slots are its 16 control bytes");

size_t KeyIndex::groupsFor(size_t entries, bool narrow) {
  // Right after a growth (or presized) the index holds 13 keys per 16-slot group (load
  // 0.81) or 10 per 12-slot group (0.83); it grows again at 14.5 (0.91) or 11 (0.92).
  // Probes stay short: hits are almost always in the home group (key_index.h).
  return entries / (narrow ? 13 : 10) + 1;
}

void KeyIndex::reset(size_t groups, bool narrow) {
  if (groups < 1) groups = 1;
  ES_CHECK(groups < (size_t{1} << 32), kInvalidArgument, "Expected the hash index to need fewer than 2^32 groups");
  Block block;
  block.allocateZeroed(checkedMul(groups, kGroupBytes, "the hash index"), "the hash index");
  groups_block_ = std::move(block);
  groups_ = groups;
  narrow_ = narrow;
  maxEntries_ = narrow ? groups * 29 / 2 : groups * 11;
  clear();
}

void KeyIndex::clear() {
  const size_t slots = narrow_ ? kNarrowSlots : kWideSlots;
  for (size_t g = 0; g < groups_; ++g) {
    uint8_t* ctrl = groupAt(g);
    std::memset(ctrl, kCtrlEmpty, slots);
    std::memset(ctrl + slots, kCtrlDeleted, kGroupWidth - slots);  // wide padding: never matched, never free
  }
  used_ = 0;
  tombstones_ = 0;
}

void KeyIndex::storeRow(uint8_t* ctrl, unsigned j, uint32_t row) {
  if (narrow_) {
    ES_CHECK(row < kNarrowRows, kInternal, "row " << row << " does not fit the narrow hash index");
    std::memcpy(ctrl + kGroupWidth + 3 * j, &row, 3);  // little-endian: the low 3 bytes
  } else {
    std::memcpy(ctrl + kGroupWidth + 4 * j, &row, 4);
  }
}

size_t KeyIndex::insert(uint64_t h, uint32_t row) {
  size_t g = hashGroup(h, groups_);
  const uint32_t mask = slotMask();
  for (size_t probes = 0; probes < groups_; ++probes) {
    uint8_t* ctrl = groupAt(g);
    BitMask free(Group(ctrl).matchFree().raw() & mask);
    if (free) {
      const unsigned j = free.lowest();
      storeRow(ctrl, j, row);
      if (ctrl[j] == kCtrlDeleted) --tombstones_;
      ctrl[j] = hashFragment(h);
      ++used_;
      return g * kGroupWidth + j;
    }
    if (++g == groups_) g = 0;
  }
  ES_FAIL(kInternal, "hash index full (used " << used_ << ", tombstones " << tombstones_ << ")");
}

void KeyIndex::setRow(size_t slot, uint32_t row) { storeRow(groupAt(slot / kGroupWidth), slot % kGroupWidth, row); }

void KeyIndex::erase(size_t slot) {
  uint8_t* ctrl = groupAt(slot / kGroupWidth);
  // A group that still has an empty slot was never full since the last rebuild, so
  // no probe sequence ever passed through it: the freed slot can be empty again.
  if (Group(ctrl).matchEmpty()) {
    ctrl[slot % kGroupWidth] = kCtrlEmpty;
  } else {
    ctrl[slot % kGroupWidth] = kCtrlDeleted;
    ++tombstones_;
  }
  --used_;
}

}  // namespace embedstack
