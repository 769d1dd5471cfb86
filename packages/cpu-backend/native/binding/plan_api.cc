// The addon's shard-plan and combiner-backward functions (core's rawTable.ts):
// findPlanned, findOrInsertPlanned, lookupCombinedPartial, lookupCombinedBackward,
// applyCombinedGradients, lookupCombinedShards, applyCombinedGradientsShards, applyGradientsPlanned, each with an `...Async` form.
// Arguments are validated here (no input crashes the process); the work is
// src/planned_ops.cc. Argument 0 is the table handle.
#include "plan_api.h"

#include "abi.h"
#include "async_op.h"
#include "op_args.h"
#include "planned_ops.h"

namespace embedstack {

namespace {

Napi::Value undefinedToJs(Napi::Env env, Unit&) {
  return env.Undefined();
}

/** A caller's Float32Array of exactly `n` floats (written in part by the job: Use::kInOut). */
float* floatOut(const Napi::CallbackInfo& info, size_t i, const char* name, size_t n) {
  TypedArg<float> o = floatArg(info, i, name, false, Use::kInOut);
  checkLength(o.length, n, name, "floats");
  return const_cast<float*>(o.data);
}

// findPlanned(t, keys, plan, outValues, outExists) / findOrInsertPlanned(t, keys, scores, plan, outValues, outExists)
template <bool Insert>
Op<Unit> preparePlannedFind(const Napi::CallbackInfo& info) {
  TableHolder* h;
  auto t = tableArg(info, 0, &h);
  auto keys = std::make_shared<KeysArg>(keysArg(info, 1, *h, "keys"));
  Op<Unit> op;
  size_t i = 2;
  const uint64_t* scores = nullptr;
  if (Insert) {
    TypedArg<uint64_t> s = scoresArg(info, i++, keys->n);
    scores = s.present ? s.data : nullptr;
  }
  const ShardPlan plan = planArg(info, i++, *t);
  float* values = floatOut(info, i++, "outValues", checkedMul(keys->n, h->dim, "outValues"));
  TypedArg<uint8_t> e = uint8Arg(info, i, "outExists", Use::kInOut);
  checkLength(e.length, keys->n, "outExists", "flags (one per key)");
  uint8_t* exists = const_cast<uint8_t*>(e.data);
  op.job = [t, keys, plan, scores, values, exists] {
    plannedFind(*t, keys->data, keys->n, plan, Insert, scores, values, exists);
    return Unit{};
  };
  op.toJs = undefinedToJs;
  return op;
}

// lookupCombinedPartial(t, rowSplits, keys, weights, combiner, maxNorm, insertMissing, plan, out: Float64Array)
Op<Unit> preparePartial(const Napi::CallbackInfo& info) {
  TableHolder* h;
  auto t = tableArg(info, 0, &h);
  Op<Unit> op;
  BagArg b = bagArg(info, 1, *h);
  const Combiner c = combinerArg(info, 4);
  const double maxNorm = maxNormArg(info, 5);
  const bool insert = boolArg(info, 6, "insertMissing");
  const ShardPlan plan = planArg(info, 7, *t);
  TypedArg<double> o = float64ArrayArg(info, 8, "out");
  checkLength(o.length, checkedMul(b.input.rows, h->dim, "out"), "out", "numbers (rows * dim)");
  double* out = const_cast<double*>(o.data);
  auto keys = b.keys;
  const BagInput bag = b.input;
  op.job = [t, keys, bag, c, maxNorm, insert, plan, out] {
    lookupCombinedPartial(*t, bag, c, maxNorm, insert, plan, out);
    return Unit{};
  };
  op.toJs = undefinedToJs;
  return op;
}

/** Arguments 0-1 of the shard ops: the tables (handles, one dim and key dtype) and their plans laid end to end. */
struct ShardsArgs {
  std::vector<std::shared_ptr<Table>> tables;
  std::vector<ShardPlan> plans;
  TableHolder* first = nullptr;

