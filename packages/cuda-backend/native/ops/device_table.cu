#include "device_table.h"

#include <algorithm>
#include <mutex>
#include <shared_mutex>
#include <vector>

namespace embedstack {
namespace cuda {

namespace {
uint32_t strideOf(const TableConfig& c) {
  const size_t s = checkedAdd(c.dim, c.slotFloats(), "a row");
  ES_CHECK(s <= UINT32_MAX / 4, kInvalidArgument, "Expected a row of at most 2^30 floats but it needs " << s);
  return static_cast<uint32_t>(s);
}
}  // namespace

DeviceTable::DeviceTable(TableConfig config, std::shared_ptr<Exec> ex, const Placement& placement)
    : Table(std::move(config)),
      ex_(std::move(ex)),
      stride_(strideOf(config_)),
      store_(*ex_, static_cast<uint32_t>(config_.dim), stride_, placement.hbmBudget) {
  const std::vector<float>& values = config_.initializer.values;
  if (!values.empty()) {
    initValues_.reset(*ex_, values.size(), "the initializer's values");
    ex_->toDevice(initValues_.data(), values.data(), values.size() * sizeof(float));
  }
  if (!slotTemplate_.empty()) {
    slotTemplateDevice_.reset(*ex_, slotTemplate_.size(), "the slots' initial values");
    ex_->toDevice(slotTemplateDevice_.data(), slotTemplate_.data(), slotTemplate_.size() * sizeof(float));
  }
  if (!config_.slotWidths.empty()) {
    widths_.reset(*ex_, config_.slotWidths.size(), "the slot widths");
    ex_->toDevice(widths_.data(), config_.slotWidths.data(), config_.slotWidths.size() * sizeof(uint32_t));
  }
  ex_->sync();
}

DeviceTable::MemorySplit DeviceTable::memorySplit() const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  return {deviceBytes(), pinnedBytes()};
}

double DeviceTable::findKernelSeconds(const int64_t*, size_t, int) {
  ES_FAIL(kUnsupported, "Expected a dynamic table for the find kernel benchmark but received a static table");
}

InitView DeviceTable::initView() const {
  const Initializer& i = config_.initializer;
  return {i.kind, i.a, i.b, i.seed, i.stream, initValues_.data(), dim()};
}

ExportResult DeviceTable::exportRange(size_t offset, size_t limit, size_t rows, const RowMeta* meta) {
  const size_t start = std::min(offset, rows);
  const size_t n = std::min(limit, rows - start);
  ExportResult r;
  r.keys.allocate(n);
  r.values.allocate(checkedMul(n, config_.dim, "export values"));
  r.scores.allocate(n);
  Stage st(*ex_);
  std::vector<float*> slots;
  for (uint32_t w : config_.slotWidths) {
    r.slots.emplace_back(checkedMul(n, w, "export slots"));
    slots.push_back(st.out(r.slots.back().data(), n * w, "exported slots"));
  }
  float* const* slotPointers = st.inCopy(slots, "slot pointers");
  launchGroups<ExportRows>(*ex_, n,
                           {meta, store_.view(), start, st.out(r.keys.data(), n, "exported keys"),
                            st.out(r.scores.data(), n, "exported scores"),
                            st.out(r.values.data(), n * config_.dim, "exported values"), slotPointers, slotWidths(),
                            slotCount()});
  st.finish();
  return r;
}

const float* const* DeviceTable::importSlotsFrom(Stage& st, const float* const* slots, size_t n) {
  if (!slots || config_.slotWidths.empty()) return nullptr;
  std::vector<const float*> ptrs;
  for (size_t j = 0; j < config_.slotWidths.size(); ++j) {
    ptrs.push_back(st.in(slots[j], n * config_.slotWidths[j], "imported slots"));
  }
  return st.inCopy(ptrs, "slot pointers");  // the Stage keeps `ptrs` until the queued copy has run
}

}  // namespace cuda
}  // namespace embedstack
