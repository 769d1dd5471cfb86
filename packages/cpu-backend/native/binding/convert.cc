#include "convert.h"

#include <cstdint>
#include <cstring>
#include <new>

namespace embedstack {

namespace {

// The finalizer of a result's ArrayBuffer: the block goes back to the result cache
// (memory.h), its size carried as the hint.
void freeBlock(napi_env, void* data, void* hint) {
  resultFree(data, reinterpret_cast<uintptr_t>(hint));
}

// Takes ownership of a result block and returns an ArrayBuffer of its first `bytes`.
Napi::ArrayBuffer adopt(Napi::Env env, ResultBlock block, size_t bytes) {
  if (block.p == nullptr || bytes == 0) {
    resultFree(block.p, block.bytes);
    return Napi::ArrayBuffer::New(env, 0);
  }
  napi_value ab;
  napi_status s = napi_create_external_arraybuffer(env, block.p, bytes, freeBlock,
                                                   reinterpret_cast<void*>(static_cast<uintptr_t>(block.bytes)), &ab);
  if (s == napi_ok) return Napi::ArrayBuffer(env, ab);
  // The runtime forbids external buffers (or failed): copy into a V8-owned one.
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (pending) {
    napi_value ignored;
    napi_get_and_clear_last_exception(env, &ignored);
  }
  Napi::ArrayBuffer copy;
  try {
    copy = Napi::ArrayBuffer::New(env, bytes);
  } catch (...) {
    resultFree(block.p, block.bytes);
    throw;
  }
  std::memcpy(copy.Data(), block.p, bytes);
  resultFree(block.p, block.bytes);
  return copy;
}

template <class T>
Napi::ArrayBuffer adoptArray(Napi::Env env, HostArray<T>& a) {
  size_t bytes = a.bytes();
  return adopt(env, a.release(), bytes);
}

const char* className(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "InvalidArgumentError";
    case ErrorCode::kInvalidType:
      return "InvalidTypeError";
    case ErrorCode::kShapeMismatch:
      return "ShapeMismatchError";
    case ErrorCode::kOutOfRange:
      return "OutOfRangeError";
    case ErrorCode::kUnsupported:
      return "UnsupportedError";
    case ErrorCode::kDisposed:
      return "DisposedError";
    case ErrorCode::kFailedPrecondition:
      return "FailedPreconditionError";
    case ErrorCode::kInternal:
      return "InternalError";
  }
  return "InternalError";
}

}  // namespace

Napi::Object resultCacheToJs(Napi::Env env) {
  const ResultCacheStats rc = resultCacheStats();
  Napi::Object cache = Napi::Object::New(env);
  cache.Set("capBytes", static_cast<double>(rc.capBytes));
  cache.Set("heldBytes", static_cast<double>(rc.heldBytes));
  cache.Set("heldBlocks", static_cast<double>(rc.heldBlocks));
  cache.Set("hits", static_cast<double>(rc.hits));
  cache.Set("misses", static_cast<double>(rc.misses));
  return cache;
}

Napi::Value clearResultCacheFn(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(clearResultCache()));
}

Napi::Float32Array toFloat32Array(Napi::Env env, HostArray<float>& a) {
  size_t n = a.size();
  return Napi::Float32Array::New(env, n, adoptArray(env, a), 0);
}

Napi::Uint8Array toUint8Array(Napi::Env env, HostArray<uint8_t>& a) {
  size_t n = a.size();
  return Napi::Uint8Array::New(env, n, adoptArray(env, a), 0);
}

Napi::BigUint64Array toBigUint64Array(Napi::Env env, HostArray<uint64_t>& a) {
  size_t n = a.size();
  return Napi::BigUint64Array::New(env, n, adoptArray(env, a), 0);
}

Napi::Value toKeyArray(Napi::Env env, HostArray<int64_t>& keys, bool int32Keys) {
  size_t n = keys.size();
  if (!int32Keys) return Napi::BigInt64Array::New(env, n, adoptArray(env, keys), 0);
  HostArray<int32_t> narrow(n);
  for (size_t i = 0; i < n; ++i) narrow[i] = static_cast<int32_t>(keys[i]);
  return Napi::Int32Array::New(env, n, adoptArray(env, narrow), 0);
}

Napi::Value findToJs(Napi::Env env, FindResult& r) {
  Napi::Array out = Napi::Array::New(env, 2);
  out.Set(0u, toFloat32Array(env, r.values));
  out.Set(1u, toUint8Array(env, r.exists));
  return out;
}

Napi::Value exportToJs(Napi::Env env, ExportResult& r, bool int32Keys) {
  Napi::Array out = Napi::Array::New(env, 4);
  out.Set(0u, toKeyArray(env, r.keys, int32Keys));
  out.Set(1u, toFloat32Array(env, r.values));
  Napi::Array slots = Napi::Array::New(env, r.slots.size());
  for (size_t j = 0; j < r.slots.size(); ++j) slots.Set(static_cast<uint32_t>(j), toFloat32Array(env, r.slots[j]));
  out.Set(2u, slots);
  out.Set(3u, toBigUint64Array(env, r.scores));
  return out;
}

NativeFailure currentFailure() {
  NativeFailure f;
  try {
    throw;
  } catch (const EmbedError& e) {
    f.code = errorCodeName(e.code());
    f.name = className(e.code());
    f.message = e.what();
    f.where = e.where();
  } catch (const std::bad_alloc&) {
    f.code = errorCodeName(ErrorCode::kFailedPrecondition);
    f.name = className(ErrorCode::kFailedPrecondition);
    f.message = "Out of memory";
  } catch (const std::exception& e) {
    f.message = std::string("Internal error in the native CPU backend: ") + e.what();
  } catch (...) {
    f.message = "Internal error in the native CPU backend";
  }
  return f;
}

Napi::Error makeJsError(Napi::Env env, const NativeFailure& f, const Napi::Object* stack) {
  Napi::Error err = Napi::Error::New(env, f.message);
  Napi::Object o = err.Value();
  o.Set("code", f.code);
  o.Set("name", f.name);
  if (!f.where.empty()) o.Set("nativeLocation", f.where);
  Napi::Value captured = stack != nullptr ? stack->Get("stack") : o.Get("stack");
  {
    if (captured.IsString()) {
      std::string s = captured.As<Napi::String>().Utf8Value();
      size_t nl = s.find('\n');
      std::string frames = nl == std::string::npos ? "" : s.substr(nl);
      o.Set("stack", f.name + ": " + f.message + frames);
    }
  }
  return err;
}

}  // namespace embedstack
