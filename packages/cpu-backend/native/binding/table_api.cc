// The addon's table functions. Each parses and validates its arguments into an
// Op (see async_op.h) that runs synchronously (`find`) or on the addon's thread
// pool (`findAsync`). Argument 0 is always the table handle from createTable.
#include "table_api.h"

#include <cmath>

#include "abi.h"
#include "args.h"
#include "async_op.h"
#include "op_args.h"

namespace embedstack {

namespace {

constexpr double kMaxSafe = 9007199254740991.0;  // 2^53 - 1

// ---- parsing helpers ---------------------------------------------------------

const float* valuesFor(const Napi::CallbackInfo& info, size_t i, const char* name, size_t n, size_t dim) {
  TypedArg<float> v = floatArg(info, i, name, false);
  checkLength(v.length, checkedMul(n, dim, name), name, "floats (keys * dim)");
  return v.data;
}

const uint64_t* optionalScores(const Napi::CallbackInfo& info, size_t i, size_t n) {
  TypedArg<uint64_t> s = scoresArg(info, i, n);
  return s.present ? s.data : nullptr;
}

/**
 * Caller-provided result arrays (both, or neither: then the addon allocates them, or a
 * Promise call makes them in JS memory first: freshResult).
 */
struct FindOutputs {
  float* values = nullptr;
  uint8_t* exists = nullptr;
  napi_ref freshValues = nullptr;  // fresh result arrays (both or neither), returned by the call
  napi_ref freshExists = nullptr;
};

FindOutputs findOutputs(const Napi::CallbackInfo& info, size_t i, size_t n, size_t dim) {
  FindOutputs o;
  const bool given = info.Length() > i && !info[i].IsUndefined() && !info[i].IsNull();
  const bool givenExists = info.Length() > i + 1 && !info[i + 1].IsUndefined() && !info[i + 1].IsNull();
  if (!given && !givenExists) {
    const size_t count = checkedMul(n, dim, "find values");
    napi_ref values = nullptr;
    napi_ref exists = nullptr;
    void* v = freshResult(info, napi_float32_array, count, sizeof(float), &values);
    void* e = v != nullptr ? freshResult(info, napi_uint8_array, n, 1, &exists) : nullptr;
    if (e != nullptr) {
      o.values = static_cast<float*>(v);
      o.exists = static_cast<uint8_t*>(e);
      o.freshValues = values;
      o.freshExists = exists;
      adviseHugePages(o.values, count * sizeof(float));
    }
    return o;
  }
  TypedArg<float> v = floatArg(info, i, "outValues", false, Use::kOutput);
  TypedArg<uint8_t> e = uint8Arg(info, i + 1, "outExists", Use::kOutput);
  checkLength(v.length, checkedMul(n, dim, "outValues"), "outValues", "floats (keys * dim)");
  checkLength(e.length, n, "outExists", "flags (one per key)");
  o.values = const_cast<float*>(v.data);
  o.exists = const_cast<uint8_t*>(e.data);
  adviseHugePages(o.values, v.length * sizeof(float));
  return o;
}

/** A find's result: in caller arrays (returns undefined) or fresh ones (returns [values, exists]). */
struct FindOutcome {
  FindResult owned;
  bool filled = false;
};

/** The call's value: undefined (caller arrays), [values, exists] (fresh or the addon's arrays). */
std::function<Napi::Value(Napi::Env, FindOutcome&)> findOutcomeToJs(const FindOutputs& out) {
  const napi_ref values = out.freshValues;
  const napi_ref exists = out.freshExists;
  return [values, exists](Napi::Env env, FindOutcome& r) -> Napi::Value {
    if (values != nullptr) {
      Napi::Array a = Napi::Array::New(env, 2);
      a.Set(0u, freshValue(env, values));
      a.Set(1u, freshValue(env, exists));
      return a;
    }
    return r.filled ? env.Undefined() : findToJs(env, r.owned);
  };
}

// ---- ops ------------------------------------------------------------------------

// find(t, keys, outValues?, outExists?)
Op<FindOutcome> prepareFind(const Napi::CallbackInfo& info) {
  TableHolder* h;
  auto t = tableArg(info, 0, &h);
  auto keys = std::make_shared<KeysArg>(keysArg(info, 1, *h, "keys"));
  Op<FindOutcome> op;
  const FindOutputs out = findOutputs(info, 2, keys->n, h->dim);
  // A find that splits over the pool as soon as it starts: an async call wakes its helpers
  // with its driver, so the two wake-ups overlap instead of following each other.
  // Its parallelFor is its last step: the JS thread is woken while the last chunks run.
  if (t->findSplits(keys->n)) {
    op.helpers = ThreadPool::shared().threads() - 1;
    op.nearEnd = true;
  }
  op.job = [t, keys, out] {
    FindOutcome r;
    if (out.values) {
      t->findInto(keys->data, keys->n, out.values, out.exists);
      r.filled = true;
    } else {
      r.owned = t->find(keys->data, keys->n);
    }
    return r;
  };
  op.toJs = findOutcomeToJs(out);
  return op;
}

// findOrInsert(t, keys, scores, outValues?, outExists?)
Op<FindOutcome> prepareFindOrInsert(const Napi::CallbackInfo& info) {
  TableHolder* h;
  auto t = tableArg(info, 0, &h);
  auto keys = std::make_shared<KeysArg>(keysArg(info, 1, *h, "keys"));
  Op<FindOutcome> op;
  const uint64_t* scores = optionalScores(info, 2, keys->n);
  const FindOutputs out = findOutputs(info, 3, keys->n, h->dim);
  op.job = [t, keys, scores, out] {
    FindOutcome r;
    if (out.values) {
      t->findOrInsertInto(keys->data, keys->n, scores, out.values, out.exists);
      r.filled = true;
    } else {
      r.owned = t->findOrInsert(keys->data, keys->n, scores);
    }
    return r;
  };
  op.toJs = findOutcomeToJs(out);
  return op;
}

Napi::Value undefinedToJs(Napi::Env env, Unit&) {
  return env.Undefined();
}
Napi::Value countToJs(Napi::Env env, size_t& n) {
  return Napi::Number::New(env, static_cast<double>(n));
}

template <void (Table::*Method)(const int64_t*, size_t, const float*, const uint64_t*)>
Op<Unit> prepareWrite(const Napi::CallbackInfo& info) {
  TableHolder* h;
  auto t = tableArg(info, 0, &h);
  auto keys = std::make_shared<KeysArg>(keysArg(info, 1, *h, "keys"));
  Op<Unit> op;
  const float* values = valuesFor(info, 2, "values", keys->n, h->dim);
  const uint64_t* scores = optionalScores(info, 3, keys->n);
  op.job = [t, keys, values, scores] {
    ((*t).*Method)(keys->data, keys->n, values, scores);
    return Unit{};
  };
  op.toJs = undefinedToJs;
  return op;
}

Op<Unit> prepareAccum(const Napi::CallbackInfo& info) {
  TableHolder* h;
  auto t = tableArg(info, 0, &h);
  auto keys = std::make_shared<KeysArg>(keysArg(info, 1, *h, "keys"));
  Op<Unit> op;
  const float* deltas = valuesFor(info, 2, "deltas", keys->n, h->dim);
  TypedArg<uint8_t> exists = uint8Arg(info, 3, "exists");
  checkLength(exists.length, keys->n, "exists", "flags (one per key)");
  const uint64_t* scores = optionalScores(info, 4, keys->n);
  const uint8_t* ex = exists.data;
  op.job = [t, keys, deltas, ex, scores] {
    t->accum(keys->data, keys->n, deltas, ex, scores);
    return Unit{};
  };
  op.toJs = undefinedToJs;
  return op;
}

Op<size_t> prepareRemove(const Napi::CallbackInfo& info) {
  TableHolder* h;
  auto t = tableArg(info, 0, &h);
  auto keys = std::make_shared<KeysArg>(keysArg(info, 1, *h, "keys"));
  Op<size_t> op;
  op.job = [t, keys] { return t->remove(keys->data, keys->n); };
  op.toJs = countToJs;
  return op;
}

Op<Unit> prepareClear(const Napi::CallbackInfo& info) {
  auto t = tableArg(info, 0);
  Op<Unit> op;
  op.job = [t] {
    t->clear();
    return Unit{};
  };
  op.toJs = undefinedToJs;
  return op;
}

Op<ExportResult> prepareExport(const Napi::CallbackInfo& info) {
  TableHolder* h;
  auto t = tableArg(info, 0, &h);
  const double offset = integerArg(info, 1, "offset", 0, kMaxSafe);
  const double limit = integerArg(info, 2, "limit", 0, kMaxSafe, true);
  const size_t o = static_cast<size_t>(offset);
  const size_t l = limit == INFINITY ? SIZE_MAX : static_cast<size_t>(limit);
  const bool int32Keys = h->int32Keys;
  Op<ExportResult> op;
  op.job = [t, o, l] { return t->exportBatch(o, l); };
  op.toJs = [int32Keys](Napi::Env env, ExportResult& r) { return exportToJs(env, r, int32Keys); };
  return op;
}

/**
 * importRows' slots (argument 3): null, or an array of one Float32Array per slot. Its
 * elements are read here, before any typed array's pointer is taken: reading one may run
 * JS (a getter), which could shrink or detach a buffer already read.
 */
std::vector<Napi::Value> slotValues(const Napi::CallbackInfo& info, size_t i, const Table& t) {
  std::vector<Napi::Value> slots;
  Napi::Value v = info.Length() > i ? info[i] : info.Env().Undefined();
  if (v.IsUndefined() || v.IsNull()) return slots;
  const size_t widths = t.config().slotWidths.size();
  ES_CHECK(v.IsArray(), kInvalidType,
           "Expected slots to be an array of " << widths << " Float32Arrays or null but received " << describe(v));
  Napi::Array arr = v.As<Napi::Array>();
  ES_CHECK(arr.Length() == widths, kShapeMismatch,
           "Expected slots to hold " << widths << " arrays (one per slot) but received " << arr.Length());
  for (uint32_t j = 0; j < arr.Length(); ++j) slots.push_back(arr.Get(j));
  return slots;
}

Op<Unit> prepareImport(const Napi::CallbackInfo& info) {
  TableHolder* h;
  auto t = tableArg(info, 0, &h);
  const std::vector<Napi::Value> slots = slotValues(info, 3, *t);
  auto keys = std::make_shared<KeysArg>(keysArg(info, 1, *h, "keys"));
  const size_t n = keys->n;
  Op<Unit> op;
  const float* values = valuesFor(info, 2, "values", n, h->dim);
  auto slotPtrs = std::make_shared<std::vector<const float*>>();
  const std::vector<uint32_t>& widths = t->config().slotWidths;
  for (size_t j = 0; j < slots.size(); ++j) {
    const std::string name = "slots[" + std::to_string(j) + "]";
    TypedArg<float> s = floatOf(slots[j], name.c_str());
    checkLength(s.length, checkedMul(n, widths[j], "slots"), name.c_str(), "floats (keys * slot width)");
    slotPtrs->push_back(s.data);
  }
  const uint64_t* scores = optionalScores(info, 4, n);
  op.job = [t, keys, values, slotPtrs, scores] {
    // null slots (or [] for a table without slots): every imported row gets its slots' initial values
    t->importRows(keys->data, keys->n, values, slotPtrs->empty() ? nullptr : slotPtrs->data(), scores);
    return Unit{};
  };
  op.toJs = undefinedToJs;
  return op;
}

// lookupCombined(t, rowSplits, keys, weights, combiner, maxNorm, insertMissing, out?)
Op<BagOutcome> prepareLookupCombined(const Napi::CallbackInfo& info) {
  TableHolder* h;
  auto t = tableArg(info, 0, &h);
  Op<BagOutcome> op;
  BagArg b = bagArg(info, 1, *h, true);  // int32 ids stay narrow for a table that reads them
  auto keys = b.keys;
  const BagInput given = b.input;
  const Combiner c = lookupCombinerArg(info, 4);
  const double maxNorm = maxNormArg(info, 5);
  const bool insertMissing = boolArg(info, 6, "insertMissing");
  const BagOut out = bagOutArg(info, 7, given.rows, h->dim, "lookupCombined output");
  float* outData = out.data;
  op.job = [t, keys, given, c, maxNorm, insertMissing, outData] {
    BagInput bag = given;
    if (bag.keys32 && !t->readsInt32Bags()) {
      keys->widen();
      bag.keys = keys->data;
      bag.keys32 = nullptr;
    }
    BagOutcome r;
    if (outData) {
      t->lookupCombinedInto(bag, c, maxNorm, insertMissing, outData);
      r.filled = true;
    } else {
      r.owned = t->lookupCombined(bag, c, maxNorm, insertMissing);
    }
    return r;
  };
  op.toJs = bagOutcomeToJs(out);
  return op;
}

Op<Unit> prepareApplyGradients(const Napi::CallbackInfo& info) {
  TableHolder* h;
  auto t = tableArg(info, 0, &h);
  auto keys = std::make_shared<KeysArg>(keysArg(info, 1, *h, "keys"));
  Op<Unit> op;
  const float* grads = valuesFor(info, 2, "grads", keys->n, h->dim);
  const OptimizerParams p = optimizerArg(info, 3);
  op.job = [t, keys, grads, p] {
    t->applyGradients(keys->data, keys->n, grads, p);
    return Unit{};
  };
  op.toJs = undefinedToJs;
  return op;
}

Op<size_t> prepareRestrict(const Napi::CallbackInfo& info) {
  auto t = tableArg(info, 0);
  const size_t n = static_cast<size_t>(integerArg(info, 1, "numReserved", 0, kMaxSafe));
  Op<size_t> op;
  op.job = [t, n] { return t->restrict(n); };
  op.toJs = countToJs;
  return op;
}

// ---- sync-only functions ------------------------------------------------------------

Napi::Value sizeFn(const Napi::CallbackInfo& info) {
  return guard(info, [&] { return Napi::Number::New(info.Env(), static_cast<double>(tableArg(info, 0)->size())); });
}
Napi::Value capacityFn(const Napi::CallbackInfo& info) {
  return guard(info, [&] { return Napi::Number::New(info.Env(), static_cast<double>(tableArg(info, 0)->capacity())); });
}
Napi::Value memoryUsageFn(const Napi::CallbackInfo& info) {
  return guard(info,
               [&] { return Napi::Number::New(info.Env(), static_cast<double>(tableArg(info, 0)->memoryUsage())); });
}
Napi::Value setEpochFn(const Napi::CallbackInfo& info) {
  return guard(info, [&] {
    auto t = tableArg(info, 0);
    t->setEpoch(static_cast<uint32_t>(integerArg(info, 1, "epoch", 0, 4294967295.0)));
    return info.Env().Undefined();
  });
}
Napi::Value disposeFn(const Napi::CallbackInfo& info) {
  return guard(info, [&] {
    TableHolder* h = holderArg(info, 0);
    if (h->table) {
      h->table->markDisposed();
      h->table.reset();  // memory goes when the last running op lets go of it
    }
    return info.Env().Undefined();
  });
}
Napi::Value isDisposedFn(const Napi::CallbackInfo& info) {
  return guard(info, [&] { return Napi::Boolean::New(info.Env(), holderArg(info, 0)->table == nullptr); });
}

}  // namespace

void registerTableFunctions(Napi::Env env, Napi::Object exports) {
  auto def = [&](const char* name, Napi::Function::Callback fn) {
    exports.Set(name, Napi::Function::New(env, fn, name));
  };
  def("find", syncFn<FindOutcome, prepareFind>);
  def("findAsync", asyncFn<FindOutcome, prepareFind>);
  def("findOrInsert", syncFn<FindOutcome, prepareFindOrInsert>);
  def("findOrInsertAsync", asyncFn<FindOutcome, prepareFindOrInsert>);
  def("upsert", syncFn<Unit, prepareWrite<&Table::upsert>>);
  def("upsertAsync", asyncFn<Unit, prepareWrite<&Table::upsert>>);
  def("assign", syncFn<Unit, prepareWrite<&Table::assign>>);
  def("assignAsync", asyncFn<Unit, prepareWrite<&Table::assign>>);
  def("accum", syncFn<Unit, prepareAccum>);
  def("accumAsync", asyncFn<Unit, prepareAccum>);
  def("remove", syncFn<size_t, prepareRemove>);
  def("removeAsync", asyncFn<size_t, prepareRemove>);
  def("clear", syncFn<Unit, prepareClear>);
  def("clearAsync", asyncFn<Unit, prepareClear>);
  def("exportBatch", syncFn<ExportResult, prepareExport>);
  def("exportBatchAsync", asyncFn<ExportResult, prepareExport>);
  def("importRows", syncFn<Unit, prepareImport>);
  def("importRowsAsync", asyncFn<Unit, prepareImport>);
  def("lookupCombined", syncFn<BagOutcome, prepareLookupCombined>);
  def("lookupCombinedAsync", asyncFn<BagOutcome, prepareLookupCombined>);
  def("applyGradients", syncFn<Unit, prepareApplyGradients>);
  def("applyGradientsAsync", asyncFn<Unit, prepareApplyGradients>);
  def("restrict", syncFn<size_t, prepareRestrict>);
  def("restrictAsync", asyncFn<size_t, prepareRestrict>);
  def("size", sizeFn);
  def("capacity", capacityFn);
  def("memoryUsage", memoryUsageFn);
  def("setEpoch", setEpochFn);
  def("dispose", disposeFn);
  def("isDisposed", isDisposedFn);
}

}  // namespace embedstack
