// The CPU backend's table factory (kept apart from table.cc, whose Table base and
// config checks the CUDA backend also builds on).
#include "dynamic_table.h"
#include "static_table.h"

namespace embedstack {

std::shared_ptr<Table> createTable(TableConfig c) {
  validateTableConfig(c);
  if (c.isStatic) return std::make_shared<StaticTable>(std::move(c));
  return std::make_shared<DynamicTable>(std::move(c));
}

}  // namespace embedstack
