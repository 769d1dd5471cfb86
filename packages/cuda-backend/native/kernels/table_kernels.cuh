// Small kernels of the tables' control flow (ops/*.cu): lookups with read scoring,
// admission bookkeeping, eviction candidates, compaction flags, static key checks.
#pragma once

#include "basic.cuh"
#include "rows.cuh"
#include "select.cuh"

namespace embedstack {
namespace cuda {

/** rows[i] = the row of keys[i] or kNoRow; with `touch`, resident rows are scored as read (per occurrence). */
struct LookupRows {
  static constexpr const char* kName = "lookupRows";
  static constexpr size_t kSharedBytes = 0;
  struct Args {
    IndexView ix;
    RowMeta* meta;
    const int64_t* keys;
    uint32_t* rows;
    ScoreView score;
    uint8_t touch;
  };
  ES_KERNEL_BODY
  template <class G>
  ES_HD static void group(G& g, const Args& a, size_t i) {
    const int64_t key = a.keys[i];
    const Probe p = probeKey(g, a.ix, a.meta, key, hashKey(key));
    g.each([&](int l) {
      if (l != 0) return;
      a.rows[i] = p.row;
      if (a.touch && p.row != kNoRow) touchOnRead(&a.meta[p.row].score, a.score);
    });
  }
};

/** flags[u] = 1 where rowOf[u] == kNoRow and (no `wants` or wants[u]): the keys a write would insert. */
struct FreshFlags {
  static constexpr const char* kName = "freshFlags";
  struct Args {
    const uint32_t* rowOf;
    const uint8_t* wants;
    uint8_t* fresh;
    uint8_t* present;  // [u] rowOf[u] != kNoRow
  };
  ES_HD static void thread(const Args& a, size_t u) {
    const bool here = a.rowOf[u] != kNoRow;
    a.present[u] = here ? 1 : 0;
    a.fresh[u] = !here && (!a.wants || a.wants[u]) ? 1 : 0;
  }
};

/**
 * The read half of a read-then-train step (applyCombinedGradients' clipping), scored once
 * the step can no longer fail: each unique resident before the call (present[u]) gets the
 * score its countOf[u] read occurrences would have given it, one after the other (lru-style:
 * the read's clock; lfu-style: the count added, saturating as per occurrence).
 */
struct TouchReadUniques {
  static constexpr const char* kName = "touchReadUniques";
  struct Args {
    RowMeta* meta;
    const uint32_t* rowOf;
    const uint8_t* present;
    const uint32_t* countOf;
    ScoreView score;
  };
  ES_HD static void thread(const Args& a, size_t u) {
    if (!a.present[u] || a.rowOf[u] == kNoRow) return;
    uint64_t* s = &a.meta[a.rowOf[u]].score;
    *s = nextScore(a.score.policy, *s, a.countOf[u], false, 0, a.score.clock);
  }
};

/** saved[i] = the score of row rows[i] (restore: the other way); kNoRow rows are skipped. */
struct CopyScores {
  static constexpr const char* kName = "copyScores";
  struct Args {
    RowMeta* meta;
    const uint32_t* rows;
    uint64_t* saved;
    uint8_t restore;
  };
  ES_HD static void thread(const Args& a, size_t i) {
    const uint32_t row = a.rows[i];
    if (row == kNoRow) return;
    if (a.restore) {
      a.meta[row].score = a.saved[i];
    } else {
      a.saved[i] = a.meta[row].score;
    }
  }
};

/** wants[uniqueOf[i]] = 1 for each occurrence with exists[i] == 0 (accum inserts only from those). */
struct WantsFromExists {
  static constexpr const char* kName = "wantsFromExists";
  struct Args {
    const uint32_t* uniqueOf;
    const uint8_t* exists;
    uint8_t* wants;
  };
  ES_HD static void thread(const Args& a, size_t i) {
    if (!a.exists[i]) a.wants[a.uniqueOf[i]] = 1;
  }
};

/** Admitted key k (unique list[k]) gets row base + k; newKeys[k] is its key. */
struct AssignRows {
  static constexpr const char* kName = "assignRows";
  struct Args {
    const uint32_t* list;
    const int64_t* uniqueKeys;
    uint32_t* rowOf;
    int64_t* newKeys;
    uint32_t base;
  };
  ES_HD static void thread(const Args& a, size_t k) {
    const uint32_t u = a.list[k];
    a.rowOf[u] = a.base + static_cast<uint32_t>(k);
    a.newKeys[k] = a.uniqueKeys[u];
  }
};

/** flags[list[k]] = value. */
struct MarkListed {
  static constexpr const char* kName = "markListed";
  struct Args {
    const uint32_t* list;
    uint8_t* flags;
    uint8_t value;
  };
  ES_HD static void thread(const Args& a, size_t k) { a.flags[a.list[k]] = a.value; }
};

/** flags[i] = rows[i] != kNoRow (or, with `invert`, flags[i] = !src[i]). */
struct RowFlags {
  static constexpr const char* kName = "rowFlags";
  struct Args {
    const uint32_t* rows;  // null: invert src
    const uint8_t* src;
    uint8_t* flags;
  };
  ES_HD static void thread(const Args& a, size_t i) {
    a.flags[i] = a.rows ? (a.rows[i] != kNoRow ? 1 : 0) : (a.src[i] ? 0 : 1);
  }
};

/**
 * Eviction candidates: residents[k] for k < residentCount (their row's score and
 * key), then fresh uniques (the score the call would give them).
 */
struct BuildCandidates {
  static constexpr const char* kName = "buildCandidates";
  struct Args {
    const RowMeta* meta;
    const uint32_t* residents;
    uint32_t residentCount;
    const uint32_t* fresh;
    const int64_t* uniqueKeys;
    const uint32_t* countOf;
    const uint32_t* lastOf;
    const uint64_t* given;
    uint8_t explicitScores;
    ScoreView score;
    SelectCandidate* out;
  };
  ES_HD static void thread(const Args& a, size_t k) {
    if (k < a.residentCount) {
      const uint32_t row = a.residents[k];
      a.out[k] = SelectCandidate{a.meta[row].score, a.meta[row].key, row, 1};
      return;
    }
    const uint32_t u = a.fresh[k - a.residentCount];
    const bool has = a.given != nullptr;
    const uint64_t given = has ? a.given[a.lastOf[u]] : 0;
    const uint64_t s =
        a.explicitScores ? given : nextScore(a.score.policy, 0, a.countOf[u], has, given, a.score.clock);
    a.out[k] = SelectCandidate{s, a.uniqueKeys[u], u, 0};
  }
};

/** Every row as a candidate (restrict). */
struct RowCandidates {
  static constexpr const char* kName = "rowCandidates";
  struct Args {
    const RowMeta* meta;
    SelectCandidate* out;
  };
  ES_HD static void thread(const Args& a, size_t r) {
    a.out[r] = SelectCandidate{a.meta[r].score, a.meta[r].key, static_cast<uint32_t>(r), 1};
  }
};

/** Splits decided candidates: dropped residents -> evict flags by row; kept / dropped new keys -> flags by unique. */
struct SplitDecisions {
  static constexpr const char* kName = "splitDecisions";
  struct Args {
    const SelectCandidate* c;
    const uint8_t* state;
    uint8_t* evictRow;   // [size]
    uint8_t* admitNew;   // [u]
  };
  ES_HD static void thread(const Args& a, size_t k) {
    const SelectCandidate& c = a.c[k];
    const bool keep = a.state[k] == kKeep;
    if (c.resident) {
      if (!keep) a.evictRow[c.ref] = 1;
    } else if (keep) {
      a.admitNew[c.ref] = 1;
    }
  }
};

/** rowOf[i] = keys[i] (static tables: the key is the row). */
struct KeysAsRows {
  static constexpr const char* kName = "keysAsRows";
  struct Args {
    const int64_t* keys;
    uint32_t* rows;
  };
  ES_HD static void thread(const Args& a, size_t i) { a.rows[i] = static_cast<uint32_t>(a.keys[i]); }
};

/** *firstBad = the smallest i with keys[i] outside [0, limit) (stays 0xffffffff when none). */
struct FirstOutOfRange {
  static constexpr const char* kName = "firstOutOfRange";
  struct Args {
    const int64_t* keys;
    uint64_t limit;
    uint32_t* firstBad;
  };
  ES_HD static void thread(const Args& a, size_t i) {
    if (static_cast<uint64_t>(a.keys[i]) >= a.limit) atomicMinU32(a.firstBad, static_cast<uint32_t>(i));
  }
};

/** entryRow[j] = rowOf[uniqueOf[j]]. */
struct EntryRows {
  static constexpr const char* kName = "entryRows";
  struct Args {
    const uint32_t* uniqueOf;
    const uint32_t* rowOf;
    uint32_t* entryRow;
  };
  ES_HD static void thread(const Args& a, size_t j) { a.entryRow[j] = a.rowOf[a.uniqueOf[j]]; }
};

}  // namespace cuda
}  // namespace embedstack
