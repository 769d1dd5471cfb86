// Whole-number environment variables the addon reads itself (the pool's threads and idle spin,
// the result cache's cap). The JS loader refuses a bad value before the addon loads
// (src/nativeEnv.ts), so only a caller loading the addon directly gets the fallback.
#pragma once

#include <cstdlib>

namespace embedstack {

/** The whole number `name` holds when it is decimal digits only and in [lo, hi], else `fallback`. */
inline long envWhole(const char* name, long lo, long hi, long fallback) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env < '0' || *env > '9') return fallback;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  return (*end == '\0' && v >= lo && v <= hi) ? v : fallback;
}

}  // namespace embedstack
