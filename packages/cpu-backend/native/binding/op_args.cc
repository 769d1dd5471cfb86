#include "op_args.h"

#include <cmath>

#include "abi.h"
#include "convert.h"

namespace embedstack {

namespace {
constexpr double kMaxSafe = 9007199254740991.0;  // 2^53 - 1
}

namespace {
/** A bag's keys and a copy of its row splits, owned together by the call (and its job). */
struct BagKeys : KeysArg {
  BagKeys(KeysArg&& k) : KeysArg(std::move(k)) {}
  std::vector<int32_t> rowSplits;
};
}  // namespace

BagArg bagArg(const Napi::CallbackInfo& info, size_t i, const TableHolder& h,
              bool keepInt32) {
  TypedArg<int32_t> given = int32Arg(info, i, "rowSplits", Use::kNow);
  auto owned = std::make_shared<BagKeys>(keysArg(info, i + 1, h, "keys", keepInt32));
  TypedArg<float> weights = floatArg(info, i + 2, "weights", true);
  const size_t n = owned->n;
  ES_CHECK(given.length >= 1, kShapeMismatch, "Expected rowSplits to hold nrows + 1 >= 1 offsets but received 0");
  // The kernels index keys by the splits, so a Promise job must not read the caller's array,
  // which JS may rewrite (or shrink) while the job runs: the copy is checked and used.
  std::vector<int32_t>& splits = owned->rowSplits;
  splits.assign(given.data, given.data + given.length);
  ES_CHECK(splits[0] == 0, kInvalidArgument, "Expected rowSplits[0] to be 0 but received " << splits[0]);
  for (size_t r = 1; r < splits.size(); ++r) {
    ES_CHECK(splits[r] >= splits[r - 1], kInvalidArgument,
             "Expected rowSplits to be non-decreasing but rowSplits["
                 << r << "] = " << splits[r] << " < rowSplits[" << r - 1 << "] = " << splits[r - 1]);
  }
  ES_CHECK(static_cast<size_t>(splits.back()) == n, kShapeMismatch,
           "Expected rowSplits to end at the number of keys (" << n << ") but it ends at " << splits.back());
  if (weights.present) checkLength(weights.length, n, "weights", "weights (one per key)");
  BagArg b;
  b.input.rowSplits = splits.data();
  b.input.rows = splits.size() - 1;
  b.input.keys = owned->data;
  b.input.keys32 = owned->narrow;
  b.input.n = n;
  b.input.weights = weights.present ? weights.data : nullptr;
  b.keys = std::move(owned);
  return b;
}

Combiner combinerArg(const Napi::CallbackInfo& info, size_t i) {
  return static_cast<Combiner>(static_cast<int>(integerArg(info, i, "combiner", 0, 2)));
}

Combiner lookupCombinerArg(const Napi::CallbackInfo& info, size_t i) {
  return static_cast<Combiner>(static_cast<int>(integerArg(info, i, "combiner", 0, 4)));
}

double maxNormArg(const Napi::CallbackInfo& info, size_t i) {
  const double maxNorm = numberArg(info, i, "maxNorm");
  ES_CHECK(std::isfinite(maxNorm) && maxNorm >= 0, kInvalidArgument,
           "Expected maxNorm to be a finite number >= 0 (0 = no clipping) but received " << formatNumber(maxNorm));
  return maxNorm;
}

OptimizerParams optimizerArg(const Napi::CallbackInfo& info, size_t i) {
  TypedArg<double> a = float64Arg(info, i, "optimizer", abi::kOptimizerFields);
  const double* v = a.data;
  const double kind = v[abi::kOptKind];
  ES_CHECK(kind == std::floor(kind) && kind >= 0 && kind < kOptimizerKinds, kInvalidArgument,
           "Expected optimizer[kind] to be an integer in [0, " << kOptimizerKinds - 1 << "] but received " << formatNumber(kind));
  OptimizerParams p;
  p.kind = static_cast<OptimizerKind>(static_cast<int>(kind));
  p.lr = v[abi::kLr];
  p.step = v[abi::kStep];
  p.clipWeightMin = v[abi::kClipWeightMin];
  p.clipWeightMax = v[abi::kClipWeightMax];
  p.weightDecay = v[abi::kWeightDecay];
  p.clipGradMin = v[abi::kClipGradMin];
  p.clipGradMax = v[abi::kClipGradMax];
  p.beta1 = v[abi::kBeta1];
  p.beta2 = v[abi::kBeta2];
  p.epsilon = v[abi::kEpsilon];
  p.momentum = v[abi::kMomentum];
  p.useNesterov = v[abi::kUseNesterov] != 0;
  p.exponent = v[abi::kExponent];
  p.l1 = v[abi::kL1];
  p.l2 = v[abi::kL2];
  p.beta = v[abi::kBeta];
  p.learningRatePower = v[abi::kLearningRatePower];
  p.sumInsideSqrt = v[abi::kSumInsideSqrt] != 0;
  p.rho = v[abi::kRho];
  return p;
}

ShardPlan planArg(const Napi::CallbackInfo& info, size_t i, const Table& t) {
  if (info.Length() <= i || info[i].IsUndefined() || info[i].IsNull()) return ShardPlan{};
  return planOf(float64Arg(info, i, "plan", abi::kPlanFields).data, t);
}

ShardPlan planOf(const double* v, const Table& t) {
  ShardPlan p;
  auto integer = [&](int field, const char* name, double min, double max) {
    const double x = v[field];
    ES_CHECK(std::isfinite(x) && x == std::floor(x) && x >= min && x <= max, kInvalidArgument,
             "Expected plan." << name << " to be an integer in [" << formatNumber(min) << ", " << formatNumber(max)
                                  << "] but received " << formatNumber(x));
    return x;
  };
  const int placement = static_cast<int>(integer(abi::kPlacement, "placement", 1, 3));
  if (placement == 1) {
    p.kind = ShardPlan::kMod;
    p.numShards = static_cast<int64_t>(integer(abi::kNumShards, "numShards", 1, 1 << 20));
    p.shard = static_cast<int64_t>(integer(abi::kShard, "shard", 0, static_cast<double>(p.numShards - 1)));
    p.roundRobin = t.config().isStatic;
  } else if (placement == 2) {
    p.kind = ShardPlan::kRange;
    p.start = static_cast<int64_t>(integer(abi::kStart, "start", -kMaxSafe, kMaxSafe));
    p.end = static_cast<int64_t>(integer(abi::kEnd, "end", static_cast<double>(p.start), kMaxSafe));
  }
  return p;
}

void* freshResult(const Napi::CallbackInfo& info, napi_typedarray_type type, size_t length, size_t elementSize,
                  napi_ref* array) {
  CallCopies* copies = CallCopies::active();
  if (copies == nullptr || !copies->promise() || length == 0 || checkedMul(length, elementSize, "a result array") >= CallCopies::kFreshMaxBytes) {
    return nullptr;
  }
  return copies->fresh(info.Env(), type, length, elementSize, array);
}

Napi::Value freshValue(Napi::Env env, napi_ref array) {
  napi_value v;
  ES_CHECK(napi_get_reference_value(env, array, &v) == napi_ok && v != nullptr, kInternal,
           "Expected a fresh result array to still be referenced when its call settled");
  return Napi::Value(env, v);
}

BagOut bagOutArg(const Napi::CallbackInfo& info, size_t i, size_t rows, size_t dim, const char* what) {
  BagOut out;
  if (info.Length() > i && !info[i].IsUndefined() && !info[i].IsNull()) {
    TypedArg<float> o = floatArg(info, i, "out", false, Use::kOutput);
    checkLength(o.length, checkedMul(rows, dim, "out"), "out", "floats (rows * dim)");
    out.data = const_cast<float*>(o.data);
    adviseHugePages(out.data, o.length * sizeof(float));
    return out;
  }
  const size_t count = checkedMul(rows, dim, what);
  out.data = static_cast<float*>(freshResult(info, napi_float32_array, count, sizeof(float), &out.fresh));
  if (out.data != nullptr) adviseHugePages(out.data, count * sizeof(float));
  return out;
}

std::function<Napi::Value(Napi::Env, BagOutcome&)> bagOutcomeToJs(const BagOut& out) {
  const napi_ref fresh = out.fresh;
  return [fresh](Napi::Env env, BagOutcome& r) -> Napi::Value {
    if (fresh != nullptr) return freshValue(env, fresh);
    return r.filled ? env.Undefined() : Napi::Value(toFloat32Array(env, r.owned));
  };
}

}  // namespace embedstack
