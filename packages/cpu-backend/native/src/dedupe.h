// Distinct keys of a batch, in order of first appearance, with per-occurrence
// unique ids, counts and last occurrences (write ops score by them, applyGradients
// sums duplicate gradients by them). A temporary linear-probing table of 2n slots.
// Not thread-safe; one per call.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "memory.h"

namespace embedstack {

class BatchDedupe {
 public:
  /**
   * The distinct keys of keys[0, n) in order of first appearance. With `published`, the number of
   * uniques found so far is stored to it (release) every kPublishEvery new ones and at the end,
   * so that another thread may read key(u) for u below it while the build runs (nothing else).
   */
  void build(const int64_t* keys, size_t n, std::atomic<size_t>* published = nullptr);
  static constexpr size_t kPublishEvery = 256;

  size_t uniqueCount() const { return uniques_; }
  int64_t key(size_t u) const { return keys_[u]; }
  const int64_t* keys() const { return keys_.data(); }
  /** Unique id of occurrence i. */
  uint32_t uniqueOf(size_t i) const { return ids_[i]; }
  /** [n] the unique id of each occurrence. */
  const uint32_t* uniqueIds() const { return ids_.data(); }
  uint32_t count(size_t u) const { return counts_[u]; }
  uint32_t firstOccurrence(size_t u) const { return first_[u]; }
  uint32_t lastOccurrence(size_t u) const { return last_[u]; }
  /** [uniqueCount()] each unique's first / last occurrence. */
  const uint32_t* firstOccurrences() const { return first_.data(); }
  const uint32_t* lastOccurrences() const { return last_.data(); }

  /** Occurrences of each unique in order: occurrences(u) = [begin, end) into occurrenceList(). Built on demand. */
  void buildOccurrenceLists();
  const uint32_t* occurrenceList() const { return occ_.data(); }
  uint32_t occurrencesBegin(size_t u) const { return offsets_[u]; }
  uint32_t occurrencesEnd(size_t u) const { return offsets_[u + 1]; }

 private:
  size_t n_ = 0;  // the batch's keys
  size_t uniques_ = 0;
  // Room for n_ uniques each (the first uniques_ hold them).
  ScratchArray<int64_t> keys_;
  ScratchArray<uint32_t> ids_;
  ScratchArray<uint32_t> counts_;
  ScratchArray<uint32_t> first_;
  ScratchArray<uint32_t> last_;
  ScratchVector<uint32_t> offsets_;
  ScratchVector<uint32_t> occ_;
};

/**
 * Tests: while `fail`, every BatchDedupe::build throws std::bad_alloc once it has found
 * kPublishEvery uniques (after publishing them), as a build that ran out of memory midway.
 */
void failDedupeBuildsForTests(bool fail) noexcept;

}  // namespace embedstack
