// The Table base (helpers shared by both table kinds) and the config checks every
// native backend runs (the CPU factory is table_factory.cc).
#include <cstring>
#include <memory>
#include <sstream>

#include "table.h"
#include "thread_pool.h"

namespace embedstack {

namespace {
constexpr size_t kMaxDim = size_t{1} << 20;
constexpr size_t kMaxSlots = 8;

std::string describeLayout(const std::vector<uint32_t>& widths, size_t dim) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < widths.size(); ++i) s << (i ? ", " : "") << (widths[i] == dim ? "dim" : "1");
  s << "]";
  return s.str();
}
}  // namespace

void ArrayGradientSums::sum(const uint32_t* occurrences, size_t count, float* sum, double*) const {
  sumGradientRows(grads_, occurrences, count, dim_, rowIndex_, sum);
}

void GradientSums::update(const OptimizerParams& opt, float* w, float* slots, const uint32_t* occurrences, size_t count,
                          size_t dim, float* sum, double* scratch) const {
  this->sum(occurrences, count, sum, scratch);
  applyOptimizerRow(opt, w, slots, sum, dim, scratch);
}

void ArrayGradientSums::update(const OptimizerParams& opt, float* w, float* slots, const uint32_t* occurrences,
                               size_t count, size_t dim, float* sum, double* scratch) const {
  applyGradientRow(opt, w, slots, grads_, occurrences, count, dim, rowIndex_, sum, scratch);
}

void ArrayGradientSums::prefetch(const uint32_t* occurrences, size_t count) const {
  // the first two gradient rows of the key (most keys have one or two)
  for (size_t k = 0; k < count && k < 2; ++k) {
    const size_t i = rowIndex_ ? rowIndex_[occurrences[k]] : occurrences[k];
    const char* p = reinterpret_cast<const char*>(grads_ + i * dim_);
    for (size_t off = 0; off < dim_ * sizeof(float); off += 64) __builtin_prefetch(p + off);
  }
}

void Table::applyGradientSums(const int64_t* keys, size_t n, const GradientSums& sums, const OptimizerParams& opt) {
  // Each entry's gradient on its own (0 + g: g, or +0 for -0, which leaves applyGradients'
  // float sums unchanged: they start at 0 + g_0 and are never -0).
  const size_t dim = config_.dim;
  ES_CHECK(n < UINT32_MAX, kInvalidArgument, "Expected a batch of fewer than 2^32 keys but received " << n);
  HostArray<float> g(checkedMul(n, dim, "the per-entry gradients"));
  std::vector<double> scratch(dim);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t one = static_cast<uint32_t>(i);
    sums.sum(&one, 1, g.data() + i * dim, scratch.data());
  }
  applyGradients(keys, n, g.data(), opt);
}

void Table::applyGradientSumsAfterFind(const int64_t* keys, size_t n, float* rows, const GradientSums& sums,
                                       const OptimizerParams& opt) {
  std::vector<uint8_t> exists(n);
  findInto(keys, n, rows, exists.data());
  applyGradientSums(keys, n, sums, opt);
}

void forEachBagRange(const BagInput& bag, RangeFn fn) {
  if (bag.rows == 0) return;
  if (bag.n >= kParallelThreshold && bag.rows > 1) {
    ThreadPool::shared().parallelFor(bag.rows, parallelGrain(bag.rows, 16), fn);
  } else {
    fn(0, bag.rows);
  }
}

bool Table::withRows(const int64_t* keys, size_t n, const std::function<void(const float* const* rows)>& fn) {
  const std::unique_ptr<RowLease> lease = leaseRows();
  if (!lease) return false;
  lease->begin();
  std::vector<const float*> rows(n);
  std::vector<float> initial;
  lease->lend(keys, n, rows.data(), initial, false);
  fn(rows.data());
  return true;
}

Table::Table(TableConfig config) : config_(std::move(config)) {
  for (size_t s = 0; s < config_.slotWidths.size(); ++s) {
    for (uint32_t j = 0; j < config_.slotWidths[s]; ++j) slotTemplate_.push_back(config_.slotInitial[s]);
  }
}

void Table::importSlots(float* dst, const float* const* slots, size_t i) const {
  if (!slots) {
    if (!slotTemplate_.empty()) std::memcpy(dst, slotTemplate_.data(), slotTemplate_.size() * sizeof(float));
    return;
  }
  for (size_t j = 0; j < config_.slotWidths.size(); ++j) {
    const uint32_t w = config_.slotWidths[j];
    std::memcpy(dst, slots[j] + i * w, w * sizeof(float));
    dst += w;
  }
}

void Table::exportSlots(const float* src, std::vector<HostArray<float>>& out, size_t i) const {
  for (size_t j = 0; j < config_.slotWidths.size(); ++j) {
    const uint32_t w = config_.slotWidths[j];
    std::memcpy(out[j].data() + i * w, src, w * sizeof(float));
    src += w;
  }
}

