#pragma once

#include <napi.h>

namespace embedstack {

/** Adds find/findAsync, upsert/upsertAsync, ... size, dispose to the addon's exports. */
void registerTableFunctions(Napi::Env env, Napi::Object exports);

}  // namespace embedstack
