#include "key_index.h"

#include <cstring>

namespace embedstack {

static_assert(kGroupWidth + kGroupSlots * sizeof(uint32_t) == kGroupBytes, "a group is one cache line");

size_t KeyIndex::groupsFor(size_t entries) {
  // Right after a growth the index holds 10 keys per group (load 0.83); it grows
  // again at 11 (0.92). Probes stay short: hits are almost always in the home
  // group, and 12-slot groups absorb most overflow.
  return entries / 10 + 1;
}

void KeyIndex::reset(size_t groups) {
  if (groups < 1) groups = 1;
  ES_CHECK(groups < (size_t{1} << 32), kInvalidArgument, "Expected the hash index to need fewer than 2^32 groups");
  Block block;
  block.allocateZeroed(checkedMul(groups, kGroupBytes, "the hash index"), "the hash index");
  groups_block_ = std::move(block);
  groups_ = groups;
  clear();
}

void KeyIndex::clear() {
  for (size_t g = 0; g < groups_; ++g) {
    uint8_t* ctrl = groupAt(g);
    std::memset(ctrl, kCtrlEmpty, kGroupSlots);
    std::memset(ctrl + kGroupSlots, kCtrlDeleted, kGroupWidth - kGroupSlots);  // padding: never matched
  }
  used_ = 0;
  tombstones_ = 0;
}

size_t KeyIndex::insert(uint64_t h, uint32_t row) {
  size_t g = hashGroup(h, groups_);
  for (size_t probes = 0; probes < groups_; ++probes) {
    uint8_t* ctrl = groupAt(g);
    BitMask free = Group(ctrl).matchFree();
    if (free) {
      const unsigned j = free.lowest();
      if (ctrl[j] == kCtrlDeleted) --tombstones_;
      ctrl[j] = hashFragment(h);
      rowsOf(ctrl)[j] = row;
      ++used_;
      return g * kGroupSlots + j;
    }
    if (++g == groups_) g = 0;
  }
  ES_FAIL(kInternal, "hash index full (used " << used_ << ", tombstones " << tombstones_ << ")");
}

void KeyIndex::erase(size_t slot) {
  uint8_t* ctrl = groupAt(slot / kGroupSlots);
  // A group that still has an empty slot was never full since the last rebuild, so
  // no probe sequence ever passed through it: the freed slot can be empty again.
  if (Group(ctrl).matchEmpty()) {
    ctrl[slot % kGroupSlots] = kCtrlEmpty;
  } else {
    ctrl[slot % kGroupSlots] = kCtrlDeleted;
    ++tombstones_;
  }
  --used_;
}

}  // namespace embedstack
