// Kernels of the shard-plan ops (core's rawTable.ts; cpu-backend planned_ops.h):
// which entries a shard owns and their local keys, moving rows between entry order
// and the owned entries' compact order, and the planned embedding bag and the
// combiner's backward, bit-compatible with core's reference/combineOps.ts (double,
// entries in bag order, the norm and the dot product summed in column order):
//  - denom_r over EVERY entry of row r: sum 1; mean Σw; sqrtn sqrt(Σw²);
//  - forward term s_j e_j: s_j = w_j, or (w_j * maxNorm) / ||e_j|| when clipped;
//  - backward: dy = (w_j / denom_r) g_r (0 when denom_r == 0), through the gradient
//    of clip_by_norm when ||e_j|| > maxNorm: (maxNorm/||e||) (dy - e (e·dy) / ||e||²).
#pragma once

#include "bag.cuh"
#include "basic.cuh"
#include "shard_plan.h"

namespace embedstack {
namespace cuda {

/** owned[i] = plan owns keys[i]; local[i] its local key. */
struct OwnedEntries {
  static constexpr const char* kName = "ownedEntries";
  struct Args {
    ShardPlan plan;
    const int64_t* keys;
    uint8_t* owned;
    int64_t* local;
  };
  ES_HD static void thread(const Args& a, size_t i) {
    int64_t l = 0;
    a.owned[i] = a.plan.owns(a.keys[i], &l) ? 1 : 0;
    a.local[i] = l;
  }
};

/** index[at[k]] = k (index prefilled with -1: entries not owned). */
struct CompactIndex {
  static constexpr const char* kName = "compactIndex";
  struct Args {
    const uint32_t* at;
    int32_t* index;
  };
  ES_HD static void thread(const Args& a, size_t k) { a.index[a.at[k]] = static_cast<int32_t>(k); }
};

/** Row at[k] of `wide` <-> row k of `compact` (dim floats), in the direction `toWide`. */
struct MoveCompactRows {
  static constexpr const char* kName = "moveCompactRows";
  static constexpr size_t kSharedBytes = 0;
  struct Args {
    const uint32_t* at;
    float* wide;
    float* compact;
    uint32_t dim;
    uint8_t toWide;
  };
  ES_KERNEL_BODY
  template <class G>
  ES_HD static void group(G& g, const Args& a, size_t k) {
    float* w = a.wide + static_cast<size_t>(a.at[k]) * a.dim;
    float* c = a.compact + k * a.dim;
    g.each([&](int l) {
      for (uint32_t x = static_cast<uint32_t>(l); x < a.dim; x += kLanes) {
        if (a.toWide) {
          w[x] = c[x];
        } else {
          c[x] = w[x];
        }
      }
    });
  }
};

/** exists[at[k]] = found[k]. */
struct ScatterFlags {
  static constexpr const char* kName = "scatterFlags";
  struct Args {
    const uint32_t* at;
    const uint8_t* found;
    uint8_t* exists;
  };
  ES_HD static void thread(const Args& a, size_t k) { a.exists[a.at[k]] = a.found[k]; }
};

/** denom[r] of each bag row over every entry. */
struct BagDenominators {
  static constexpr const char* kName = "bagDenominators";
  struct Args {
    const int32_t* rowSplits;
    const float* weights;
    BagCombiner combiner;
    double* denom;
  };
  ES_HD static void thread(const Args& a, size_t r) {
    if (a.combiner == BagCombiner::kSum) {
      a.denom[r] = 1.0;
      return;
    }
    double s = 0;
    for (int32_t j = a.rowSplits[r]; j < a.rowSplits[r + 1]; ++j) {
      const double w = a.weights ? static_cast<double>(a.weights[j]) : 1.0;
      s += a.combiner == BagCombiner::kMean ? w : w * w;
    }
    a.denom[r] = a.combiner == BagCombiner::kMean ? s : std::sqrt(s);
  }
};

/** s_j of each owned entry (index[j] >= 0) from its compact row; maxNorm 0 = the weight. */
struct OwnedScales {
  static constexpr const char* kName = "ownedScales";
  struct Args {
    const int32_t* index;
    const float* rows;  // [owned * dim]
    const float* weights;
    double maxNorm;
    uint32_t dim;
    double* scales;  // [n]
  };
  ES_HD static void thread(const Args& a, size_t j) {
    if (a.index[j] < 0) return;
    const double w = a.weights ? static_cast<double>(a.weights[j]) : 1.0;
    double scale = w;
    if (a.maxNorm > 0) {
      const float* e = a.rows + static_cast<size_t>(a.index[j]) * a.dim;
      double n2 = 0;
      for (uint32_t c = 0; c < a.dim; ++c) n2 += static_cast<double>(e[c]) * static_cast<double>(e[c]);
      const double norm = std::sqrt(n2);
      if (norm > a.maxNorm) scale = (w * a.maxNorm) / norm;
    }
    a.scales[j] = scale;
  }
};

/** out[r] += (Σ_{owned j in r} s_j e_j) / denom_r (nothing when denom_r == 0); one group per bag row. */
struct BagPartial {
  static constexpr const char* kName = "bagPartial";
  static constexpr size_t kSharedBytes = 0;
  struct Args {
    const int32_t* rowSplits;
    const int32_t* index;
    const float* rows;  // [owned * dim]
    const double* scales;
    const double* denom;
    uint32_t dim;
    double* out;  // [nrows * dim]
  };
  ES_KERNEL_BODY
  template <class G>
  ES_HD static void group(G& g, const Args& a, size_t r) {
    const double d = a.denom[r];
    if (d == 0) return;
    const int32_t begin = a.rowSplits[r];
    const int32_t end = a.rowSplits[r + 1];
    for (uint32_t chunk = 0; chunk < a.dim; chunk += kBagChunk) {
      typename G::template Lanes<double> acc[kBagColumnsPerLane];
      g.each([&](int l) {
        for (uint32_t k = 0; k < kBagColumnsPerLane; ++k) acc[k][l] = 0.0;
      });
      for (int32_t j = begin; j < end; ++j) {
        if (a.index[j] < 0) continue;
        const float* e = a.rows + static_cast<size_t>(a.index[j]) * a.dim;
        const double s = a.scales[j];
        g.each([&](int l) {
          for (uint32_t k = 0; k < kBagColumnsPerLane; ++k) {
            const uint32_t c = chunk + k * kLanes + static_cast<uint32_t>(l);
            if (c < a.dim) acc[k][l] = acc[k][l] + s * static_cast<double>(e[c]);
          }
        });
      }
      g.each([&](int l) {
        for (uint32_t k = 0; k < kBagColumnsPerLane; ++k) {
          const uint32_t c = chunk + k * kLanes + static_cast<uint32_t>(l);
          if (c < a.dim) a.out[r * a.dim + c] = a.out[r * a.dim + c] + acc[k][l] / d;
        }
      });
    }
  }
};

/**
 * The combiner's backward, one thread per bag row: each owned entry's gradient from
 * the row's pooled gradient, at entry row j of `out` (or its compact row with `compact`).
 */
struct BagBackward {
  static constexpr const char* kName = "bagBackward";
  struct Args {
    const int32_t* rowSplits;
    const int32_t* index;
    const float* weights;
    const float* grads;  // [nrows * dim]
    const double* denom;
    const float* rows;  // [owned * dim], read when maxNorm > 0
    double maxNorm;
    uint32_t dim;
    uint8_t compact;
    float* out;
  };
  ES_HD static void thread(const Args& a, size_t r) {
    const double d = a.denom[r];
    const float* g = a.grads + r * a.dim;
    for (int32_t j = a.rowSplits[r]; j < a.rowSplits[r + 1]; ++j) {
      const int32_t i = a.index[j];
      if (i < 0) continue;
      const double w = a.weights ? static_cast<double>(a.weights[j]) : 1.0;
      const double scale = d == 0 ? 0.0 : w / d;
      float* o = a.out + static_cast<size_t>(a.compact ? i : j) * a.dim;
      if (a.maxNorm > 0) {
        const float* e = a.rows + static_cast<size_t>(i) * a.dim;
        double n2 = 0;
        for (uint32_t c = 0; c < a.dim; ++c) n2 += static_cast<double>(e[c]) * static_cast<double>(e[c]);
        const double norm = std::sqrt(n2);
        if (norm > a.maxNorm) {
          double dot = 0;
          for (uint32_t c = 0; c < a.dim; ++c) dot += static_cast<double>(e[c]) * (scale * static_cast<double>(g[c]));
          const double k = a.maxNorm / norm;
          for (uint32_t c = 0; c < a.dim; ++c) {
            o[c] = static_cast<float>(k * (scale * static_cast<double>(g[c]) - (static_cast<double>(e[c]) * dot) / n2));
          }
          continue;
        }
      }
      for (uint32_t c = 0; c < a.dim; ++c) o[c] = static_cast<float>(scale * static_cast<double>(g[c]));
    }
  }
};

}  // namespace cuda
}  // namespace embedstack
