#include "factory.h"

#include "dynamic_table.h"
#include "static_table.h"

namespace embedstack {
namespace cuda {

std::shared_ptr<Table> createTable(TableConfig config, const Placement& placement) {
  validateTableConfig(config);
  // Narrow storage (core's storageDtype) is not implemented by the CUDA tables yet; core refuses it
  // before calling here (capabilities().storageDtypes), this guards direct addon calls.
  ES_CHECK(config.storage == StorageDtype::kFloat32, kUnsupported,
           "Expected storageDtype 'float32' (the CUDA backend stores float32 only) but received '"
               << storageName(config.storage) << "'");
  std::shared_ptr<Exec> ex = placement.device     ? Exec::device(placement.ordinal, placement.poolReleaseThreshold)
                            : placement.emulated ? Exec::emulated(placement.emulation)
                                                 : Exec::host();
  if (config.isStatic) return std::make_shared<StaticTable>(std::move(config), std::move(ex), placement);
  return std::make_shared<DynamicTable>(std::move(config), std::move(ex), placement);
}

}  // namespace cuda
}  // namespace embedstack
