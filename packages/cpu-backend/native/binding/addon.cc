// Module entry: createTable, info, the table functions (table_api.cc) and the
// set-associative cache functions (cache_api.cc).
// The addon is context-aware (Node-API), has no per-process JS state, and shares
// one native thread pool between all tables and environments.
#include <napi.h>

#include "abi.h"
#include "args.h"
#include "async_op.h"
#include "cache_api.h"
#include "convert.h"
#include "fp_mode.h"
#include "group.h"
#include "memory.h"
#include "plan_api.h"
#include "table_api.h"
#include "table_config.h"
#include "thread_pool.h"

namespace embedstack {

namespace {

// createTable(config: Float64Array, slotWidths: Uint32Array, slotInitial: Float32Array,
//             initValues: Float32Array | null) -> table handle
Napi::Value createTableFn(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value { return tableHandle(info.Env(), createTable(tableConfigArg(info))); });
}

Napi::Value infoFn(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("groupProbing", groupImplementation());
  o.Set("threads", static_cast<double>(ThreadPool::shared().threads()));
  o.Set("idleSpinUs", static_cast<double>(ThreadPool::shared().idleSpinNs() / 1000));
  o.Set("hardwareConcurrency", static_cast<double>(std::thread::hardware_concurrency()));
  o.Set("physicalMemory", static_cast<double>(physicalMemoryBytes()));
  o.Set("parallelThreshold", static_cast<double>(kParallelThreshold));
  o.Set("napiVersion", static_cast<double>(NAPI_VERSION));
  o.Set("mallocTuning", allocatorTuningName(allocatorTuning()));
  o.Set("resultCache", resultCacheToJs(env));
  const AsyncCompletion::EarlyWakeStats ew = AsyncCompletion::earlyWakeStats();
  Napi::Object wake = Napi::Object::New(env);
  wake.Set("waitUs", static_cast<double>(AsyncCompletion::earlyWaitNs() / 1000));
  wake.Set("wakes", static_cast<double>(ew.wakes));
  wake.Set("settled", static_cast<double>(ew.settled));
  wake.Set("gaveUp", static_cast<double>(ew.gaveUp));
  o.Set("earlyWake", wake);
  const CallCopies::Stats cs = CallCopies::stats();
  Napi::Object copies = Napi::Object::New(env);
  copies.Set("arrays", static_cast<double>(cs.arrays));
  copies.Set("bytes", static_cast<double>(cs.bytes));
  copies.Set("shared", static_cast<double>(cs.shared));
  o.Set("asyncCopies", copies);
  return o;
}

// Tests only: testFpMode(mode?: number) -> number. Sets the calling thread's floating-point
// control word (x86-64 MXCSR, AArch64 FPCR; 0 elsewhere) to `mode` when given, as another
// library in the process could leave it (FTZ / DAZ), and returns the value before. Not under
// guard(): that would restore the mode it sets.
Napi::Value testFpModeFn(const Napi::CallbackInfo& info) {
  return guardErrors(info, [&]() -> Napi::Value {
    const FpMode before = readFpMode();
    if (info.Length() > 0 && !info[0].IsUndefined()) {
      writeFpMode(static_cast<FpMode>(integerArg(info, 0, "mode", 0, 4294967295.0)));
    }
    return Napi::Number::New(info.Env(), static_cast<double>(before));
  });
}

Napi::Object init(Napi::Env env, Napi::Object exports) {
  tuneAllocator();
  AsyncCompletion::earlyWaitNs();  // read EMBEDSTACK_CPU_EARLY_WAIT_US at load
  exports.Set("createTable", Napi::Function::New(env, createTableFn, "createTable"));
  exports.Set("info", Napi::Function::New(env, infoFn, "info"));
  exports.Set("clearResultCache", Napi::Function::New(env, clearResultCacheFn, "clearResultCache"));
  exports.Set("testFpMode", Napi::Function::New(env, testFpModeFn, "testFpMode"));
  Napi::Object fields = Napi::Object::New(env);
  fields.Set("table", static_cast<double>(abi::kTableFields));
  fields.Set("optimizer", static_cast<double>(abi::kOptimizerFields));
  fields.Set("plan", static_cast<double>(abi::kPlanFields));
  exports.Set("abiFields", fields);
  registerTableFunctions(env, exports);
  registerPlanFunctions(env, exports);
  registerCacheFunctions(env, exports);
  return exports;
}

}  // namespace

}  // namespace embedstack

static Napi::Object initModule(Napi::Env env, Napi::Object exports) {
  return embedstack::init(env, exports);
}

NODE_API_MODULE(embedstack_cpu, initModule)
