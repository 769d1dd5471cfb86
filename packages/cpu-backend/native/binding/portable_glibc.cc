// Linked only into the prebuilt Linux binaries (EMBEDSTACK_PORTABLE), which carry a
// static libstdc++. That libstdc++ references arc4random (glibc >= 2.36) from
// std::random_device, which this addon never constructs with the "arc4random"
// token; this hidden definition satisfies the reference at link time, so the
// binaries load on glibc >= 2.34 (Ubuntu 22.04, RHEL 9, Amazon Linux 2023).
#include <sys/random.h>

#include <cstdint>

extern "C" __attribute__((visibility("hidden"))) uint32_t arc4random(void) {
  uint32_t v = 0;
  while (getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) {
  }
  return v;
}
