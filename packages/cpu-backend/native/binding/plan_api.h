#pragma once

#include <napi.h>

namespace embedstack {

/** Adds findPlanned, lookupCombinedPartial, lookupCombinedBackward, applyCombinedGradients, ... to the addon's exports. */
void registerPlanFunctions(Napi::Env env, Napi::Object exports);

}  // namespace embedstack
