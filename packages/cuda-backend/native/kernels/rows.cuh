// The row store and the per-row kernels of both table kinds.
//
// Rows are dense (0..size-1) records of [value (dim floats) | slots (slotFloats)],
// `stride` floats each, so one access brings a row and its optimizer slots; row r
// lives in HBM when r < hbmRows and in pinned host memory past that (the hybrid
// spill), addressed through RowsView::at. Keys and scores (RowMeta) stay in HBM.
// A group serves one row: lane l handles columns l, l + 32, ... (coalesced).
#pragma once

#include "buckets.cuh"
#include "launch.h"
#include "optimizer_math.h"
#include "random.h"
#include "scores.h"

namespace embedstack {
namespace cuda {

struct RowsView {
  float* hbm;
  float* spill;
  uint64_t hbmRows;
  uint32_t stride;  // floats per row: dim + slotFloats
  uint32_t dim;
  ES_HD float* at(uint64_t r) const { return r < hbmRows ? hbm + r * stride : spill + (r - hbmRows) * stride; }
};

/** A table's initializer (cpu-backend random.h draws the random kinds, bit for bit as core). */
struct InitView {
  InitKind kind;
  double a;
  double b;
  uint32_t seed;
  uint32_t stream;
  const float* values;  // row: [dim]; array: [rows * dim] (device memory)
  uint32_t dim;