  /** The tables as the job takes them. */
  std::vector<Table*> raw() const {
    std::vector<Table*> t;
    t.reserve(tables.size());
    for (const auto& x : tables) t.push_back(x.get());
    return t;
  }
};

ShardsArgs shardsArgs(const Napi::CallbackInfo& info) {
  Napi::Value tv = info.Length() > 0 ? info[0] : info.Env().Undefined();
  ES_CHECK(tv.IsArray() && tv.As<Napi::Array>().Length() >= 1, kInvalidType,
           "Expected tables to be a non-empty array of table handles but received " << describe(tv));
  Napi::Array ta = tv.As<Napi::Array>();
  const size_t parts = ta.Length();
  // Every element first: reading one may run JS (a getter), which could detach the plans' buffer.
  std::vector<Napi::Value> handles;
  for (size_t d = 0; d < parts; ++d) handles.push_back(ta.Get(static_cast<uint32_t>(d)));
  TypedArg<double> pa = float64Arg(info, 1, "plans", checkedMul(parts, abi::kPlanFields, "plans"));
  ShardsArgs a;
  for (size_t d = 0; d < parts; ++d) {
    TableHolder* h;
    const std::string name = "tables[" + std::to_string(d) + "]";
    a.tables.push_back(tableOf(handles[d], name.c_str(), &h));
    if (!a.first) a.first = h;
    ES_CHECK(h->dim == a.first->dim && h->int32Keys == a.first->int32Keys, kShapeMismatch,
             "Expected tables[" << d << "] to have the dim and key dtype of tables[0] (dim " << a.first->dim << ", "
                                << (a.first->int32Keys ? "int32" : "int64") << " keys) but it has dim " << h->dim << ", "
                                << (h->int32Keys ? "int32" : "int64") << " keys");
    a.plans.push_back(planOf(pa.data + d * abi::kPlanFields, *a.tables.back()));
  }
  return a;
}

// lookupCombinedShards(tables: handle[], plans: Float64Array [parts * kPlanFields], rowSplits, keys, weights,
//                      combiner, maxNorm, insertMissing, out?: Float32Array [rows * dim])
// Without out (undefined / null) the call returns its result: a Promise call's a fresh
// array the job writes in place (no private copy, no copy back), as lookupCombined's.
Op<BagOutcome> prepareShards(const Napi::CallbackInfo& info) {
  const ShardsArgs s = shardsArgs(info);
  Op<BagOutcome> op;
  BagArg b = bagArg(info, 2, *s.first);
  const Combiner c = combinerArg(info, 5);
  const double maxNorm = maxNormArg(info, 6);
  const bool insert = boolArg(info, 7, "insertMissing");
  const BagOut out = bagOutArg(info, 8, b.input.rows, s.first->dim, "lookupCombinedShards output");
  float* outData = out.data;
  auto keys = b.keys;
  const BagInput bag = b.input;
  if (lookupCombinedShardsSplits(s.raw().data(), s.tables.size(), bag)) op.helpers = ThreadPool::shared().threads() - 1;
  const size_t count = bag.rows * s.first->dim;  // checked by bagOutArg
  op.job = [s, keys, bag, c, maxNorm, insert, outData, count] {
    std::vector<Table*> t = s.raw();
    BagOutcome r;
    float* into = outData;
    if (into == nullptr) {
      r.owned = HostArray<float>(count);
      into = r.owned.data();
    }
    lookupCombinedShards(t.data(), s.plans.data(), t.size(), bag, c, maxNorm, insert, into);
    r.filled = outData != nullptr;
    return r;
  };
  op.toJs = bagOutcomeToJs(out);
  return op;
}

// applyCombinedGradientsShards(tables: handle[], plans: Float64Array [parts * kPlanFields], rowSplits, keys,
//                              weights, grads [rows * dim], combiner, maxNorm, optimizer)
Op<Unit> prepareApplyShards(const Napi::CallbackInfo& info) {
  const ShardsArgs s = shardsArgs(info);
  Op<Unit> op;
  BagArg b = bagArg(info, 2, *s.first);
  TypedArg<float> g = floatArg(info, 5, "grads", false);
  checkLength(g.length, checkedMul(b.input.rows, s.first->dim, "grads"), "grads", "floats (rows * dim)");
  const float* grads = g.data;
  const Combiner c = combinerArg(info, 6);
  const double maxNorm = maxNormArg(info, 7);
  const OptimizerParams opt = optimizerArg(info, 8);
  auto keys = b.keys;
  const BagInput bag = b.input;
  if (applyCombinedGradientsShardsSplits(s.raw().data(), s.tables.size(), bag)) op.helpers = ThreadPool::shared().threads() - 1;
  op.job = [s, keys, bag, grads, c, maxNorm, opt] {
    std::vector<Table*> t = s.raw();
    applyCombinedGradientsShards(t.data(), s.plans.data(), t.size(), bag, grads, c, maxNorm, opt);
    return Unit{};
  };
  op.toJs = undefinedToJs;
  return op;
}

/** Arguments 1-7 of the backward ops: rowSplits, keys, weights, grads [rows * dim], combiner, maxNorm, plan | null. */
struct GradientArgs {
  std::shared_ptr<KeysArg> keys;
  BagInput bag;
  const float* grads;
  Combiner combiner;
  double maxNorm;
  ShardPlan plan;
};

GradientArgs gradientArgs(const Napi::CallbackInfo& info, const TableHolder& h, const Table& t) {
  BagArg b = bagArg(info, 1, h);
  TypedArg<float> g = floatArg(info, 4, "grads", false);
  checkLength(g.length, checkedMul(b.input.rows, h.dim, "grads"), "grads", "floats (rows * dim)");
  GradientArgs a{b.keys, b.input, g.data, combinerArg(info, 5), maxNormArg(info, 6), planArg(info, 7, t)};
  return a;
}

// lookupCombinedBackward(t, rowSplits, keys, weights, grads, combiner, maxNorm, plan | null, out: Float32Array [n * dim])
Op<Unit> prepareBackward(const Napi::CallbackInfo& info) {
  TableHolder* h;
  auto t = tableArg(info, 0, &h);
  Op<Unit> op;
  const GradientArgs a = gradientArgs(info, *h, *t);
  float* out = floatOut(info, 8, "out", checkedMul(a.bag.n, h->dim, "out"));
  op.job = [t, a, out] {
    lookupCombinedBackward(*t, a.bag, a.grads, a.combiner, a.maxNorm, a.plan, out);
    return Unit{};
  };
  op.toJs = undefinedToJs;
  return op;
}

// applyCombinedGradients(t, rowSplits, keys, weights, grads, combiner, maxNorm, plan | null, optimizer)
Op<Unit> prepareApplyCombined(const Napi::CallbackInfo& info) {
  TableHolder* h;
  auto t = tableArg(info, 0, &h);
  Op<Unit> op;
  const GradientArgs a = gradientArgs(info, *h, *t);
  const OptimizerParams opt = optimizerArg(info, 8);
  op.job = [t, a, opt] {
    applyCombinedGradients(*t, a.bag, a.grads, a.combiner, a.maxNorm, a.plan, opt);
    return Unit{};
  };
  op.toJs = undefinedToJs;
  return op;
}

// applyGradientsPlanned(t, keys, grads, optimizer, plan)
Op<Unit> preparePlannedGradients(const Napi::CallbackInfo& info) {
  TableHolder* h;
  auto t = tableArg(info, 0, &h);
  auto keys = std::make_shared<KeysArg>(keysArg(info, 1, *h, "keys"));
  Op<Unit> op;
  TypedArg<float> g = floatArg(info, 2, "grads", false);
  checkLength(g.length, checkedMul(keys->n, h->dim, "grads"), "grads", "floats (keys * dim)");
  const OptimizerParams opt = optimizerArg(info, 3);
  const ShardPlan plan = planArg(info, 4, *t);
  const float* grads = g.data;
  op.job = [t, keys, grads, plan, opt] {
    plannedApplyGradients(*t, keys->data, keys->n, grads, plan, opt);
    return Unit{};
  };
  op.toJs = undefinedToJs;
  return op;
}

}  // namespace

void registerPlanFunctions(Napi::Env env, Napi::Object exports) {
  auto def = [&](const char* name, Napi::Function::Callback fn) {
    exports.Set(name, Napi::Function::New(env, fn, name));
  };
  def("findPlanned", syncFn<Unit, preparePlannedFind<false>>);
  def("findPlannedAsync", asyncFn<Unit, preparePlannedFind<false>>);
  def("findOrInsertPlanned", syncFn<Unit, preparePlannedFind<true>>);
  def("findOrInsertPlannedAsync", asyncFn<Unit, preparePlannedFind<true>>);
  def("lookupCombinedPartial", syncFn<Unit, preparePartial>);
  def("lookupCombinedPartialAsync", asyncFn<Unit, preparePartial>);
  def("lookupCombinedShards", syncFn<BagOutcome, prepareShards>);
  def("lookupCombinedShardsAsync", asyncFn<BagOutcome, prepareShards>);
  def("lookupCombinedBackward", syncFn<Unit, prepareBackward>);
  def("lookupCombinedBackwardAsync", asyncFn<Unit, prepareBackward>);
  def("applyCombinedGradients", syncFn<Unit, prepareApplyCombined>);
  def("applyCombinedGradientsAsync", asyncFn<Unit, prepareApplyCombined>);
  def("applyCombinedGradientsShards", syncFn<Unit, prepareApplyShards>);
  def("applyCombinedGradientsShardsAsync", asyncFn<Unit, prepareApplyShards>);
  def("applyGradientsPlanned", syncFn<Unit, preparePlannedGradients>);
  def("applyGradientsPlannedAsync", asyncFn<Unit, preparePlannedGradients>);
}

}  // namespace embedstack
