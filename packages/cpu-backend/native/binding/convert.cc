#include "convert.h"

#include <cstdint>
#include <cstring>
#include <new>

namespace embedstack {

namespace {

// A result block offered to an external ArrayBuffer. Node-API may call the buffer's
// finalizer while napi_create_external_arraybuffer fails, not only once the buffer is
// collected: Node 20 makes the buffer with node::Buffer::New, which refuses more than
// buffer.constants.MAX_LENGTH bytes (4 GiB) and calls the finalizer at once, before
// returning the error; a buffer that failed later in its making calls it when collected.
// So the finalizer frees the block only once the buffer exists (kOwned); a call during or
// after a failed creation leaves the block to adopt(), which copies it and frees it itself.
struct Adoption {
  enum State { kCreating, kOwned, kCalledWhileCreating, kRefused };
  ResultBlock block;
  State state = kCreating;
};

// The finalizer of a result's ArrayBuffer (JS thread): the block goes back to the result
// cache (memory.h) once the buffer owned it.
void freeBlock(napi_env, void*, void* hint) {
  auto* a = static_cast<Adoption*>(hint);
  switch (a->state) {
    case Adoption::kOwned:
      resultFree(a->block.p, a->block.bytes);
      delete a;
      return;
    case Adoption::kCreating:
      a->state = Adoption::kCalledWhileCreating;  // adopt() still holds the block, and a
      return;
    case Adoption::kRefused:
      delete a;  // a late call after a failed creation: adopt() copied and freed the block
      return;
    case Adoption::kCalledWhileCreating:
      return;  // not called twice
  }
}

// Takes ownership of a result block and returns an ArrayBuffer of its first `bytes`.
Napi::ArrayBuffer adopt(Napi::Env env, ResultBlock block, size_t bytes) {
  if (block.p == nullptr || bytes == 0) {
    resultFree(block.p, block.bytes);
    return Napi::ArrayBuffer::New(env, 0);
  }
  Adoption* a;
  try {
    a = new Adoption{block};
  } catch (...) {
    resultFree(block.p, block.bytes);
    throw;
  }
  napi_value ab;
  napi_status s = napi_create_external_arraybuffer(env, block.p, bytes, freeBlock, a, &ab);
  if (s == napi_ok) {
    a->state = Adoption::kOwned;
    return Napi::ArrayBuffer(env, ab);
  }
  // Refused (more than Node makes external, or the runtime forbids external buffers): the
  // block is still ours; copy it into a V8-owned buffer. Only a failure in the buffer's own
  // making (napi_generic_failure) may have registered the finalizer, to run now (done) or
  // when collected (it then only deletes `a`); any other status returned before registering it.
  if (a->state == Adoption::kCalledWhileCreating || s != napi_generic_failure) delete a;
  else a->state = Adoption::kRefused;
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
