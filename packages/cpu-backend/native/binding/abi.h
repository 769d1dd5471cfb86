// The typed boundary between src/native.ts and the addon: fixed layouts of the
// Float64Array "structs" passed to createTable and applyGradients. Keep in sync
// with src/abi.ts (a test checks the lengths and names match).
#pragma once

namespace embedstack {
namespace abi {

enum TableField : int {
  kKind = 0,        // 0 dynamic, 1 static
  kDim,             // integer >= 1
  kKeyDtype,        // 0 int64, 1 int32
  kVocabularySize,  // static: rows
  kInitCapacity,    // dynamic
  kMaxCapacity,     // dynamic; Infinity = uncapped
  kInitKind,        // InitKind
  kInitA,           // constant value / uniform min / normal mean
  kInitB,           // uniform max / normal std
  kSeed,            // uint32
  kStream,          // uint32
  kScorePolicy,     // ScorePolicy
  kStorageDtype,    // StorageDtype: 0 float32, 1 float16, 2 bfloat16
  kTableFields      // length of the config vector
};

enum OptimizerField : int {
  kOptKind = 0,  // OptimizerKind
  kLr,
  kStep,
  kClipWeightMin,
  kClipWeightMax,
  kWeightDecay,
  kClipGradMin,
  kClipGradMax,
  kBeta1,
  kBeta2,
  kEpsilon,
  kMomentum,
  kUseNesterov,  // 0 / 1
  kExponent,
  kL1,
  kL2,
  kBeta,
  kLearningRatePower,
  kSumInsideSqrt,  // 0 / 1
  kRho,
  kOptimizerFields
};

enum PlanField : int {
  kPlacement = 0,  // 1 mod, 2 range, 3 localized
  kNumShards,      // mod: N >= 1
  kShard,          // mod: [0, N)
  kStart,          // range: first global key (safe integer)
  kEnd,            // range: one past the last
  kPlanFields
};

}  // namespace abi
}  // namespace embedstack