  ES_HD uint32_t prefix(int64_t key) const { return keyPrefix(seed, stream, key); }
  /** Column c of the initial row of `key` (array initializers: of row `row`); prefix = prefix(key). */
  ES_HD float value(int64_t key, uint64_t row, uint32_t c, uint32_t keyPrefixWord) const {
    (void)key;
    switch (kind) {
      case InitKind::kZeros:
        return 0.0f;
      case InitKind::kOnes:
        return 1.0f;
      case InitKind::kConstant:
        return static_cast<float>(a);
      case InitKind::kRow:
        return values[c];
      case InitKind::kArray:
        return values[row * dim + c];
      default:
        return randomColumn(kind, a, b, keyPrefixWord, c);
    }
  }
};

/** How a call scores the rows it touches (cpu-backend scores.h rules). */
struct ScoreView {
  ScorePolicy policy;
  ScoreClock clock;
  uint8_t touchReads;  // read calls touch resident rows (lru, lfu, epochLru, epochLfu)
};

/** One read occurrence of a resident row: lru-style stores the clock, lfu-style counts (atomically). */
ES_HD inline void touchOnRead(uint64_t* score, const ScoreView& s) {
  if (s.policy == ScorePolicy::kLru || s.policy == ScorePolicy::kEpochLru) {
    storeRelaxedU64(score, nextScore(s.policy, 0, 1, false, 0, s.clock));
    return;
  }
  uint64_t old = loadRelaxedU64(score);
  for (;;) {
    const uint64_t seen = atomicCasU64(score, old, nextScore(s.policy, old, 1, false, 0, s.clock));
    if (seen == old) return;
    old = seen;
  }
}

/** Lanes write row `src` (or the key's initial value when src is null) into dst [dim]. */
ES_KERNEL_BODY
template <class G>
ES_HD inline void copyOrInit(G& g, const float* src, float* dst, const InitView& init, int64_t key, uint64_t initRow) {
  const uint32_t dim = init.dim;
  if (src) {
    g.each([&](int l) {
      for (uint32_t c = static_cast<uint32_t>(l); c < dim; c += kLanes) dst[c] = src[c];
    });
    return;
  }
  const uint32_t prefix = init.prefix(key);
  g.each([&](int l) {
    for (uint32_t c = static_cast<uint32_t>(l); c < dim; c += kLanes) dst[c] = init.value(key, initRow, c, prefix);
  });
}

/** find: per key, its row (touched on read) or initial value, and whether it exists. */
struct FindRows {
  static constexpr const char* kName = "findRows";
  static constexpr size_t kSharedBytes = 0;
  struct Args {
    IndexView ix;
    RowMeta* meta;
    RowsView rows;
    InitView init;
    ScoreView score;
    const int64_t* keys;
    float* out;       // [n * dim]
    uint8_t* exists;  // [n]
  };
  ES_KERNEL_BODY
  template <class G>
  ES_HD static void group(G& g, const Args& a, size_t i) {
    const int64_t key = a.keys[i];
    const Probe p = probeKey(g, a.ix, a.meta, key, hashKey(key));
    const bool found = p.row != kNoRow;
    copyOrInit(g, found ? a.rows.at(p.row) : nullptr, a.out + i * a.rows.dim, a.init, key, 0);
    g.each([&](int l) {
      if (l != 0) return;
      a.exists[i] = found ? 1 : 0;
      if (found && a.score.touchReads) touchOnRead(&a.meta[p.row].score, a.score);
    });
  }
};

/**
 * Occurrence i of a call: the row of its unique key (or the key's initial value when
 * it has none: refused) and whether the key was present before the call.
 */
struct GatherOccurrences {
  static constexpr const char* kName = "gatherOccurrences";
  static constexpr size_t kSharedBytes = 0;
  struct Args {
    RowsView rows;
    InitView init;
    const int64_t* keys;       // [n]
    const uint32_t* uniqueOf;  // [n], or null: unique i is occurrence i
    const uint32_t* rowOf;     // [u]
    const uint8_t* present;    // [u], or null: every key present
    float* out;                // [n * dim]
    uint8_t* exists;           // [n] or null
  };
  ES_KERNEL_BODY
  template <class G>
  ES_HD static void group(G& g, const Args& a, size_t i) {
    const uint32_t u = a.uniqueOf ? a.uniqueOf[i] : static_cast<uint32_t>(i);
    const uint32_t row = a.rowOf[u];
    copyOrInit(g, row != kNoRow ? a.rows.at(row) : nullptr, a.out + i * a.rows.dim, a.init, a.keys[i], 0);
    g.each([&](int l) {
      if (l == 0 && a.exists) a.exists[i] = a.present ? a.present[u] : 1;
    });
  }
};

/**
 * Rows set to their initial state: key, score 0 (dynamic tables), initial slots, and
 * the initial value when `fill`. Row k is rowOf[k], or first + k.
 */
struct InitRows {
  static constexpr const char* kName = "initRows";
  static constexpr size_t kSharedBytes = 0;
  struct Args {
    RowMeta* meta;  // null: static table
    RowsView rows;
    InitView init;
    const float* slotTemplate;  // [stride - dim] each slot's initial value
    const int64_t* keys;        // [count] keys of those rows (static: null, key = row)
    const uint32_t* rowOf;      // [count] or null
    uint64_t first;
    uint8_t fill;
  };
  ES_KERNEL_BODY
  template <class G>
  ES_HD static void group(G& g, const Args& a, size_t k) {
    const uint64_t row = a.rowOf ? a.rowOf[k] : a.first + k;
    const int64_t key = a.keys ? a.keys[k] : static_cast<int64_t>(row);
    float* dst = a.rows.at(row);
    if (a.fill) copyOrInit(g, nullptr, dst, a.init, key, row);
    const uint32_t dim = a.rows.dim;
    const uint32_t slotFloats = a.rows.stride - dim;
    g.each([&](int l) {
      for (uint32_t c = static_cast<uint32_t>(l); c < slotFloats; c += kLanes) dst[dim + c] = a.slotTemplate[c];
      if (l == 0 && a.meta) a.meta[row] = RowMeta{key, 0};
    });
  }
};

/**
 * Per unique key u resident after admission: writes the value (and, for imports,
 * the slots, or their initial values when `slots` is null and `slotTemplate` is
 * given) of its last occurrence, when `values` is given; then scores it.
 */
struct WriteUniques {
  static constexpr const char* kName = "writeUniques";
  static constexpr size_t kSharedBytes = 0;
  struct Args {
    RowMeta* meta;  // null for static tables (no scores)
    RowsView rows;
    const uint32_t* rowOf;     // [u]
    const uint32_t* lastOf;    // [u]
    const uint32_t* countOf;   // [u]
    const float* values;       // [n * dim] or null (scores only)
    const float* const* slots; // null, or per slot [n * width]
    const uint32_t* widths;    // [slotCount]
    uint32_t slotCount;
    const float* slotTemplate;  // with slots null: reset the slots to it
    const uint64_t* given;     // caller scores [n] or null
    uint8_t explicitScores;    // importRows with scores: the caller's score as is
    ScoreView score;
  };
  ES_KERNEL_BODY
  template <class G>
  ES_HD static void group(G& g, const Args& a, size_t u) {
    const uint32_t row = a.rowOf[u];
    if (row == kNoRow) return;
    const uint32_t last = a.lastOf[u];
    float* dst = a.rows.at(row);
    const uint32_t dim = a.rows.dim;
    g.each([&](int l) {
      if (a.values) {
        const float* src = a.values + static_cast<size_t>(last) * dim;
        for (uint32_t c = static_cast<uint32_t>(l); c < dim; c += kLanes) dst[c] = src[c];
      }
      if (a.slots) {
        uint32_t at = dim;
        for (uint32_t j = 0; j < a.slotCount; ++j) {
          const uint32_t w = a.widths[j];
          const float* src = a.slots[j] + static_cast<size_t>(last) * w;
          for (uint32_t c = static_cast<uint32_t>(l); c < w; c += kLanes) dst[at + c] = src[c];
          at += w;
        }
      } else if (a.slotTemplate) {
        for (uint32_t c = static_cast<uint32_t>(l); c < a.rows.stride - dim; c += kLanes) dst[dim + c] = a.slotTemplate[c];
      }
      if (l != 0 || !a.meta) return;
      uint64_t* s = &a.meta[row].score;
      const bool has = a.given != nullptr;
      const uint64_t given = has ? a.given[last] : 0;
      *s = a.explicitScores ? given : nextScore(a.score.policy, *s, a.countOf[u], has, given, a.score.clock);
    });
  }
};

/** Moves row from[k] to row to[k] (key, score, value and slots): compaction after removals. */
struct MoveRows {
  static constexpr const char* kName = "moveRows";
  static constexpr size_t kSharedBytes = 0;
  struct Args {
    RowMeta* meta;
    RowsView rows;
    const uint32_t* from;
    const uint32_t* to;
  };
  ES_KERNEL_BODY
  template <class G>
  ES_HD static void group(G& g, const Args& a, size_t k) {
    const float* src = a.rows.at(a.from[k]);
    float* dst = a.rows.at(a.to[k]);
    g.each([&](int l) {
      for (uint32_t c = static_cast<uint32_t>(l); c < a.rows.stride; c += kLanes) dst[c] = src[c];
      if (l == 0) a.meta[a.to[k]] = a.meta[a.from[k]];
    });
  }
};

/** Copies rows [0, n) from one row store to another (growth, or moving rows in or out of HBM). */
struct CopyRows {
  static constexpr const char* kName = "copyRows";
  static constexpr size_t kSharedBytes = 0;
  struct Args {
    RowsView from;
    RowsView to;
  };
  ES_KERNEL_BODY
  template <class G>
  ES_HD static void group(G& g, const Args& a, size_t r) {
    const float* src = a.from.at(r);
    float* dst = a.to.at(r);
    g.each([&](int l) {
      for (uint32_t c = static_cast<uint32_t>(l); c < a.from.stride; c += kLanes) dst[c] = src[c];
    });
  }
};

/** Rows start + i, i < n, into separate arrays (keys, values, each slot, scores). */
struct ExportRows {
  static constexpr const char* kName = "exportRows";
  static constexpr size_t kSharedBytes = 0;
  struct Args {
    const RowMeta* meta;  // null: static (key = row, score 0)
    RowsView rows;
    uint64_t start;
    int64_t* keys;
    uint64_t* scores;
    float* values;
    float* const* slots;  // per slot [n * width]
    const uint32_t* widths;
    uint32_t slotCount;
  };
  ES_KERNEL_BODY
  template <class G>
  ES_HD static void group(G& g, const Args& a, size_t i) {
    const uint64_t row = a.start + i;
    const float* src = a.rows.at(row);
    const uint32_t dim = a.rows.dim;
    g.each([&](int l) {
      for (uint32_t c = static_cast<uint32_t>(l); c < dim; c += kLanes) a.values[i * dim + c] = src[c];
      uint32_t at = dim;
      for (uint32_t j = 0; j < a.slotCount; ++j) {
        const uint32_t w = a.widths[j];
        for (uint32_t c = static_cast<uint32_t>(l); c < w; c += kLanes) a.slots[j][i * w + c] = src[at + c];
        at += w;
      }
      if (l != 0) return;
      a.keys[i] = a.meta ? a.meta[row].key : static_cast<int64_t>(row);
      a.scores[i] = a.meta ? loadRelaxedU64(&a.meta[row].score) : 0;
    });
  }
};

/**
 * accum's rule per unique key, its occurrences in order: present & exists -> add
 * the delta; absent & !exists -> the delta becomes the value (the row admitted for
 * it); else nothing. Then the key is scored when resident.
 */
struct AccumUniques {
  static constexpr const char* kName = "accumUniques";
  static constexpr size_t kSharedBytes = 0;
  struct Args {
    RowMeta* meta;  // null: static table (every key present, no scores)
    RowsView rows;
    const uint32_t* rowOf;
    const uint8_t* present;
    const uint32_t* occOffsets;  // [u + 1]
    const uint32_t* occList;     // occurrences of each unique, in order
    const float* deltas;         // [n * dim]
    const uint8_t* exists;       // [n]
    const uint64_t* given;
    ScoreView score;
  };
  ES_KERNEL_BODY
  template <class G>
  ES_HD static void group(G& g, const Args& a, size_t u) {
    const uint32_t row = a.rowOf[u];
    if (row == kNoRow) return;
    float* dst = a.rows.at(row);
    const uint32_t dim = a.rows.dim;
    bool here = a.present[u] != 0;
    for (uint32_t k = a.occOffsets[u]; k < a.occOffsets[u + 1]; ++k) {
      const uint32_t i = a.occList[k];
      const bool ex = a.exists[i] != 0;
      const float* d = a.deltas + static_cast<size_t>(i) * dim;
      if (here && ex) {
        g.each([&](int l) {
          for (uint32_t c = static_cast<uint32_t>(l); c < dim; c += kLanes) dst[c] = dst[c] + d[c];
        });
      } else if (!here && !ex) {
        g.each([&](int l) {
          for (uint32_t c = static_cast<uint32_t>(l); c < dim; c += kLanes) dst[c] = d[c];
        });
        here = true;
      }
    }
    g.each([&](int l) {
      if (l != 0 || !a.meta) return;
      const uint32_t count = a.occOffsets[u + 1] - a.occOffsets[u];
      const uint32_t last = a.occList[a.occOffsets[u + 1] - 1];
      uint64_t* s = &a.meta[row].score;
      const bool has = a.given != nullptr;
      *s = nextScore(a.score.policy, *s, count, has, has ? a.given[last] : 0, a.score.clock);
    });
  }
};

/**
 * applyGradients per unique key: its gradients summed in float in order of
 * occurrence (from 0, as the reference), then one fused optimizer update of the row
 * and its slots (cpu-backend optimizer_math.h), then the score.
 */
struct ApplyOptimizer {
  static constexpr const char* kName = "applyOptimizer";
  static constexpr size_t kSharedBytes = 0;
  struct Args {
    RowMeta* meta;  // null: static table
    RowsView rows;
    const uint32_t* rowOf;
    const uint32_t* occOffsets;
    const uint32_t* occList;
    const float* grads;  // [n * dim]
    OptimizerParams opt;
    ScoreView score;
  };

