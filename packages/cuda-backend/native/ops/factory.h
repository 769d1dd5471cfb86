// Builds a CUDA-backend table: validates the config (cpu-backend's
// validateTableConfig, the same checks as every native backend) and places it on
// the host mode or a device.
#pragma once

#include <memory>

#include "device_table.h"

namespace embedstack {
namespace cuda {

std::shared_ptr<Table> createTable(TableConfig config, const Placement& placement);

}  // namespace cuda
}  // namespace embedstack
