// createTable's arguments -> a validated TableConfig, and the JS handle of a new
// table. Shared by every native backend's addon (the CUDA backend's too): the config
// vector's layout is abi.h's TableField.
#include "table_config.h"

#include <cmath>

#include "abi.h"

namespace embedstack {

namespace {

constexpr double kMaxSafe = 9007199254740991.0;

uint32_t uint32Field(const double* v, int field, const char* name) {
  const double x = v[field];
  ES_CHECK(std::isfinite(x) && x == std::floor(x) && x >= 0 && x <= 4294967295.0, kInvalidArgument,
           "Expected config." << name << " to be an integer in [0, 2^32) but received " << formatNumber(x));
  return static_cast<uint32_t>(x);
}

size_t countField(const double* v, int field, const char* name, double min) {
  const double x = v[field];
  ES_CHECK(std::isfinite(x) && x == std::floor(x) && x >= min && x <= kMaxSafe, kInvalidArgument,
           "Expected config." << name << " to be an integer in [" << formatNumber(min) << ", 2^53) but received "
                                   << formatNumber(x));
  return static_cast<size_t>(x);
}

int enumField(const double* v, int field, const char* name, int max) {
  const double x = v[field];
  ES_CHECK(x == std::floor(x) && x >= 0 && x <= max, kInvalidArgument,
           "Expected config." << name << " to be an integer in [0, " << max << "] but received " << formatNumber(x));
  return static_cast<int>(x);
}

double finiteField(const double* v, int field, const char* name) {
  const double x = v[field];  // read once: the config may be shared memory another thread writes
  ES_CHECK(std::isfinite(x), kInvalidArgument,
           "Expected config." << name << " to be a finite number but received " << formatNumber(x));
  return x;
}

}  // namespace

TableConfig tableConfigArg(const Napi::CallbackInfo& info) {
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
  c.storage = static_cast<StorageDtype>(enumField(v, abi::kStorageDtype, "storageDtype", 2));
  checkLength(initial.length, widths.length, "slotInitial", "values (one per slot)");
  ES_CHECK(widths.length <= 8, kInvalidArgument, "Expected at most 8 slots but received " << widths.length);
  c.slotWidths.assign(widths.data, widths.data + widths.length);
  c.slotInitial.assign(initial.data, initial.data + initial.length);
  if (c.initializer.kind == InitKind::kRow || c.initializer.kind == InitKind::kArray) {
    ES_CHECK(initValues.present, kInvalidType,
             "Expected initValues to be a Float32Array for a row or array initializer but received null");
    c.initializer.values.assign(initValues.data, initValues.data + initValues.length);
  }
  return c;
}

Napi::Value tableHandle(Napi::Env env, std::shared_ptr<Table> table) {
  auto holder = std::make_unique<TableHolder>();
  holder->int32Keys = table->config().int32Keys;
  holder->dim = table->config().dim;
  holder->table = std::move(table);
  auto handle = Napi::External<TableHolder>::New(env, holder.get(), [](Napi::Env, TableHolder* h) { delete h; });
  holder.release();
  tagHandle(handle);
  return handle;
}

}  // namespace embedstack
