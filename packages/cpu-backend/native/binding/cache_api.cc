// The addon's set-associative cache functions (core's cache contract, see
// src/set_cache.h). All run synchronously on the calling (JS) thread: a cache is
// never touched by two threads. Every argument is checked before anything changes,
// so a rejected call leaves the cache as it was; no input crashes the process.
#include "cache_api.h"

#include <memory>

#include "args.h"
#include "async_op.h"
#include "memory.h"
#include "set_cache.h"

namespace embedstack {

namespace {

// Per addon and version, as the table handles' tag (args.cc).
const napi_type_tag kCacheTag = {EMBEDSTACK_HANDLE_TAG, 0x636b2d6361636865ULL};  // "ck-cache" in the low word

struct CacheHolder {
  std::unique_ptr<SetCache> cache;
};

/** The live cache behind info[i] (INVALID_TYPE for a foreign value, DISPOSED after dispose). */
CacheHolder* holderOf(const Napi::CallbackInfo& info, size_t i) {
  Napi::Value v = i < info.Length() ? info[i] : info.Env().Undefined();
  ES_CHECK(v.IsExternal() && v.As<Napi::External<CacheHolder>>().CheckTypeTag(&kCacheTag), kInvalidType,
           "Expected cache to be a cache handle returned by createCache but received " << describe(v));
  CacheHolder* h = v.As<Napi::External<CacheHolder>>().Data();
  ES_CHECK(h != nullptr, kInvalidType,
           "Expected cache to be a cache handle returned by createCache but received " << describe(v));
  return h;
}

SetCache& cacheOf(const Napi::CallbackInfo& info) {
  CacheHolder* h = holderOf(info, 0);
  ES_CHECK(h->cache != nullptr, kDisposed, "Expected cache to be a live cache but it was disposed");
  return *h->cache;
}

/** int64 keys: a BigInt64Array (keysArg with an int64 holder). */
KeysArg cacheKeys(const Napi::CallbackInfo& info, size_t i) {
  static const TableHolder kInt64Keys{};
  return keysArg(info, i, kInt64Keys, "keys");
}

const float* rowsArg(const Napi::CallbackInfo& info, size_t i, const char* name, size_t n, size_t dim) {
  TypedArg<float> v = floatArg(info, i, name, false);
  checkLength(v.length, checkedMul(n, dim, name), name, "floats (keys * dim)");
  return v.data;
}

Napi::Number count(Napi::Env env, size_t n) {
  return Napi::Number::New(env, static_cast<double>(n));
}

// createCache(capacity, dim, ways) -> handle
Napi::Value createCacheFn(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    const double capacity = integerArg(info, 0, "capacity", 0, static_cast<double>(SetCache::kMaxSlots));
    const double dim = integerArg(info, 1, "dim", 1, 1 << 20);
    const double ways = integerArg(info, 2, "ways", 1, SetCache::kMaxWays);
    auto holder = std::make_unique<CacheHolder>();
    holder->cache = std::make_unique<SetCache>(static_cast<uint64_t>(capacity), static_cast<uint32_t>(dim),
                                               static_cast<uint32_t>(ways));
    auto handle =
        Napi::External<CacheHolder>::New(info.Env(), holder.get(), [](Napi::Env, CacheHolder* h) { delete h; });
    holder.release();
    handle.TypeTag(&kCacheTag);
    return handle;
  });
}

// cacheQuery(c, keys, outValues [n*dim], outExists [n]) -> hits
Napi::Value queryFn(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    SetCache& c = cacheOf(info);
    KeysArg keys = cacheKeys(info, 1);
    TypedArg<float> out = floatArg(info, 2, "outValues", false, Use::kOutput);
    TypedArg<uint8_t> exists = uint8Arg(info, 3, "outExists", Use::kOutput);
    checkLength(out.length, checkedMul(keys.n, c.dim(), "outValues"), "outValues", "floats (keys * dim)");
    checkLength(exists.length, keys.n, "outExists", "flags (one per key)");
    return count(info.Env(),
                 c.query(keys.data, keys.n, const_cast<float*>(out.data), const_cast<uint8_t*>(exists.data)));
  });
}

// cacheInsert(c, keys, values [n*dim]) -> evicted rows
Napi::Value insertFn(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    SetCache& c = cacheOf(info);
    KeysArg keys = cacheKeys(info, 1);
    const float* values = rowsArg(info, 2, "values", keys.n, c.dim());
    return count(info.Env(), c.insert(keys.data, keys.n, values));
  });
}

// cacheUpdate(c, keys, values [n*dim]) -> rows overwritten
Napi::Value updateFn(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    SetCache& c = cacheOf(info);
    KeysArg keys = cacheKeys(info, 1);
    const float* values = rowsArg(info, 2, "values", keys.n, c.dim());
    return count(info.Env(), c.update(keys.data, keys.n, values));
  });
}

// cacheRemove(c, keys) -> rows removed
Napi::Value removeFn(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    SetCache& c = cacheOf(info);
    KeysArg keys = cacheKeys(info, 1);
    return count(info.Env(), c.remove(keys.data, keys.n));
  });
}

// cacheKeys(c) -> BigInt64Array of the resident keys
Napi::Value keysFn(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    SetCache& c = cacheOf(info);
    Napi::BigInt64Array out = Napi::BigInt64Array::New(info.Env(), static_cast<size_t>(c.size()));
    if (c.size() > 0) c.keys(out.Data());
    return out;
  });
}

// cacheInfo(c) -> Float64Array [size, capacity, sets, ways, dim]
Napi::Value infoFn(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    SetCache& c = cacheOf(info);
    Napi::Float64Array out = Napi::Float64Array::New(info.Env(), 5);
    out[0] = static_cast<double>(c.size());
    out[1] = static_cast<double>(c.capacity());
    out[2] = static_cast<double>(c.sets());
    out[3] = c.ways();
    out[4] = c.dim();
    return out;
  });
}

Napi::Value clearFn(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    cacheOf(info).clear();
    return info.Env().Undefined();
  });
}

// cacheDispose(c): idempotent; frees the memory at once (no op can be running: all are sync).
Napi::Value disposeFn(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value {
    holderOf(info, 0)->cache.reset();
    return info.Env().Undefined();
  });
}

Napi::Value isDisposedFn(const Napi::CallbackInfo& info) {
  return guard(info, [&]() -> Napi::Value { return Napi::Boolean::New(info.Env(), holderOf(info, 0)->cache == nullptr); });
}

}  // namespace

void registerCacheFunctions(Napi::Env env, Napi::Object exports) {
  auto def = [&](const char* name, Napi::Function::Callback fn) {
    exports.Set(name, Napi::Function::New(env, fn, name));
  };
  def("createCache", createCacheFn);
  def("cacheQuery", queryFn);
  def("cacheInsert", insertFn);
  def("cacheUpdate", updateFn);
  def("cacheRemove", removeFn);
  def("cacheKeys", keysFn);
  def("cacheInfo", infoFn);
  def("cacheClear", clearFn);
  def("cacheDispose", disposeFn);
  def("cacheIsDisposed", isDisposedFn);
}

}  // namespace embedstack