FindResult Table::find(const int64_t* keys, size_t n) {
  FindResult r;
  r.values.allocate(checkedMul(n, config_.dim, "find values"));
  r.exists.allocate(n);
  findInto(keys, n, r.values.data(), r.exists.data());
  return r;
}

FindResult Table::findOrInsert(const int64_t* keys, size_t n, const uint64_t* scores) {
  FindResult r;
  r.values.allocate(checkedMul(n, config_.dim, "findOrInsert values"));
  r.exists.allocate(n);
  findOrInsertInto(keys, n, scores, r.values.data(), r.exists.data());
  return r;
}

HostArray<float> Table::lookupCombined(const BagInput& bag, Combiner combiner, double maxNorm, bool insertMissing) {
  HostArray<float> out(checkedMul(bag.rows, config_.dim, "lookupCombined output"));
  lookupCombinedInto(bag, combiner, maxNorm, insertMissing, out.data());
  return out;
}

void Table::checkOptimizer(const OptimizerParams& opt) const {
  const SlotRequirement req = slotRequirement(opt.kind);
  const size_t dim = config_.dim;
  bool ok = config_.slotWidths.size() == static_cast<size_t>(req.count);
  for (int i = 0; ok && i < req.count; ++i) ok = config_.slotWidths[i] == (req.fullRow[i] ? dim : 1);
  if (!ok) {
    std::vector<uint32_t> need;
    for (int i = 0; i < req.count; ++i) need.push_back(req.fullRow[i] ? static_cast<uint32_t>(dim) : 1);
    ES_FAIL(kInvalidArgument, "Expected optimizer to be an optimizer whose slots are "
                                  << describeLayout(config_.slotWidths, dim) << " (the table's layout) but received "
                                  << optimizerName(opt.kind) << " with slots " << describeLayout(need, dim));
  }
}

void validateTableConfig(const TableConfig& c) {
  ES_CHECK(c.dim >= 1 && c.dim <= kMaxDim, kInvalidArgument,
           "Expected dim to be an integer in [1, " << kMaxDim << "] but received " << c.dim);
  ES_CHECK(c.slotWidths.size() == c.slotInitial.size(), kShapeMismatch,
           "Expected one initial value per slot (" << c.slotWidths.size() << ") but received " << c.slotInitial.size());
  ES_CHECK(c.slotWidths.size() <= kMaxSlots, kInvalidArgument,
           "Expected at most " << kMaxSlots << " slots but received " << c.slotWidths.size());
  for (size_t i = 0; i < c.slotWidths.size(); ++i) {
    ES_CHECK(c.slotWidths[i] == 1 || c.slotWidths[i] == c.dim, kInvalidArgument,
             "Expected slotWidths[" << i << "] to be 1 or dim (" << c.dim << ") but received " << c.slotWidths[i]);
  }
  const Initializer& init = c.initializer;
  const int kind = static_cast<int>(init.kind);
  ES_CHECK(kind >= 0 && kind <= static_cast<int>(InitKind::kArray), kInvalidArgument,
           "Expected initializer kind to be in [0, 7] but received " << kind);
  if (init.kind == InitKind::kRow) {
    ES_CHECK(init.values.size() == c.dim, kShapeMismatch,
             "Expected initializer values of length " << c.dim << " (dim) but received " << init.values.size());
  }
  const int policy = static_cast<int>(c.scorePolicy);
  ES_CHECK(policy >= 0 && policy <= static_cast<int>(ScorePolicy::kCustomized), kInvalidArgument,
           "Expected scorePolicy to be in [0, 6] but received " << policy);
  if (c.isStatic) {
    ES_CHECK(c.vocabularySize >= 1, kInvalidArgument,
             "Expected vocabularySize to be an integer >= 1 but received " << c.vocabularySize);
    if (init.kind == InitKind::kArray) {
      ES_CHECK(init.values.size() == checkedMul(c.vocabularySize, c.dim, "the initializer array"), kShapeMismatch,
               "Expected initializer values of length " << c.vocabularySize * c.dim << " (rows * dim) but received "
                                                        << init.values.size());
    }
    return;
  }
  ES_CHECK(init.kind != InitKind::kArray, kInvalidArgument,
           "Expected initializer to be a per-key initializer for a dynamic table but received array");
  ES_CHECK(c.initCapacity >= 1, kInvalidArgument,
           "Expected initCapacity to be an integer >= 1 but received " << c.initCapacity);
  ES_CHECK(c.maxCapacity >= 1, kInvalidArgument,
           "Expected maxCapacity to be an integer >= 1 but received " << c.maxCapacity);
}

}  // namespace embedstack
