// Score policies (core's scores.ts, precise rules in core/src/reference/scoring.ts).
// The pure rules (ES_HD) are shared with the CUDA backend.
// Every scored call advances the table clock once; rows touched by the call get
// nextScore(...). Pure functions plus the relaxed-atomic per-occurrence update the
// read path uses under a shared lock (lfu counts commute, so concurrent reads add up
// exactly; lru-style stores keep the clock of one of the overlapping calls).
#pragma once

#include <cstdint>

#include "hd.h"

namespace embedstack {

enum class ScorePolicy : int { kLru = 0, kLfu, kEpochLru, kEpochLfu, kTimestamp, kFrequency, kCustomized };

constexpr uint64_t kLow32 = 0xffffffffULL;

/** Clock state of one call: the advanced clock, the epoch, wall-clock seconds. */
struct ScoreClock {
  uint64_t clock = 0;
  uint64_t epoch = 0;
  uint64_t now = 0;
};

ES_HD inline bool scoresOnRead(ScorePolicy p) {
  return p == ScorePolicy::kLru || p == ScorePolicy::kLfu || p == ScorePolicy::kEpochLru || p == ScorePolicy::kEpochLfu;
}

ES_HD inline uint64_t saturatingAdd(uint64_t a, uint64_t b) {
  const uint64_t r = a + b;
  return r < a ? UINT64_MAX : r;
}

/**
 * The score of a row touched by a call. `old` is the row's score (0 for a row the
 * call inserted, which scores exactly as an absent one); `occurrences` counts the
 * key's occurrences in the call; `given` is the caller's score at its last one.
 */
ES_HD inline uint64_t nextScore(ScorePolicy p, uint64_t old, uint64_t occurrences, bool hasGiven, uint64_t given,
                                const ScoreClock& t) {
  switch (p) {
    case ScorePolicy::kLru:
      return t.clock;
    case ScorePolicy::kLfu:
      return saturatingAdd(old, occurrences);
    case ScorePolicy::kEpochLru:
      return (t.epoch << 32) | (t.clock & kLow32);
    case ScorePolicy::kEpochLfu: {
      uint64_t count = (old >> 32) == t.epoch ? (old & kLow32) + occurrences : occurrences;
      if (count > kLow32 || count < occurrences) count = kLow32;
      return (t.epoch << 32) | count;
    }
    case ScorePolicy::kTimestamp:
      return t.now;
    case ScorePolicy::kFrequency:
      return saturatingAdd(old, 1);
    case ScorePolicy::kCustomized:
      return hasGiven ? given : old;
  }
  return old;
}

/** True for the policies whose read score does not depend on the old one (lru, epochLru). */
inline bool readScoreIsClock(ScorePolicy p) { return p == ScorePolicy::kLru || p == ScorePolicy::kEpochLru; }

/**
 * A read's store of `s`, a readScoreIsClock policy's score of this call (atomic, relaxed), into
 * a 64-bit score or a 32-bit one (a dynamic table's narrow scores: `s` fits, the table checked).
 */
template <class Score>
inline void storeReadScore(Score* score, uint64_t wide) {
  const Score s = static_cast<Score>(wide);
  // An unchanged score is not stored (no line dirtied, no ping-pong between threads
  // reading the same hot keys), but without a branch: in a large bag about half the
  // reads find the score already set by the same call, and the branch was mispredicted
  // once every 3 reads (callgrind --branch-sim), each time cutting the memory-level
  // parallelism of the probe. The store goes to a local word instead (a conditional move).
  Score unused;
  Score* dst = __atomic_load_n(score, __ATOMIC_RELAXED) != s ? score : &unused;
  __atomic_store_n(dst, s, __ATOMIC_RELAXED);
}

/**
 * One read occurrence of a resident row, applied atomically (read policies only), to a 64-bit
 * score or a 32-bit one (the new score fits: the table checked).
 */
template <class Score>
inline void touchOnReadAtomic(Score* score, ScorePolicy p, const ScoreClock& t) {
  if (readScoreIsClock(p)) {
    storeReadScore(score, nextScore(p, 0, 1, false, 0, t));
    return;
  }
  Score old = __atomic_load_n(score, __ATOMIC_RELAXED);
  for (;;) {
    Score s = static_cast<Score>(nextScore(p, old, 1, false, 0, t));
    if (__atomic_compare_exchange_n(score, &old, s, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return;
  }
}

/** Wall-clock seconds (floor of Date.now() / 1000). */
uint64_t nowSeconds();

/** A row or new key competing for room in a full capped table. */
struct EvictionCandidate {
  uint64_t score;
  int64_t key;
  bool resident;
  uint32_t ref;  // row index (resident) or unique-key index (new)
};

/**
 * True when `a` is kept before `b`: higher score, then a new key before a resident
 * (a new key that ties the lowest resident replaces it, as HierarchicalKV does),
 * then smaller signed key.
 */
ES_HD inline bool keepsBefore(const EvictionCandidate& a, const EvictionCandidate& b) {
  if (a.score != b.score) return a.score > b.score;
  if (a.resident != b.resident) return b.resident;
  return a.key < b.key;
}

}  // namespace embedstack
