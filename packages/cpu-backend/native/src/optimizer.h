// Fused sparse optimizer updates of one row and its slots, bit-compatible with
// core's reference kernels (core/src/reference/kernels.ts applyOptimizerRow):
// every formula in double reading the stored float32 values, each stored value
// rounded to float32 once, slots updated earlier in the row read back rounded.
// Built with -ffp-contract=off so no multiply-add is fused.
#pragma once

#include <cstddef>
#include <cstdint>

namespace embedstack {

enum class OptimizerKind : int {
  kSgd = 0,
  kAdagrad,
  kAdagradMomentum,
  kAdam,
  kFtrl,
  kRowWiseAdagrad,
  kMomentum,
  kAdamax,
  kAdadelta,
};
constexpr int kOptimizerKinds = 9;

/** core's ResolvedOptimizer: all numbers, the step's learning rate already evaluated. */
struct OptimizerParams {
  OptimizerKind kind = OptimizerKind::kSgd;
  double lr = 0;
  double step = 1;
  double clipWeightMin = -__builtin_inf();
  double clipWeightMax = __builtin_inf();
  double weightDecay = 0;
  double clipGradMin = -__builtin_inf();
  double clipGradMax = __builtin_inf();
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-7;
  double momentum = 0;
  bool useNesterov = false;
  double exponent = 2;
  double l1 = 0;
  double l2 = 0;
  double beta = 0;
  double learningRatePower = -0.5;
  bool sumInsideSqrt = true;
  double rho = 0.95;
};

/** Slot layout an optimizer kind needs: count, and per slot a full row (true) or one float. */
struct SlotRequirement {
  int count;
  bool fullRow[2];
};
SlotRequirement slotRequirement(OptimizerKind kind);
const char* optimizerName(OptimizerKind kind);

/**
 * Updates row `w` [dim] and its slots (contiguous: slot 0 then slot 1, each [dim] or
 * [1]) with the summed gradient `g` [dim]. `scratch` holds dim doubles.
 */
void applyOptimizerRow(const OptimizerParams& p, float* w, float* slots, const float* g, size_t dim, double* scratch);

/**
 * A key's summed gradient: sum [dim] = rows occurrences[0..count) of grads (row
 * rowIndex[o] for occurrence o when rowIndex is not null), added in float, in order,
 * from 0 (count >= 1). Multiversioned (AVX-512 / AVX2 / baseline).
 */
void sumGradientRows(const float* grads, const uint32_t* occurrences, size_t count, size_t dim, const uint32_t* rowIndex,
                     float* sum);

/** sumRowsInOrder's `running` of a key of one occurrence (it gets no running row). */
constexpr uint32_t kNoRunningRow = UINT32_MAX;

/**
 * The summed gradient of every key of two or more occurrences in a batch, in one pass over its
 * entries in input order (the gradient array read front to back): for entry i of unique
 * u = unique[i] with running[u] = k (not kNoRunningRow), sums[k * dim .. (k + 1) * dim), each
 * key's gradient rows added in float from 0 in order of occurrence (sumGradientRows' bits;
 * first[u] is u's first occurrence). Entry i's gradient is row i of grads, or row rowIndex[i]
 * when rowIndex is not null. Multiversioned.
 */
void sumRowsInOrder(size_t n, const uint32_t* unique, const uint32_t* running, const uint32_t* first, const float* grads,
                    const uint32_t* rowIndex, size_t dim, float* sums);

/** sumGradientRows then applyOptimizerRow(sum), in one call (the tables' update of a key from a gradient array). */
void applyGradientRow(const OptimizerParams& p, float* w, float* slots, const float* grads, const uint32_t* occurrences,
                      size_t count, size_t dim, const uint32_t* rowIndex, float* sum, double* scratch);

}  // namespace embedstack
