#include "scores.h"

#include <chrono>

namespace embedstack {

uint64_t nowSeconds() {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch());
  long long v = ms.count();
  return v <= 0 ? 0 : static_cast<uint64_t>(v / 1000);
}

}  // namespace embedstack
