// Fused optimizer rows against hand-computed values and a straightforward scalar
// rewrite of the formulas in core.md / optimizers.ts (double, float32 stores).
#include <cmath>

#include "optimizer.h"
#include "test.h"

using namespace embedstack;

namespace {
struct Row {
  std::vector<float> w, slots;
};
Row run(const OptimizerParams& p, std::vector<float> w, std::vector<float> slots, std::vector<float> g) {
  std::vector<double> scratch(w.size());
  applyOptimizerRow(p, w.data(), slots.data(), g.data(), w.size(), scratch.data());
  return {w, slots};
}
float f(double x) {
  return static_cast<float>(x);
}
}  // namespace

TEST(sgd_with_clips_and_weight_decay_by_hand) {
  OptimizerParams p;
  p.kind = OptimizerKind::kSgd;
  p.lr = 0.5;
  p.clipGradMin = -1;
  p.clipGradMax = 1;
  p.weightDecay = 0.25;
  p.clipWeightMax = 1.5;
  // g1 = clip(4) + 0.25 * 2 = 1.5 -> w = 2 - 0.75 = 1.25; g2 = clip(-8) + 0.25 * 4 = 0 -> 4 -> clipped 1.5
  Row r = run(p, {2, 4}, {}, {4, -8});
  EXPECT_EQ(r.w[0], 1.25f);
  EXPECT_EQ(r.w[1], 1.5f);
}

TEST(momentum_and_nesterov_by_hand) {
  OptimizerParams p;
  p.kind = OptimizerKind::kMomentum;
  p.lr = 0.5;
  p.momentum = 0.5;
  Row r = run(p, {1}, {2}, {1});  // m = 0.5*2 + 1 = 2; w = 1 - 0.5*2 = 0
  EXPECT_EQ(r.slots[0], 2.0f);
  EXPECT_EQ(r.w[0], 0.0f);
  p.useNesterov = true;
  r = run(p, {1}, {2}, {1});  // w = 1 - 0.5*(1 + 0.5*2) = 0
  EXPECT_EQ(r.w[0], 0.0f);
}

TEST(adagrad_adam_ftrl_match_scalar_formulas) {
  const std::vector<float> w0 = {0.5f, -0.25f, 1e-3f};
  const std::vector<float> g = {0.3f, -2.0f, 1e-4f};
  {
    OptimizerParams p;
    p.kind = OptimizerKind::kAdagrad;
    p.lr = 0.05;
    Row r = run(p, w0, {0.1f, 0.1f, 0.1f}, g);
    for (size_t i = 0; i < 3; ++i) {
      float acc = f(static_cast<double>(0.1f) + static_cast<double>(g[i]) * g[i]);
      EXPECT_FLOAT_BITS(r.slots[i], acc);
      EXPECT_FLOAT_BITS(r.w[i], f(w0[i] - 0.05 * g[i] / std::sqrt(static_cast<double>(acc))));
    }
  }
  for (bool inside : {true, false}) {
    OptimizerParams p;
    p.kind = OptimizerKind::kAdam;
    p.lr = 0.01;
    p.beta1 = 0.8;
    p.beta2 = 0.9;
    p.epsilon = 1e-3;
    p.sumInsideSqrt = inside;
    std::vector<float> s = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
    Row r = run(p, w0, s, g);
    for (size_t i = 0; i < 3; ++i) {
      float m = f(0.8 * s[i] + 0.2 * g[i]);
      float v = f(0.9 * s[3 + i] + 0.1 * g[i] * g[i]);
      double denom = inside ? std::sqrt(v + 1e-6) : std::sqrt(static_cast<double>(v)) + 1e-3;
      EXPECT_FLOAT_BITS(r.slots[i], m);
      EXPECT_FLOAT_BITS(r.slots[3 + i], v);
      EXPECT_FLOAT_BITS(r.w[i], f(w0[i] - 0.01 * m / denom));
    }
  }
  {
    OptimizerParams p;
    p.kind = OptimizerKind::kFtrl;
    p.lr = 0.1;
    p.l1 = 0.01;
    p.l2 = 0.02;
    p.beta = 0.5;
    p.learningRatePower = -0.5;
    std::vector<float> s = {0.1f, 0.1f, 0.1f, 0.0f, 3.0f, -0.001f};
    Row r = run(p, w0, s, g);
    for (size_t i = 0; i < 3; ++i) {
      double acc = s[i];
      double accNew = f(acc + static_cast<double>(g[i]) * g[i]);
      double sigma = (std::sqrt(accNew) - std::sqrt(acc)) / 0.1;
      float lin = f(s[3 + i] + static_cast<double>(g[i]) - sigma * w0[i]);
      double quad = std::sqrt(accNew) / 0.1 + 0.5 / 0.1 + 2 * 0.02;
      double l = lin;
      double w = std::fabs(l) <= 0.01 ? 0.0 : -(l - (l > 0 ? 1 : -1) * 0.01) / quad;
      EXPECT_FLOAT_BITS(r.slots[3 + i], lin);
      EXPECT_FLOAT_BITS(r.slots[i], f(accNew));
      // pow(x, 0.5) and sqrt(x) agree to the last bit for these inputs after the float store
      EXPECT_FLOAT_BITS(r.w[i], f(w));
    }
  }
}

