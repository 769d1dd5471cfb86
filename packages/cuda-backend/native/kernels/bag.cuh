// The embedding bag (lookupCombined), bit-compatible with core's reference
// combineBag: per output row, in double, entries in bag order, each entry's row
// scaled by its weight (or clipped to maxNorm: TF clip_by_norm), then divided by
// the row's denominator (sum: 1, mean: Σw, sqrtn: sqrt(Σw²); 0 -> zeros) and
// rounded to float32 once. max / min: the element-wise maximum / minimum of the
// scaled rows, the first entry's value kept unless a later one is strictly greater
// / smaller (core's reference); a row without entries gives zeros.
//  - EntryScales (one thread per entry, only with maxNorm): w_j, or
//    (w_j * maxNorm) / ||e_j|| when the row's norm exceeds maxNorm, the norm summed
//    in column order as the reference does;
//  - BagCombine (one group per bag row): lanes own columns (chunks of 128 columns,
//    4 double accumulators per lane) and walk the row's entries in order.
// Entries whose key has no row (missing keys of a find) use the key's initial value.
#pragma once

#include "rows.cuh"

namespace embedstack {
namespace cuda {

enum class BagCombiner : int { kSum = 0, kMean = 1, kSqrtn = 2, kMax = 3, kMin = 4 };

constexpr uint32_t kBagColumnsPerLane = 4;
constexpr uint32_t kBagChunk = kLanes * kBagColumnsPerLane;

struct EntryScales {
  static constexpr const char* kName = "entryScales";
  struct Args {
    RowsView rows;
    InitView init;
    const int64_t* keys;
    const uint32_t* entryRow;  // [n] row, or kNoRow (initial value)
    const float* weights;      // [n] or null
    double maxNorm;
    double* scales;  // [n]
  };
  ES_HD static void thread(const Args& a, size_t j) {
    const double w = a.weights ? static_cast<double>(a.weights[j]) : 1.0;
    const uint32_t dim = a.rows.dim;
    const uint32_t row = a.entryRow[j];
    const float* e = row != kNoRow ? a.rows.at(row) : nullptr;
    const uint32_t prefix = e ? 0 : a.init.prefix(a.keys[j]);
    double n2 = 0;
    for (uint32_t c = 0; c < dim; ++c) {
      const double x = e ? static_cast<double>(e[c]) : static_cast<double>(a.init.value(a.keys[j], 0, c, prefix));
      n2 += x * x;
    }
    const double norm = std::sqrt(n2);
    a.scales[j] = norm > a.maxNorm ? (w * a.maxNorm) / norm : w;
  }
};

struct BagCombine {
  static constexpr const char* kName = "bagCombine";
  static constexpr size_t kSharedBytes = 0;
  struct Args {
    RowsView rows;
    InitView init;
    const int32_t* rowSplits;  // [nrows + 1]
    const int64_t* keys;       // [n]
    const uint32_t* entryRow;  // [n] row, or kNoRow (initial value)
    const float* weights;      // [n] or null
    const double* scales;      // [n] (maxNorm) or null: the weights
    BagCombiner combiner;
    float* out;  // [nrows * dim]
  };
  ES_KERNEL_BODY
  template <class G>
  ES_HD static void group(G& g, const Args& a, size_t r) {
    const uint32_t dim = a.rows.dim;
    const size_t begin = static_cast<size_t>(a.rowSplits[r]);
    const size_t end = static_cast<size_t>(a.rowSplits[r + 1]);
    double wsum = 0;
    double wsq = 0;
    for (size_t j = begin; j < end; ++j) {
      const double w = a.weights ? static_cast<double>(a.weights[j]) : 1.0;
      wsum += w;
      wsq += w * w;
    }
    const double div = a.combiner == BagCombiner::kMean ? wsum : a.combiner == BagCombiner::kSqrtn ? std::sqrt(wsq) : 1.0;
    const int extreme = a.combiner == BagCombiner::kMax ? 1 : a.combiner == BagCombiner::kMin ? -1 : 0;
    float* o = a.out + r * dim;
    for (uint32_t chunk = 0; chunk < dim; chunk += kBagChunk) {
      typename G::template Lanes<double> acc[kBagColumnsPerLane];
      g.each([&](int l) {
        for (uint32_t k = 0; k < kBagColumnsPerLane; ++k) acc[k][l] = 0.0;
      });
      for (size_t j = begin; j < end; ++j) {
        const double scale = a.scales ? a.scales[j] : a.weights ? static_cast<double>(a.weights[j]) : 1.0;
        const uint32_t row = a.entryRow[j];
        const float* e = row != kNoRow ? a.rows.at(row) : nullptr;
        const uint32_t prefix = e ? 0 : a.init.prefix(a.keys[j]);
        g.each([&](int l) {
          for (uint32_t k = 0; k < kBagColumnsPerLane; ++k) {
            const uint32_t c = chunk + k * kLanes + static_cast<uint32_t>(l);
            if (c >= dim) break;
            const double x = e ? static_cast<double>(e[c]) : static_cast<double>(a.init.value(a.keys[j], 0, c, prefix));
            if (extreme == 0) {
              acc[k][l] = acc[k][l] + scale * x;
            } else {
              const double v = scale * x;
              if (j == begin || (extreme > 0 ? v > acc[k][l] : v < acc[k][l])) acc[k][l] = v;
            }
          }
        });
      }
      g.each([&](int l) {
        for (uint32_t k = 0; k < kBagColumnsPerLane; ++k) {
          const uint32_t c = chunk + k * kLanes + static_cast<uint32_t>(l);
          if (c >= dim) break;
          o[c] = div == 0 ? 0.0f : div == 1.0 ? static_cast<float>(acc[k][l]) : static_cast<float>(acc[k][l] / div);
        }
      });
    }
  }
};

}  // namespace cuda
}  // namespace embedstack
