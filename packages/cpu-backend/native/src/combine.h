// Embedding-bag reduction of one bag row, bit-compatible with core's reference
// combineBag: per row in double, entries in bag order, each entry optionally
// clipped to `maxNorm` (TF clip_by_norm), sum / mean (÷ Σw) / sqrtn (÷ sqrt Σw²),
// zero denominator -> zeros, result rounded to float32 once.
#pragma once

#include <cmath>
#include <cstddef>

namespace embedstack {

enum class Combiner : int { kSum = 0, kMean = 1, kSqrtn = 2 };

/** Accumulator for one output row; `acc` is caller-owned scratch of dim doubles. */
class RowCombiner {
 public:
  RowCombiner(Combiner combiner, double maxNorm, size_t dim, double* acc)
      : combiner_(combiner), maxNorm_(maxNorm), dim_(dim), acc_(acc) {}

  void begin() {
    for (size_t c = 0; c < dim_; ++c) acc_[c] = 0.0;
    wsum_ = 0;
    wsq_ = 0;
  }

  void add(const float* e, double w) {
    wsum_ += w;
    wsq_ += w * w;
    double scale = w;
    if (maxNorm_ > 0) {
      double n2 = 0;
      for (size_t c = 0; c < dim_; ++c) n2 += static_cast<double>(e[c]) * static_cast<double>(e[c]);
      const double norm = std::sqrt(n2);
      if (norm > maxNorm_) scale = (w * maxNorm_) / norm;
    }
    if (scale == 1.0) {
      addUnit(e);  // 1.0 * e[c] is exact: same result, no multiply
    } else {
      for (size_t c = 0; c < dim_; ++c) acc_[c] = acc_[c] + scale * static_cast<double>(e[c]);
    }
  }

  void finish(float* out) const {
    double div = 1;
    if (combiner_ == Combiner::kMean) div = wsum_;
    if (combiner_ == Combiner::kSqrtn) div = std::sqrt(wsq_);
    if (div == 0) {
      for (size_t c = 0; c < dim_; ++c) out[c] = 0.0f;
      return;
    }
    if (div == 1.0) {
      for (size_t c = 0; c < dim_; ++c) out[c] = static_cast<float>(acc_[c]);
    } else {
      for (size_t c = 0; c < dim_; ++c) out[c] = static_cast<float>(acc_[c] / div);
    }
  }

 private:
  void addUnit(const float* e);

  Combiner combiner_;
  double maxNorm_;
  size_t dim_;
  double* acc_;
  double wsum_ = 0;
  double wsq_ = 0;
};

}  // namespace embedstack
