// createTable's arguments (config vector laid out by abi.h TableField, slotWidths,
// slotInitial, initValues) parsed and range-checked into a TableConfig, and the
// tagged JS handle of a table. Used by every native backend's addon.
#pragma once

#include <napi.h>

#include <memory>

#include "args.h"
#include "table.h"

namespace embedstack {

/** Arguments 0-3 of createTable as a TableConfig (throws a coded EmbedError naming the bad field). */
TableConfig tableConfigArg(const Napi::CallbackInfo& info);

/** A new tagged External owning `table` (freed by the garbage collector or dispose()). */
Napi::Value tableHandle(Napi::Env env, std::shared_ptr<Table> table);

}  // namespace embedstack
