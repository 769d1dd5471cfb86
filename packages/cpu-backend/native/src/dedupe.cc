#include "dedupe.h"

#include <new>

#include "errors.h"
#include "hash.h"

namespace embedstack {

namespace {

std::atomic<bool> failBuilds{false};  // failDedupeBuildsForTests

// The distinct keys of keys[0, n) in order of first appearance, into a zeroed table of mask + 1
// slots (unique id + 1; 0 = empty) and arrays of room for n uniques: their keys, counts, first
// and last occurrences; ids[i] = the unique id of occurrence i. Returns the number of uniques.
// The arrays are written in place (no push_back: the stop-37 profile had its calls, not
// inlined, at 3.5% of a training step). kPublish: every kPublishEvery-th new unique, the count so
// far is stored to *published (release: their keys are written before).
template <bool kPublish>
size_t dedupeRange(const int64_t* keys, size_t n, uint32_t* table, size_t mask, int64_t* ukeys, uint32_t* counts,
                   uint32_t* first, uint32_t* last, uint32_t* ids, std::atomic<size_t>* published) {
  // The table slot of the key this many keys ahead is prefetched (the table, 8n bytes, outgrows
  // L2 at a batch of 64K keys); the hashes wait in a ring.
  constexpr size_t kAhead = 16;
  size_t ahead[kAhead];
  for (size_t i = 0; i < kAhead && i < n; ++i) {
    ahead[i] = hashKey(keys[i]) & mask;
    __builtin_prefetch(table + ahead[i]);
  }
  uint32_t u = 0;
  for (size_t i = 0; i < n; ++i) {
    const int64_t k = keys[i];
    size_t pos = ahead[i % kAhead];
    if (i + kAhead < n) {
      const size_t next = hashKey(keys[i + kAhead]) & mask;
      ahead[i % kAhead] = next;
      __builtin_prefetch(table + next);
    }
    for (;;) {
      const uint32_t e = table[pos];
      if (e == 0) {
        table[pos] = u + 1;
        ukeys[u] = k;
        counts[u] = 1;
        first[u] = static_cast<uint32_t>(i);
        last[u] = static_cast<uint32_t>(i);
        ids[i] = u++;
        if (u % BatchDedupe::kPublishEvery == 0) {
          if (kPublish) published->store(u, std::memory_order_release);
          if (failBuilds.load(std::memory_order_relaxed)) throw std::bad_alloc();
        }
        break;
      }
      if (ukeys[e - 1] == k) {
        ids[i] = e - 1;
        ++counts[e - 1];
        last[e - 1] = static_cast<uint32_t>(i);
        break;
      }
      pos = (pos + 1) & mask;
    }
  }
  return u;
}

size_t slotsFor(size_t n) {
  size_t slots = 16;
  while (slots < 2 * n) slots <<= 1;
  return slots;
}

}  // namespace

void failDedupeBuildsForTests(bool fail) noexcept { failBuilds.store(fail, std::memory_order_relaxed); }

void BatchDedupe::build(const int64_t* keys, size_t n, std::atomic<size_t>* published) {
  ES_CHECK(n < UINT32_MAX, kInvalidArgument, "Expected a batch of fewer than 2^32 keys but received " << n);
  offsets_.clear();
  occ_.clear();
  // Room for every key distinct: the arrays are sized once and written in place.
  n_ = n;
  uniques_ = 0;
  ids_.reset(n);
  keys_.reset(n);
  counts_.reset(n);
  first_.reset(n);
  last_.reset(n);
  const size_t mask = slotsFor(n) - 1;
  ScratchVector<uint32_t> table(mask + 1, 0);  // unique id + 1; 0 = empty
  if (published == nullptr) {
    uniques_ = dedupeRange<false>(keys, n, table.data(), mask, keys_.data(), counts_.data(), first_.data(),
                                  last_.data(), ids_.data(), nullptr);
  } else {
    uniques_ = dedupeRange<true>(keys, n, table.data(), mask, keys_.data(), counts_.data(), first_.data(),
                                 last_.data(), ids_.data(), published);
    published->store(uniques_, std::memory_order_release);
  }
}

void BatchDedupe::buildOccurrenceLists() {
  const size_t u = uniques_;
  offsets_.assign(u + 1, 0);
  for (size_t j = 0; j < u; ++j) offsets_[j + 1] = offsets_[j] + counts_[j];
  occ_.resize(n_);
  ScratchVector<uint32_t> fill(offsets_.begin(), offsets_.end() - 1);
  for (size_t i = 0; i < n_; ++i) occ_[fill[ids_[i]]++] = static_cast<uint32_t>(i);
}

}  // namespace embedstack
