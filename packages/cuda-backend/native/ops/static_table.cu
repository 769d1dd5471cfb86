#include "static_table.h"

#include <algorithm>
#include <mutex>
#include <shared_mutex>

#include "bag_ops.h"
#include "table_kernels.cuh"

namespace embedstack {
namespace cuda {

StaticTable::StaticTable(TableConfig config, std::shared_ptr<Exec> ex, const Placement& placement)
    : DeviceTable(std::move(config), std::move(ex), placement), rows_(config_.vocabularySize) {
  ES_CHECK(rows_ <= 0xfffffffeu, kInvalidArgument,
           "Expected vocabularySize to be at most 2^32 - 2 on the CUDA backend but received " << rows_);
  store_.reserve(rows_, 0);
  Stage st(*ex_);
  resetRows(st, nullptr, nullptr, rows_);
  st.finish();
}

void StaticTable::resetRows(Stage& st, const int64_t* keys, const uint32_t* rows, size_t count) {
  (void)st;
  launchGroups<InitRows>(*ex_, count,
                         {nullptr, store_.view(), initView(), slotTemplateDevice_.data(), keys, rows, 0, 1});
}

void StaticTable::checkKeys(Stage& st, const int64_t* keys, size_t n, const char* argument) {
  if (n == 0) return;
  uint32_t* bad = st.scratch<uint32_t>(1, "the key check");
  launchThreads<Fill<uint32_t>>(*ex_, 1, {bad, kNoRow});
  launchThreads<FirstOutOfRange>(*ex_, n, {keys, rows_, bad});
  const uint32_t i = readBack(*ex_, bad);
  ES_CHECK(i == kNoRow, kOutOfRange,
           "Expected " << argument << "[" << i << "] to be a row index in [0, " << rows_
                       << ") of the static table but received " << readBack(*ex_, keys + i));
}

const int64_t* StaticTable::checkedKeys(Stage& st, const int64_t* keys, size_t n, const char* argument) {
  const int64_t* d = st.in(keys, n, argument);
  checkKeys(st, d, n, argument);
  return d;
}

uint32_t* StaticTable::uniqueRows(Stage& st, const Dedupe& d) {
  uint32_t* rows = st.scratch<uint32_t>(d.unique, "rows of the keys");
  launchThreads<KeysAsRows>(*ex_, d.unique, {d.uniqueKeys, rows});
  return rows;
}

void StaticTable::readRows(const int64_t* keys, size_t n, bool, const uint64_t*, float* out, uint8_t* exists) {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  Stage st(*ex_);
  checkKeys(st, keys, n, "keys");
  uint32_t* rows = st.scratch<uint32_t>(n, "rows of the keys");
  launchThreads<KeysAsRows>(*ex_, n, {keys, rows});
  launchGroups<GatherOccurrences>(*ex_, n, {store_.view(), initView(), keys, nullptr, rows, nullptr, out, exists});
  st.finish();
}

void StaticTable::findInto(const int64_t* keys, size_t n, float* out, uint8_t* exists) {
  Stage st(*ex_);
  readRows(st.in(keys, n, "keys"), n, false, nullptr, st.out(out, n * config_.dim, "values"),
           st.out(exists, n, "exists flags"));
  st.finish();
}

void StaticTable::findOrInsertInto(const int64_t* keys, size_t n, const uint64_t*, float* values, uint8_t* exists) {
  findInto(keys, n, values, exists);
}

void StaticTable::write(const int64_t* keys, size_t n, const float* values, const float* const* slots, bool import) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  Stage st(*ex_);
  const Dedupe d = dedupe(st, checkedKeys(st, keys, n, "keys"), n, false);
  launchGroups<WriteUniques>(*ex_, d.unique,
                             {nullptr, store_.view(), uniqueRows(st, d), d.lastOf, d.countOf,
                              st.in(values, n * config_.dim, "values"), import ? importSlotsFrom(st, slots, n) : nullptr,
                              slotWidths(), slotCount(), import ? slotTemplateDevice_.data() : nullptr, nullptr, 0,
                              ScoreView{}});
  st.finish();
}

void StaticTable::upsert(const int64_t* keys, size_t n, const float* values, const uint64_t*) {
  write(keys, n, values, nullptr, false);
}

void StaticTable::assign(const int64_t* keys, size_t n, const float* values, const uint64_t*) {
  write(keys, n, values, nullptr, false);
}

void StaticTable::importRows(const int64_t* keys, size_t n, const float* values, const float* const* slots,
                             const uint64_t*) {
  write(keys, n, values, slots, true);
}

void StaticTable::accum(const int64_t* keys, size_t n, const float* deltas, const uint8_t* exists, const uint64_t*) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  Stage st(*ex_);
  const Dedupe d = dedupe(st, checkedKeys(st, keys, n, "keys"), n, true);
  uint8_t* present = st.scratch<uint8_t>(d.unique, "presence flags");
  launchThreads<Fill<uint8_t>>(*ex_, d.unique, {present, 1});
  launchGroups<AccumUniques>(*ex_, d.unique,
                             {nullptr, store_.view(), uniqueRows(st, d), present, d.occOffsets, d.occList,
                              st.in(deltas, n * config_.dim, "deltas"), st.in(exists, n, "exists flags"), nullptr,
                              ScoreView{}});
  st.finish();
}

