#include "key_index.h"

#include <cstring>

namespace embedstack {

size_t KeyIndex::groupsFor(size_t entries) {
  // entries / (14 * 0.8): after a growth the index is at load 0.7 and grows again at 0.875.
  size_t g = entries / 11 + 1;
  return g < 1 ? 1 : g;
}

void KeyIndex::reset(size_t groups) {
  if (groups < 1) groups = 1;
  ES_CHECK(groups < (size_t{1} << 32), kInvalidArgument, "Expected the hash index to need fewer than 2^32 groups");
  size_t slots = checkedMul(groups, kGroupWidth, "the hash index");
  Block ctrl, rows;
  ctrl.allocateZeroed(slots, "the hash index control bytes");
  rows.allocateZeroed(checkedMul(slots, sizeof(uint32_t), "the hash index"), "the hash index rows");
  std::memset(ctrl.data(), kCtrlEmpty, slots);
  ctrl_ = std::move(ctrl);
  rows_ = std::move(rows);
  groups_ = groups;
  used_ = 0;
  tombstones_ = 0;
}

void KeyIndex::clear() {
  if (ctrl_.data()) std::memset(ctrl_.data(), kCtrlEmpty, groups_ * kGroupWidth);
  used_ = 0;
  tombstones_ = 0;
}

size_t KeyIndex::insert(uint64_t h, uint32_t row) {
  uint8_t* ctrl = ctrlBytes();
  size_t g = hashGroup(h, groups_);
  for (size_t probes = 0; probes < groups_; ++probes) {
    BitMask free = Group(ctrl + g * kGroupWidth).matchFree();
    if (free) {
      size_t slot = g * kGroupWidth + free.lowest();
      if (ctrl[slot] == kCtrlDeleted) --tombstones_;
      ctrl[slot] = hashFragment(h);
      rowIndices()[slot] = row;
      ++used_;
      return slot;
    }
    if (++g == groups_) g = 0;
  }
  ES_FAIL(kInternal, "hash index full (used " << used_ << ", tombstones " << tombstones_ << ")");
}

void KeyIndex::erase(size_t slot) {
  uint8_t* ctrl = ctrlBytes();
  size_t g = slot / kGroupWidth;
  // A group that still has an empty slot was never full since the last rebuild, so
  // no probe sequence ever passed through it: the freed slot can be empty again.
  if (Group(ctrl + g * kGroupWidth).matchEmpty()) {
    ctrl[slot] = kCtrlEmpty;
  } else {
    ctrl[slot] = kCtrlDeleted;
    ++tombstones_;
  }
  --used_;
}

}  // namespace embedstack
