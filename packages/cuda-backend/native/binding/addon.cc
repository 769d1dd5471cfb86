// Module entry of the CUDA backend's addon. The table functions and their argument
// checks are cpu-backend's N-API layer (native/binding, shared: the same typed
// boundary, the same errors); this file adds what differs: createTable's placement
// (host mode or a device, HBM budget), device detection and the memory breakdown; info()
// and clearResultCache() report and empty its result cache (cpu-backend's memory.cc).
#include <napi.h>

#include <cmath>
#include <thread>

#include "abi.h"
#include "args.h"
#include "async_op.h"
#include "convert.h"
#include "factory.h"
#include "plan_api.h"
#include "table_api.h"
#include "table_config.h"
#include "thread_pool.h"

namespace embedstack {
namespace cuda {

namespace {

// [device, ordinal, hbmBudget bytes (Infinity: all), poolReleaseThreshold bytes (Infinity:
// never release)]; device: 0 host mode, 1 a CUDA device, 2 / 3 an emulated device (host memory
// through the device protocol, exec/runtime.h; a test aid), its launches' items and lanes in
// order (2) or reversed (3). The pool threshold is used by device mode only.
constexpr int kPlacementFields = 4;

/** A placement field holding a byte count or Infinity (SIZE_MAX). */
size_t bytesOrInfinity(double v, const char* name) {
  ES_CHECK(v == INFINITY || (v == std::floor(v) && v >= 0 && v <= 9007199254740991.0), kInvalidArgument,
           "Expected placement." << name << " to be a byte count or Infinity but received " << v);
  return v == INFINITY ? SIZE_MAX : static_cast<size_t>(v);
}

Placement placementArg(const Napi::CallbackInfo& info, size_t i) {
  Placement p;
  if (info.Length() <= i || info[i].IsUndefined() || info[i].IsNull()) return p;
  TypedArg<double> a = float64Arg(info, i, "placement", kPlacementFields);
  const double device = a.data[0];
  const double ordinal = a.data[1];
  ES_CHECK(device == 0 || device == 1 || device == 2 || device == 3, kInvalidArgument,
           "Expected placement.device to be 0 (host mode), 1 (a CUDA device), 2 or 3 (an emulated device, a test aid) "
           "but received "
               << device);
  ES_CHECK(std::isfinite(ordinal) && ordinal == std::floor(ordinal) && ordinal >= 0 && ordinal < 1024, kInvalidArgument,
           "Expected placement.ordinal to be an integer in [0, 1024) but received " << ordinal);
  const size_t budget = bytesOrInfinity(a.data[2], "hbmBudget");
  const size_t poolThreshold = bytesOrInfinity(a.data[3], "poolReleaseThreshold");
  p.device = device == 1;
  p.emulated = device >= 2;
  p.emulation.reverseItems = device == 3;
  p.emulation.reverseLanes = device == 3;
  p.ordinal = static_cast<int>(ordinal);
  p.hbmBudget = budget;
  p.poolReleaseThreshold = poolThreshold;
  return p;
}

// createTable(config, slotWidths, slotInitial, initValues, placement?) -> table handle
Napi::Value createTableFn(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    TableConfig c = tableConfigArg(info);
    const Placement p = placementArg(info, 4);
    return tableHandle(info.Env(), createTable(std::move(c), p));
  });
}

Napi::Value infoFn(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const DeviceStatus& s = deviceStatus();
  Napi::Object o = Napi::Object::New(env);
  o.Set("threads", static_cast<double>(ThreadPool::shared().threads()));
  o.Set("hardwareConcurrency", static_cast<double>(std::thread::hardware_concurrency()));
  o.Set("napiVersion", static_cast<double>(NAPI_VERSION));
  o.Set("deviceCode", s.compiled);
  o.Set("architectures", s.architectures);
  // The result cache of cpu-backend's memory.cc, compiled into this addon too (its own
  // instance: the CPU addon's cache is another).
  o.Set("resultCache", resultCacheToJs(env));
  return o;
}

// deviceStatus() -> { compiled, usable, reason, runtimeVersion, driverVersion, architectures, devices[] }
Napi::Value deviceStatusFn(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const DeviceStatus& s = deviceStatus();
  Napi::Object o = Napi::Object::New(env);
  o.Set("compiled", s.compiled);
  o.Set("usable", s.usable);
  o.Set("reason", s.reason);
  o.Set("runtimeVersion", static_cast<double>(s.runtimeVersion));
  o.Set("driverVersion", static_cast<double>(s.driverVersion));
  o.Set("architectures", s.architectures);
  Napi::Array devices = Napi::Array::New(env, s.devices.size());
  for (size_t d = 0; d < s.devices.size(); ++d) {
    const DeviceInfo& di = s.devices[d];
    Napi::Object x = Napi::Object::New(env);
    x.Set("ordinal", static_cast<double>(di.ordinal));
    x.Set("name", di.name);
    x.Set("totalMemory", static_cast<double>(di.totalMemory));
    x.Set("computeCapability", std::to_string(di.computeMajor) + "." + std::to_string(di.computeMinor));
    x.Set("multiprocessors", static_cast<double>(di.multiprocessors));
    devices.Set(static_cast<uint32_t>(d), x);
  }
  o.Set("devices", devices);
  return o;
}

// memoryBreakdown(t) -> [deviceBytes, pinnedHostBytes]
Napi::Value memoryBreakdownFn(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    std::shared_ptr<Table> t = tableArg(info, 0);
    auto* d = dynamic_cast<DeviceTable*>(t.get());
    ES_CHECK(d != nullptr, kInvalidType, "Expected table to be a CUDA backend table");
    const DeviceTable::MemorySplit m = d->memorySplit();
    Napi::Array r = Napi::Array::New(info.Env(), 2);
    r.Set(0u, static_cast<double>(m.device));
    r.Set(1u, static_cast<double>(m.pinned));
    return r;
  });
}

