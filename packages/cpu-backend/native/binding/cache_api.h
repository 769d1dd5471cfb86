#pragma once

#include <napi.h>

namespace embedstack {

/** Adds createCache and the cacheXxx functions (set-associative LRU cache, cache_api.cc) to the addon's exports. */
void registerCacheFunctions(Napi::Env env, Napi::Object exports);

}  // namespace embedstack