  ES_KERNEL_BODY
  template <OptimizerKind K, class G>
  ES_HD static void update(G& g, const Args& a, float* w, const uint32_t* occ, uint32_t count, double rowDenom) {
    const uint32_t dim = a.rows.dim;
    float* slots = w + dim;
    g.each([&](int l) {
      for (uint32_t c = static_cast<uint32_t>(l); c < dim; c += kLanes) {
        float sum = 0.0f + a.grads[static_cast<size_t>(occ[0]) * dim + c];
        for (uint32_t k = 1; k < count; ++k) sum = sum + a.grads[static_cast<size_t>(occ[k]) * dim + c];
        const double grad = effectiveGradient(a.opt, sum, w[c]);
        updateElement<K>(a.opt, w + c, slots + c, slots + dim + c, grad, rowDenom);
      }
    });
  }

  /** RowWiseAdagrad: Σ g² over the row in column order (one lane), then the per-element step. */
  ES_KERNEL_BODY
  template <class G>
  ES_HD static void rowWise(G& g, const Args& a, float* w, const uint32_t* occ, uint32_t count) {
    const uint32_t dim = a.rows.dim;
    typename G::template Lanes<double> denom;
    g.each([&](int l) {
      if (l != 0) return;
      double sq = 0;
      for (uint32_t c = 0; c < dim; ++c) {
        float sum = 0.0f + a.grads[static_cast<size_t>(occ[0]) * dim + c];
        for (uint32_t k = 1; k < count; ++k) sum = sum + a.grads[static_cast<size_t>(occ[k]) * dim + c];
        const double grad = effectiveGradient(a.opt, sum, w[c]);
        sq += grad * grad;
      }
      denom[l] = rowWiseAccumulate(a.opt, w + dim, sq, dim);
    });
    update<OptimizerKind::kRowWiseAdagrad>(g, a, w, occ, count, g.shfl(denom, 0));
  }

  ES_KERNEL_BODY
  template <class G>
  ES_HD static void group(G& g, const Args& a, size_t u) {
    const uint32_t row = a.rowOf[u];
    if (row == kNoRow) return;
    float* w = a.rows.at(row);
    const uint32_t* occ = a.occList + a.occOffsets[u];
    const uint32_t count = a.occOffsets[u + 1] - a.occOffsets[u];
    if (a.opt.kind == OptimizerKind::kRowWiseAdagrad) {
      rowWise(g, a, w, occ, count);
    } else {
      withOptimizerKind(a.opt.kind, [&](auto tag) { update<decltype(tag)::kind>(g, a, w, occ, count, 0); });
    }
    g.each([&](int l) {
      if (l != 0 || !a.meta) return;
      uint64_t* s = &a.meta[row].score;
      *s = nextScore(a.score.policy, *s, count, false, 0, a.score.clock);
    });
  }
};

}  // namespace cuda
}  // namespace embedstack