TEST(row_wise_adagrad_adamax_adadelta_adagrad_momentum) {
  const std::vector<float> w0 = {1.0f, 2.0f};
  const std::vector<float> g = {0.5f, -1.5f};
  {
    OptimizerParams p;
    p.kind = OptimizerKind::kRowWiseAdagrad;
    p.lr = 0.1;
    p.epsilon = 1e-8;
    Row r = run(p, w0, {0.0f}, g);
    float acc = f((0.25 + 2.25) / 2);
    EXPECT_FLOAT_BITS(r.slots[0], acc);
    EXPECT_FLOAT_BITS(r.w[1], f(2.0 - 0.1 * -1.5 / (std::sqrt(static_cast<double>(acc)) + 1e-8)));
  }
  {
    OptimizerParams p;
    p.kind = OptimizerKind::kAdamax;
    p.lr = 0.002;
    p.beta1 = 0.9;
    p.beta2 = 0.999;
    p.epsilon = 1e-7;
    p.step = 3;
    Row r = run(p, w0, {0.1f, 0.1f, 2.0f, 0.5f}, g);
    double scale = 0.002 / (1 - std::pow(0.9, 3));
    float m1 = f(0.9 * 0.1f + 0.1 * -1.5);
    float u0 = f(std::max(0.999 * 2.0, 0.5));
    float u1 = f(std::max(0.999 * static_cast<double>(0.5f), 1.5));
    EXPECT_FLOAT_BITS(r.slots[2], u0);
    EXPECT_FLOAT_BITS(r.slots[3], u1);
    EXPECT_FLOAT_BITS(r.w[1], f(2.0 - scale * m1 / (u1 + 1e-7)));
  }
  {
    OptimizerParams p;
    p.kind = OptimizerKind::kAdadelta;
    p.lr = 1.0;
    p.rho = 0.9;
    p.epsilon = 1e-6;
    Row r = run(p, w0, {0.0f, 0.0f, 0.0f, 0.0f}, g);
    float a0 = f(0.1 * 0.5 * 0.5);
    double d0 = std::sqrt(0.0 + 1e-6) / std::sqrt(static_cast<double>(a0) + 1e-6) * 0.5;
    EXPECT_FLOAT_BITS(r.slots[0], a0);
    EXPECT_FLOAT_BITS(r.slots[2], f(0.1 * d0 * d0));
    EXPECT_FLOAT_BITS(r.w[0], f(1.0 - d0));
  }
  {
    OptimizerParams p;
    p.kind = OptimizerKind::kAdagradMomentum;
    p.lr = 0.1;
    p.momentum = 0.9;
    p.beta2 = 1;
    p.epsilon = 1e-10;
    p.exponent = 2;
    Row r = run(p, w0, {0.0f, 0.0f, 0.5f, 0.5f}, g);
    float acc = f(0.25);
    double scaled = 0.5 * std::pow(0.25 + 1e-10, -0.5);
    float m = f(0.9 * 0.5 + scaled);
    EXPECT_FLOAT_BITS(r.slots[0], acc);
    EXPECT_FLOAT_BITS(r.slots[2], m);
    EXPECT_FLOAT_BITS(r.w[0], f(1.0 - 0.1 * m));
  }
}

TEST(nan_and_inf_gradients_propagate_without_trapping) {
  OptimizerParams p;
  p.kind = OptimizerKind::kAdagrad;
  p.lr = 0.1;
  Row r = run(p, {1, 1}, {0.1f, 0.1f}, {NAN, INFINITY});
  EXPECT_TRUE(std::isnan(r.w[0]));
  EXPECT_TRUE(std::isnan(r.w[1]));  // inf / sqrt(inf)
  EXPECT_TRUE(std::isinf(r.slots[1]));
}
