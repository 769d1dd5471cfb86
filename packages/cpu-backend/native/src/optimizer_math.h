// The per-element formulas of the fused sparse optimizers (core's reference
// kernels.ts applyOptimizerRow), shared by the CPU backend's row loops
// (optimizer.cc) and the CUDA backend's kernels (ES_HD): every formula in double
// reading the stored float32 values, each stored value rounded to float32 once,
// slots updated earlier in the element read back rounded. Both builds disable
// floating-point contraction, so no multiply-add is fused.
#pragma once

#include <cmath>
#include <cstddef>

#include "hd.h"
#include "optimizer.h"

namespace embedstack {

// Math.sign: NaN and signed zeros pass through.
ES_HD inline double jsSign(double x) {
  return x > 0 ? 1.0 : x < 0 ? -1.0 : x;
}

// Math.max of two numbers: NaN wins, +0 beats -0.
ES_HD inline double jsMax(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

ES_HD inline float f32(double v) {
  return static_cast<float>(v);
}

/** The gradient an update uses: clipped to [clipGradMin, clipGradMax], plus weight decay. */
ES_HD inline double effectiveGradient(const OptimizerParams& p, float g, float w) {
  double x = g;
  if (x < p.clipGradMin) x = p.clipGradMin;
  if (x > p.clipGradMax) x = p.clipGradMax;
  return x + p.weightDecay * static_cast<double>(w);
}

/** A new weight, clipped to [clipWeightMin, clipWeightMax] and stored as float32. */
ES_HD inline void storeWeight(const OptimizerParams& p, float* w, double v) {
  if (v < p.clipWeightMin) v = p.clipWeightMin;
  if (v > p.clipWeightMax) v = p.clipWeightMax;
  *w = f32(v);
}

/**
 * Updates weight w and its slot elements s0 / s1 (element i of each full-row slot)
 * with gradient g (effectiveGradient). RowWiseAdagrad is per row: its accumulator
 * is updated once by rowWiseAccumulate, and `rowDenom` is sqrt(acc) + epsilon.
 */
template <OptimizerKind K>
ES_HD inline void updateElement(const OptimizerParams& p, float* w, float* s0, float* s1, double g, double rowDenom) {
  const double lr = p.lr;
  switch (K) {
    case OptimizerKind::kSgd:
      storeWeight(p, w, static_cast<double>(*w) - lr * g);
      return;
    case OptimizerKind::kAdagrad:
      *s0 = f32(static_cast<double>(*s0) + g * g);
      storeWeight(p, w, static_cast<double>(*w) - (lr * g) / std::sqrt(static_cast<double>(*s0)));
      return;
    case OptimizerKind::kAdagradMomentum: {
      const double acc = *s0;
      *s0 = p.beta2 == 1 ? f32(acc + g * g) : f32(p.beta2 * acc + (1 - p.beta2) * g * g);
      const double scaled = g * std::pow(static_cast<double>(*s0) + p.epsilon, -1.0 / p.exponent);
      *s1 = f32(p.momentum * static_cast<double>(*s1) + scaled);
      const double m = *s1;
      storeWeight(p, w, static_cast<double>(*w) - lr * (p.useNesterov ? p.momentum * m + scaled : m));
      return;
    }
    case OptimizerKind::kAdam: {
      *s0 = f32(p.beta1 * static_cast<double>(*s0) + (1 - p.beta1) * g);
      *s1 = f32(p.beta2 * static_cast<double>(*s1) + (1 - p.beta2) * g * g);
      const double v = *s1;
      const double denom = p.sumInsideSqrt ? std::sqrt(v + p.epsilon * p.epsilon) : std::sqrt(v) + p.epsilon;
      storeWeight(p, w, static_cast<double>(*w) - (lr * static_cast<double>(*s0)) / denom);
      return;
    }
    case OptimizerKind::kFtrl: {
      const double pw = p.learningRatePower;
      const double accOld = *s0;
      const double accNew = f32(accOld + g * g);
      const double sigma = (std::pow(accNew, -pw) - std::pow(accOld, -pw)) / lr;
      *s1 = f32(static_cast<double>(*s1) + g - sigma * static_cast<double>(*w));
      const double l = *s1;
      const double quad = std::pow(accNew, -pw) / lr + p.beta / lr + 2 * p.l2;
      storeWeight(p, w, std::fabs(l) <= p.l1 ? 0.0 : -(l - jsSign(l) * p.l1) / quad);
      *s0 = f32(accNew);
      return;
    }
    case OptimizerKind::kRowWiseAdagrad:
      storeWeight(p, w, static_cast<double>(*w) - (lr * g) / rowDenom);
      return;
    case OptimizerKind::kMomentum: {
      *s0 = f32(p.momentum * static_cast<double>(*s0) + g);
      const double m = *s0;
      storeWeight(p, w, static_cast<double>(*w) - lr * (p.useNesterov ? g + p.momentum * m : m));
      return;
    }
    case OptimizerKind::kAdamax: {
      const double scale = lr / (1 - std::pow(p.beta1, p.step));
      *s0 = f32(p.beta1 * static_cast<double>(*s0) + (1 - p.beta1) * g);
      *s1 = f32(jsMax(p.beta2 * static_cast<double>(*s1), std::fabs(g)));
      storeWeight(p, w, static_cast<double>(*w) - (scale * static_cast<double>(*s0)) / (static_cast<double>(*s1) + p.epsilon));
      return;
    }
    case OptimizerKind::kAdadelta: {
      *s0 = f32(p.rho * static_cast<double>(*s0) + (1 - p.rho) * g * g);
      const double d =
          (std::sqrt(static_cast<double>(*s1) + p.epsilon) / std::sqrt(static_cast<double>(*s0) + p.epsilon)) * g;
      *s1 = f32(p.rho * static_cast<double>(*s1) + (1 - p.rho) * d * d);
      storeWeight(p, w, static_cast<double>(*w) - lr * d);
      return;
    }
  }
}

template <OptimizerKind K>
struct OptimizerTag {
  static constexpr OptimizerKind kind = K;
};

/** Calls f(OptimizerTag<kind>{}): one instantiation per kind (a switch on a template constant inside). */
template <class F>
ES_HD ES_FORCE_INLINE void withOptimizerKind(OptimizerKind kind, F&& f) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return f(OptimizerTag<OptimizerKind::kSgd>{});
    case OptimizerKind::kAdagrad:
      return f(OptimizerTag<OptimizerKind::kAdagrad>{});
    case OptimizerKind::kAdagradMomentum:
      return f(OptimizerTag<OptimizerKind::kAdagradMomentum>{});
    case OptimizerKind::kAdam:
      return f(OptimizerTag<OptimizerKind::kAdam>{});
    case OptimizerKind::kFtrl:
      return f(OptimizerTag<OptimizerKind::kFtrl>{});
    case OptimizerKind::kRowWiseAdagrad:
      return f(OptimizerTag<OptimizerKind::kRowWiseAdagrad>{});
    case OptimizerKind::kMomentum:
      return f(OptimizerTag<OptimizerKind::kMomentum>{});
    case OptimizerKind::kAdamax:
      return f(OptimizerTag<OptimizerKind::kAdamax>{});
    case OptimizerKind::kAdadelta:
      return f(OptimizerTag<OptimizerKind::kAdadelta>{});
  }
}

/** RowWiseAdagrad's accumulator step (sumSquares = Σ g² over the row, in column order); returns sqrt(acc) + eps. */
ES_HD inline double rowWiseAccumulate(const OptimizerParams& p, float* acc, double sumSquares, size_t dim) {
  *acc = f32(static_cast<double>(*acc) + sumSquares / static_cast<double>(dim));
  return std::sqrt(static_cast<double>(*acc)) + p.epsilon;
}

}  // namespace embedstack
