// The execution layer's portable core: what kernel bodies (kernels/*.cuh) may use
// whether they run as CUDA kernels on the device or on CPU threads in host mode.
//
//  - ES_HD functions (cpu-backend's hd.h): compiled for the host and, under nvcc,
//    for the device too.
//  - Atomics, bit tricks and relaxed loads below: CUDA intrinsics inside device
//    code (__CUDA_ARCH__), GCC builtins on the host.
//  - A cooperative group of kLanes = 32 lanes (group_host.h / group_device.cuh):
//    per-lane values live in `G::Lanes<T>`, per-lane work runs in `g.each(f)`,
//    and the collectives (ballot, shuffles, matchAny, sync) emulate a warp on the
//    host. Code outside `each` must be group-uniform and side-effect free (on the
//    device every lane runs it, on the host it runs once per group).
#pragma once

#include <cstddef>
#include <cstdint>

#include "hd.h"

namespace embedstack {
namespace cuda {

constexpr int kLanes = 32;
constexpr uint32_t kNoRow = 0xffffffffu;

ES_HD inline int popc32(uint32_t x) {
#ifdef __CUDA_ARCH__
  return __popc(x);
#else
  return __builtin_popcount(x);
#endif
}

/** Index of the lowest set bit (x != 0). */
ES_HD inline int lowestBit(uint32_t x) {
#ifdef __CUDA_ARCH__
  return __ffs(static_cast<int>(x)) - 1;
#else
  return __builtin_ctz(x);
#endif
}

/** Index of the highest set bit (x != 0). */
ES_HD inline int highestBit(uint32_t x) {
#ifdef __CUDA_ARCH__
  return 31 - __clz(static_cast<int>(x));
#else
  return 31 - __builtin_clz(x);
#endif
}

ES_HD inline uint32_t atomicAddU32(uint32_t* p, uint32_t v) {
#ifdef __CUDA_ARCH__
  return atomicAdd(p, v);
#else
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
#endif
}

ES_HD inline uint32_t atomicOrU32(uint32_t* p, uint32_t v) {
#ifdef __CUDA_ARCH__
  return atomicOr(p, v);
#else
  return __atomic_fetch_or(p, v, __ATOMIC_RELAXED);
#endif
}

ES_HD inline uint32_t atomicAndU32(uint32_t* p, uint32_t v) {
#ifdef __CUDA_ARCH__
  return atomicAnd(p, v);
#else
  return __atomic_fetch_and(p, v, __ATOMIC_RELAXED);
#endif
}

ES_HD inline uint32_t atomicMinU32(uint32_t* p, uint32_t v) {
#ifdef __CUDA_ARCH__
  return atomicMin(p, v);
#else
  uint32_t old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
#endif
}

ES_HD inline uint32_t atomicMaxU32(uint32_t* p, uint32_t v) {
#ifdef __CUDA_ARCH__
  return atomicMax(p, v);
#else
  uint32_t old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (v > old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
#endif
}

/** Compare-and-swap; returns the value seen (== expected on success). */
ES_HD inline uint32_t atomicCasU32(uint32_t* p, uint32_t expected, uint32_t desired) {
#ifdef __CUDA_ARCH__
  return atomicCAS(p, expected, desired);
#else
  __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return expected;
#endif
}

ES_HD inline uint64_t atomicCasU64(uint64_t* p, uint64_t expected, uint64_t desired) {
#ifdef __CUDA_ARCH__
  return atomicCAS(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(expected),
                   static_cast<unsigned long long>(desired));
#else
  __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return expected;
#endif
}

/** A word other threads of the same launch may be changing (no stale cached copy). */
ES_HD inline uint32_t loadRelaxedU32(const uint32_t* p) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const volatile uint32_t*>(p);
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

ES_HD inline uint64_t loadRelaxedU64(const uint64_t* p) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const volatile uint64_t*>(p);
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

ES_HD inline void storeRelaxedU64(uint64_t* p, uint64_t v) {
#ifdef __CUDA_ARCH__
  *reinterpret_cast<volatile uint64_t*>(p) = v;
#else
  __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}

/** Lanes below `lane` (for ranks inside a ballot mask). */
ES_HD inline uint32_t lanesBelow(int lane) {
  return lane == 0 ? 0u : (0xffffffffu >> (32 - lane));
}

}  // namespace cuda
}  // namespace embedstack
