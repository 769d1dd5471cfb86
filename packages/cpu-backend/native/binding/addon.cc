// Module entry: createTable, info and the table functions (table_api.cc).
// The addon is context-aware (Node-API), has no per-process JS state, and shares
// one native thread pool between all tables and environments.
#include <napi.h>

#include <cmath>

#include "abi.h"
#include "args.h"
#include "async_op.h"
#include "group.h"
#include "memory.h"
#include "plan_api.h"
#include "table_api.h"
#include "thread_pool.h"

namespace embedstack {

namespace {

constexpr double kMaxSafe = 9007199254740991.0;

uint32_t uint32Field(const double* v, int field, const char* name) {
  const double x = v[field];
  ES_CHECK(std::isfinite(x) && x == std::floor(x) && x >= 0 && x <= 4294967295.0, kInvalidArgument,
           "Expected config." << name << " to be an integer in [0, 2^32) but received " << x);
  return static_cast<uint32_t>(x);
}

size_t countField(const double* v, int field, const char* name, double min) {
  const double x = v[field];
  ES_CHECK(std::isfinite(x) && x == std::floor(x) && x >= min && x <= kMaxSafe, kInvalidArgument,
           "Expected config." << name << " to be an integer in [" << min << ", 2^53) but received " << x);
  return static_cast<size_t>(x);
}

int enumField(const double* v, int field, const char* name, int max) {
  const double x = v[field];
  ES_CHECK(x == std::floor(x) && x >= 0 && x <= max, kInvalidArgument,
           "Expected config." << name << " to be an integer in [0, " << max << "] but received " << x);
  return static_cast<int>(x);
}

double finiteField(const double* v, int field, const char* name) {
  ES_CHECK(std::isfinite(v[field]), kInvalidArgument,
           "Expected config." << name << " to be a finite number but received " << v[field]);
  return v[field];
}

// createTable(config: Float64Array, slotWidths: Uint32Array, slotInitial: Float32Array,
//             initValues: Float32Array | null) -> table handle
Napi::Value createTableFn(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    TypedArg<double> cfg = float64Arg(info, 0, "config", abi::kTableFields);
    TypedArg<uint32_t> widths = uint32Arg(info, 1, "slotWidths");
    TypedArg<float> initial = floatArg(info, 2, "slotInitial", false);
    TypedArg<float> initValues = floatArg(info, 3, "initValues", true);
    const double* v = cfg.data;
    TableConfig c;
    c.isStatic = enumField(v, abi::kKind, "kind", 1) == 1;
    c.dim = countField(v, abi::kDim, "dim", 1);
    c.int32Keys = enumField(v, abi::kKeyDtype, "keyDtype", 1) == 1;
    if (c.isStatic) {
      c.vocabularySize = countField(v, abi::kVocabularySize, "vocabularySize", 1);
    } else {
      c.initCapacity = countField(v, abi::kInitCapacity, "initCapacity", 1);
      c.maxCapacity = v[abi::kMaxCapacity] == INFINITY ? SIZE_MAX : countField(v, abi::kMaxCapacity, "maxCapacity", 1);
    }
    c.initializer.kind = static_cast<InitKind>(enumField(v, abi::kInitKind, "initKind", 7));
    c.initializer.a = finiteField(v, abi::kInitA, "initA");
    c.initializer.b = finiteField(v, abi::kInitB, "initB");
    c.initializer.seed = uint32Field(v, abi::kSeed, "seed");
    c.initializer.stream = uint32Field(v, abi::kStream, "stream");
    c.scorePolicy = static_cast<ScorePolicy>(enumField(v, abi::kScorePolicy, "scorePolicy", 6));
    checkLength(initial.length, widths.length, "slotInitial", "values (one per slot)");
    ES_CHECK(widths.length <= 8, kInvalidArgument, "Expected at most 8 slots but received " << widths.length);
    c.slotWidths.assign(widths.data, widths.data + widths.length);
    c.slotInitial.assign(initial.data, initial.data + initial.length);
    if (c.initializer.kind == InitKind::kRow || c.initializer.kind == InitKind::kArray) {
      ES_CHECK(initValues.present, kInvalidType,
               "Expected initValues to be a Float32Array for a row or array initializer but received null");
      c.initializer.values.assign(initValues.data, initValues.data + initValues.length);
    }
    auto holder = std::make_unique<TableHolder>();
    holder->int32Keys = c.int32Keys;
    holder->dim = c.dim;
    holder->table = createTable(std::move(c));
    auto handle =
        Napi::External<TableHolder>::New(info.Env(), holder.get(), [](Napi::Env, TableHolder* h) { delete h; });
    holder.release();
    tagHandle(handle);
    return handle;
  });
}

Napi::Value infoFn(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("groupProbing", groupImplementation());
  o.Set("threads", static_cast<double>(ThreadPool::shared().threads()));
  o.Set("hardwareConcurrency", static_cast<double>(std::thread::hardware_concurrency()));
  o.Set("physicalMemory", static_cast<double>(physicalMemoryBytes()));
  o.Set("parallelThreshold", static_cast<double>(kParallelThreshold));
  o.Set("napiVersion", static_cast<double>(NAPI_VERSION));
  return o;
}

Napi::Object init(Napi::Env env, Napi::Object exports) {
  exports.Set("createTable", Napi::Function::New(env, createTableFn, "createTable"));
  exports.Set("info", Napi::Function::New(env, infoFn, "info"));
  Napi::Object fields = Napi::Object::New(env);
  fields.Set("table", static_cast<double>(abi::kTableFields));
  fields.Set("optimizer", static_cast<double>(abi::kOptimizerFields));
  fields.Set("plan", static_cast<double>(abi::kPlanFields));
  exports.Set("abiFields", fields);
  registerTableFunctions(env, exports);
  registerPlanFunctions(env, exports);
  return exports;
}

}  // namespace

}  // namespace embedstack

static Napi::Object initModule(Napi::Env env, Napi::Object exports) {
  return embedstack::init(env, exports);
}

NODE_API_MODULE(embedstack_cpu, initModule)