size_t StaticTable::remove(const int64_t* keys, size_t n) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  Stage st(*ex_);
  const Dedupe d = dedupe(st, checkedKeys(st, keys, n, "keys"), n, false);
  resetRows(st, d.uniqueKeys, uniqueRows(st, d), d.unique);
  st.finish();
  return d.unique;
}

void StaticTable::clear() {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  Stage st(*ex_);
  resetRows(st, nullptr, nullptr, rows_);
  st.finish();
}

size_t StaticTable::size() const {
  checkAlive();
  return rows_;
}

size_t StaticTable::capacity() const {
  checkAlive();
  return rows_;
}

size_t StaticTable::deviceBytes() const {
  return store_.hbmBytes() + initValues_.bytes() + slotTemplateDevice_.bytes() + widths_.bytes();
}

size_t StaticTable::pinnedBytes() const {
  return store_.pinnedBytes();
}

size_t StaticTable::memoryUsage() const {
  checkAlive();
  return deviceBytes() + pinnedBytes();
}

ExportResult StaticTable::exportBatch(size_t offset, size_t limit) {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  return exportRange(offset, limit, rows_, nullptr);
}

void StaticTable::lookupCombinedInto(const BagInput& bag, Combiner combiner, double maxNorm, bool, float* out) {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  Stage st(*ex_);
  const int64_t* keys = checkedKeys(st, bag.keys, bag.n, "ids");
  uint32_t* entryRow = st.scratch<uint32_t>(bag.n, "bag entry rows");
  const StagedBag b = stageBag(st, bag, dim(), maxNorm, out);
  launchThreads<KeysAsRows>(*ex_, bag.n, {keys, entryRow});
  combineBag(*ex_, b, keys, entryRow, store_.view(), initView(), combiner, maxNorm);
  st.finish();
}

void StaticTable::trainRows(const int64_t* keys, size_t n, const float* grads, const OptimizerParams& opt) {
  checkOptimizer(opt);
  std::unique_lock<std::shared_mutex> lock(mutex_);
  checkAlive();
  Stage st(*ex_);
  checkKeys(st, keys, n, "keys");
  const Dedupe d = dedupe(st, keys, n, true);
  launchGroups<ApplyOptimizer>(*ex_, d.unique,
                               {nullptr, store_.view(), uniqueRows(st, d), d.occOffsets, d.occList, grads, opt,
                                ScoreView{}});
  st.finish();
}

void StaticTable::readThenTrain(const int64_t* keys, size_t n, float* out, uint8_t* exists,
                                const std::function<void()>& gradients, const float* grads,
                                const OptimizerParams& opt) {
  checkOptimizer(opt);
  std::unique_lock<std::shared_mutex> lock(mutex_);  // one lock: no write between the read and the step
  checkAlive();
  Stage st(*ex_);
  checkKeys(st, keys, n, "keys");
  uint32_t* rows = st.scratch<uint32_t>(n, "rows of the keys");
  const Dedupe d = dedupe(st, keys, n, true);
  uint32_t* unique = uniqueRows(st, d);
  // Static rows have no scores: the read changes nothing, and every allocation is above.
  launchThreads<KeysAsRows>(*ex_, n, {keys, rows});
  launchGroups<GatherOccurrences>(*ex_, n, {store_.view(), initView(), keys, nullptr, rows, nullptr, out, exists});
  gradients();
  launchGroups<ApplyOptimizer>(*ex_, d.unique,
                               {nullptr, store_.view(), unique, d.occOffsets, d.occList, grads, opt, ScoreView{}});
  st.finish();
}

void StaticTable::applyGradients(const int64_t* keys, size_t n, const float* grads, const OptimizerParams& opt) {
  checkOptimizer(opt);
  Stage st(*ex_);
  trainRows(st.in(keys, n, "keys"), n, st.in(grads, n * config_.dim, "gradients"), opt);
  st.finish();
}

size_t StaticTable::restrict(size_t) {
  checkAlive();
  return 0;
}

void StaticTable::setEpoch(uint32_t) {
  checkAlive();
}

}  // namespace cuda
}  // namespace embedstack