// findKernelSeconds(t, keys, iterations) -> seconds per find kernel over device-resident keys and outputs
Napi::Value findKernelSecondsFn(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    TableHolder* h;
    std::shared_ptr<Table> t = tableArg(info, 0, &h);
    KeysArg keys = keysArg(info, 1, *h, "keys");
    const int iterations = static_cast<int>(integerArg(info, 2, "iterations", 1, 10000));
    auto* d = dynamic_cast<DeviceTable*>(t.get());
    ES_CHECK(d != nullptr, kInvalidType, "Expected table to be a CUDA backend table");
    return Napi::Number::New(info.Env(), d->findKernelSeconds(keys.data, keys.n, iterations));
  });
}

// onDevice(t) -> whether the table lives on a CUDA device (false: host mode)
Napi::Value onDeviceFn(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    std::shared_ptr<Table> t = tableArg(info, 0);
    auto* d = dynamic_cast<DeviceTable*>(t.get());
    return Napi::Boolean::New(info.Env(), d != nullptr && d->onDevice());
  });
}

Napi::Object init(Napi::Env env, Napi::Object exports) {
  auto def = [&](const char* name, Napi::Function::Callback fn) {
    exports.Set(name, Napi::Function::New(env, fn, name));
  };
  def("createTable", createTableFn);
  def("info", infoFn);
  def("clearResultCache", clearResultCacheFn);
  def("deviceStatus", deviceStatusFn);
  def("memoryBreakdown", memoryBreakdownFn);
  def("onDevice", onDeviceFn);
  def("findKernelSeconds", findKernelSecondsFn);
  Napi::Object fields = Napi::Object::New(env);
  fields.Set("table", static_cast<double>(abi::kTableFields));
  fields.Set("optimizer", static_cast<double>(abi::kOptimizerFields));
  fields.Set("plan", static_cast<double>(abi::kPlanFields));
  fields.Set("placement", static_cast<double>(kPlacementFields));
  exports.Set("abiFields", fields);
  registerTableFunctions(env, exports);
  registerPlanFunctions(env, exports);
  return exports;
}

}  // namespace

}  // namespace cuda
}  // namespace embedstack

static Napi::Object initModule(Napi::Env env, Napi::Object exports) {
  return embedstack::cuda::init(env, exports);
}

NODE_API_MODULE(embedstack_cuda, initModule)
