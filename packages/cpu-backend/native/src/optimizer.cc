#include "optimizer.h"

#include <cmath>

#include "multiversion.h"

namespace embedstack {

SlotRequirement slotRequirement(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return {0, {false, false}};
    case OptimizerKind::kAdagrad:
    case OptimizerKind::kMomentum:
      return {1, {true, false}};
    case OptimizerKind::kRowWiseAdagrad:
      return {1, {false, false}};
    default:
      return {2, {true, true}};
  }
}

const char* optimizerName(OptimizerKind kind) {
  static const char* const names[] = {"sgd",      "adagrad", "adagradMomentum", "adam", "ftrl", "rowWiseAdagrad",
                                      "momentum", "adamax",  "adadelta"};
  int k = static_cast<int>(kind);
  return k >= 0 && k < kOptimizerKinds ? names[k] : "unknown";
}

namespace {

// Math.sign: NaN and signed zeros pass through.
inline double jsSign(double x) {
  return x > 0 ? 1.0 : x < 0 ? -1.0 : x;
}

// Math.max of two numbers: NaN wins, +0 beats -0.
inline double jsMax(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

inline float f32(double v) {
  return static_cast<float>(v);
}

}  // namespace

// The update of one row, inlined into each multiversioned entry point below so
// that every clone (AVX-512 / AVX2 / baseline) vectorises it for its target.
__attribute__((always_inline)) static inline void updateRow(const OptimizerParams& p, float* w, float* slots,
                                                            const float* g, size_t dim, double* grad) {
  const double lr = p.lr;
  for (size_t i = 0; i < dim; ++i) {
    double x = g[i];
    if (x < p.clipGradMin) x = p.clipGradMin;
    if (x > p.clipGradMax) x = p.clipGradMax;
    grad[i] = x + p.weightDecay * static_cast<double>(w[i]);
  }
  auto store = [&](size_t i, double v) {
    if (v < p.clipWeightMin) v = p.clipWeightMin;
    if (v > p.clipWeightMax) v = p.clipWeightMax;
    w[i] = f32(v);
  };
  float* s0 = slots;
  float* s1 = slots + dim;
  switch (p.kind) {
    case OptimizerKind::kSgd:
      for (size_t i = 0; i < dim; ++i) store(i, static_cast<double>(w[i]) - lr * grad[i]);
      return;
    case OptimizerKind::kAdagrad:
      for (size_t i = 0; i < dim; ++i) {
        const double gi = grad[i];
        s0[i] = f32(static_cast<double>(s0[i]) + gi * gi);
        store(i, static_cast<double>(w[i]) - (lr * gi) / std::sqrt(static_cast<double>(s0[i])));
      }
      return;
    case OptimizerKind::kAdagradMomentum: {
      const double negInvExp = -1.0 / p.exponent;
      for (size_t i = 0; i < dim; ++i) {
        const double gi = grad[i];
        const double acc = s0[i];
        s0[i] = p.beta2 == 1 ? f32(acc + gi * gi) : f32(p.beta2 * acc + (1 - p.beta2) * gi * gi);
        const double scaled = gi * std::pow(static_cast<double>(s0[i]) + p.epsilon, negInvExp);
        s1[i] = f32(p.momentum * static_cast<double>(s1[i]) + scaled);
        const double m = s1[i];
        const double upd = p.useNesterov ? p.momentum * m + scaled : m;
        store(i, static_cast<double>(w[i]) - lr * upd);
      }
      return;
    }
    case OptimizerKind::kAdam:
      for (size_t i = 0; i < dim; ++i) {
        const double gi = grad[i];
        s0[i] = f32(p.beta1 * static_cast<double>(s0[i]) + (1 - p.beta1) * gi);
        s1[i] = f32(p.beta2 * static_cast<double>(s1[i]) + (1 - p.beta2) * gi * gi);
        const double v = s1[i];
        const double denom = p.sumInsideSqrt ? std::sqrt(v + p.epsilon * p.epsilon) : std::sqrt(v) + p.epsilon;
        store(i, static_cast<double>(w[i]) - (lr * static_cast<double>(s0[i])) / denom);
      }
      return;
    case OptimizerKind::kFtrl: {
      const double pw = p.learningRatePower;
      for (size_t i = 0; i < dim; ++i) {
        const double gi = grad[i];
        const double accOld = s0[i];
        const double accNew = f32(accOld + gi * gi);
        const double sigma = (std::pow(accNew, -pw) - std::pow(accOld, -pw)) / lr;
        s1[i] = f32(static_cast<double>(s1[i]) + gi - sigma * static_cast<double>(w[i]));
        const double l = s1[i];
        const double quad = std::pow(accNew, -pw) / lr + p.beta / lr + 2 * p.l2;
        store(i, std::fabs(l) <= p.l1 ? 0.0 : -(l - jsSign(l) * p.l1) / quad);
        s0[i] = f32(accNew);
      }
      return;
    }
    case OptimizerKind::kRowWiseAdagrad: {
      double sq = 0;
      for (size_t i = 0; i < dim; ++i) sq += grad[i] * grad[i];
      s0[0] = f32(static_cast<double>(s0[0]) + sq / static_cast<double>(dim));
      const double denom = std::sqrt(static_cast<double>(s0[0])) + p.epsilon;
      for (size_t i = 0; i < dim; ++i) store(i, static_cast<double>(w[i]) - (lr * grad[i]) / denom);
      return;
    }
    case OptimizerKind::kMomentum:
      for (size_t i = 0; i < dim; ++i) {
        const double gi = grad[i];
        s0[i] = f32(p.momentum * static_cast<double>(s0[i]) + gi);
        const double m = s0[i];
        store(i, static_cast<double>(w[i]) - lr * (p.useNesterov ? gi + p.momentum * m : m));
      }
      return;
    case OptimizerKind::kAdamax: {
      const double scale = lr / (1 - std::pow(p.beta1, p.step));
      for (size_t i = 0; i < dim; ++i) {
        const double gi = grad[i];
        s0[i] = f32(p.beta1 * static_cast<double>(s0[i]) + (1 - p.beta1) * gi);
        s1[i] = f32(jsMax(p.beta2 * static_cast<double>(s1[i]), std::fabs(gi)));
        store(i, static_cast<double>(w[i]) -
                     (scale * static_cast<double>(s0[i])) / (static_cast<double>(s1[i]) + p.epsilon));
      }
      return;
    }
    case OptimizerKind::kAdadelta:
      for (size_t i = 0; i < dim; ++i) {
        const double gi = grad[i];
        s0[i] = f32(p.rho * static_cast<double>(s0[i]) + (1 - p.rho) * gi * gi);
        const double d =
            (std::sqrt(static_cast<double>(s1[i]) + p.epsilon) / std::sqrt(static_cast<double>(s0[i]) + p.epsilon)) *
            gi;
        s1[i] = f32(p.rho * static_cast<double>(s1[i]) + (1 - p.rho) * d * d);
        store(i, static_cast<double>(w[i]) - lr * d);
      }
      return;
  }
}

ES_MULTIVERSION
void applyOptimizerRow(const OptimizerParams& p, float* w, float* slots, const float* g, size_t dim, double* scratch) {
  updateRow(p, w, slots, g, dim, scratch);
}

ES_MULTIVERSION
void applyGradientRow(const OptimizerParams& p, float* w, float* slots, const float* grads, const uint32_t* occurrences,
                      size_t count, size_t dim, float* sum, double* scratch) {
  // Duplicate keys' gradients summed in float, in order of appearance, from 0 (so a
  // single -0 gradient becomes +0 exactly as the reference's Float32Array sums).
  const float* g0 = grads + static_cast<size_t>(occurrences[0]) * dim;
  for (size_t c = 0; c < dim; ++c) sum[c] = 0.0f + g0[c];
  for (size_t k = 1; k < count; ++k) {
    const float* g = grads + static_cast<size_t>(occurrences[k]) * dim;
    for (size_t c = 0; c < dim; ++c) sum[c] = sum[c] + g[c];
  }
  updateRow(p, w, slots, sum, dim, scratch);
}

}  // namespace embedstack
