// Native results and errors -> JS values. Result buffers are handed to JS without
// a copy (external ArrayBuffers freed by their finalizer), or copied when the
// runtime forbids external buffers.
#pragma once

#include <napi.h>

#include <exception>
#include <string>

#include "errors.h"
#include "table.h"

namespace embedstack {

Napi::Float32Array toFloat32Array(Napi::Env env, HostArray<float>& a);
Napi::Uint8Array toUint8Array(Napi::Env env, HostArray<uint8_t>& a);
Napi::BigUint64Array toBigUint64Array(Napi::Env env, HostArray<uint64_t>& a);
/** Keys in the table's dtype: BigInt64Array, or Int32Array for int32 tables. */
Napi::Value toKeyArray(Napi::Env env, HostArray<int64_t>& keys, bool int32Keys);

/** The result cache's counts (memory.h): { capBytes, heldBytes, heldBlocks, hits, misses } (the addons' info().resultCache). */
Napi::Object resultCacheToJs(Napi::Env env);
/** clearResultCache() -> bytes of idle result blocks given back to the system (both addons export it). */
Napi::Value clearResultCacheFn(const Napi::CallbackInfo& info);

/** [values, exists] */
Napi::Value findToJs(Napi::Env env, FindResult& r);
/** [keys, values, slots[], scores] */
Napi::Value exportToJs(Napi::Env env, ExportResult& r, bool int32Keys);

/** A native failure, as plain data (safe to carry across threads). */
struct NativeFailure {
  std::string code = "INTERNAL";
  std::string name = "InternalError";
  std::string message;
  std::string where;
};
/** Classifies the exception being handled (EmbedError, bad_alloc, std::exception, other). */
NativeFailure currentFailure();
/**
 * A JS Error with `code` (core's ErrorCodes), `name` and `nativeLocation`
 * (file:line of the failed check). When `stack` is given (captured before going
 * async), it becomes the error's stack below the message line.
 */
Napi::Error makeJsError(Napi::Env env, const NativeFailure& f, const Napi::Object* stack = nullptr);

}  // namespace embedstack
