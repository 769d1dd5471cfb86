#include "dedupe.h"

#include "errors.h"
#include "hash.h"

namespace embedstack {

void BatchDedupe::build(const int64_t* keys, size_t n) {
  ES_CHECK(n < UINT32_MAX, kInvalidArgument, "Expected a batch of fewer than 2^32 keys but received " << n);
  keys_.clear();
  counts_.clear();
  first_.clear();
  last_.clear();
  offsets_.clear();
  occ_.clear();
  ids_.resize(n);
  size_t slots = 16;
  while (slots < 2 * n) slots <<= 1;
  const size_t mask = slots - 1;
  ScratchVector<uint32_t> table(slots, 0);  // unique id + 1; 0 = empty
  // Room for half the batch distinct (each array grows past that by doubling).
  const size_t expect = n < 1024 ? n : n / 2;
  keys_.reserve(expect);
  counts_.reserve(expect);
  first_.reserve(expect);
  last_.reserve(expect);
  for (size_t i = 0; i < n; ++i) {
    const int64_t k = keys[i];
    size_t pos = hashKey(k) & mask;
    for (;;) {
      uint32_t e = table[pos];
      if (e == 0) {
        uint32_t u = static_cast<uint32_t>(keys_.size());
        table[pos] = u + 1;
        keys_.push_back(k);
        counts_.push_back(1);
        first_.push_back(static_cast<uint32_t>(i));
        last_.push_back(static_cast<uint32_t>(i));
        ids_[i] = u;
        break;
      }
      if (keys_[e - 1] == k) {
        ids_[i] = e - 1;
        ++counts_[e - 1];
        last_[e - 1] = static_cast<uint32_t>(i);
        break;
      }
      pos = (pos + 1) & mask;
    }
  }
}

void BatchDedupe::buildOccurrenceLists() {
  const size_t u = keys_.size();
  offsets_.assign(u + 1, 0);
  for (size_t j = 0; j < u; ++j) offsets_[j + 1] = offsets_[j] + counts_[j];
  occ_.resize(ids_.size());
  ScratchVector<uint32_t> fill(offsets_.begin(), offsets_.end() - 1);
  for (size_t i = 0; i < ids_.size(); ++i) occ_[fill[ids_[i]]++] = static_cast<uint32_t>(i);
}

}  // namespace embedstack
