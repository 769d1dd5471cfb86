// The host emulation of a 32-lane cooperative group (see exec.h): one CPU thread
// runs a group, `each` loops over the lanes in order (or in reverse), per-lane values are arrays,
// and the collectives read those arrays. Lanes of a group never run concurrently,
// so `sync` has nothing to wait for. (ES_HD only so that the lambdas of kernel
// bodies, which nvcc compiles for both sides, may index lanes; it runs on the host.)
#pragma once

#include "exec.h"

namespace embedstack {
namespace cuda {

template <class T>
struct HostLanes {
  T v[kLanes];
  ES_HD T& operator[](int lane) { return v[lane]; }
  ES_HD const T& operator[](int lane) const { return v[lane]; }
};

struct HostGroup {
  template <class T>
  using Lanes = HostLanes<T>;
  static constexpr bool kOnDevice = false;

  /** This group's shared memory (the kernel's kSharedBytes), undefined contents at launch. */
  char* shared = nullptr;
  /** Lanes run 31..0 (an emulated device's order option: a warp's lanes have no order). */
  bool reverseLanes = false;

  template <class F>
  ES_HD void each(F&& f) const {
    if (reverseLanes) {
      for (int l = kLanes - 1; l >= 0; --l) f(l);
      return;
    }
    for (int l = 0; l < kLanes; ++l) f(l);
  }
  template <class F>
  ES_HD uint32_t ballot(F&& pred) const {
    uint32_t m = 0;
    for (int l = 0; l < kLanes; ++l) {
      if (pred(l)) m |= 1u << l;
    }
    return m;
  }
  /** Lane `src`'s value, to every lane. */
  template <class T>
  ES_HD T shfl(const Lanes<T>& v, int src) const {
    return v[src];
  }
  /** Lane l gets lane l - delta's value (its own below delta), as __shfl_up_sync. */
  template <class T>
  ES_HD Lanes<T> shflUp(const Lanes<T>& v, int delta) const {
    Lanes<T> r;
    for (int l = 0; l < kLanes; ++l) r[l] = l >= delta ? v[l - delta] : v[l];
    return r;
  }
  /** Lane l gets lane l ^ mask's value, as __shfl_xor_sync. */
  template <class T>
  ES_HD Lanes<T> shflXor(const Lanes<T>& v, int mask) const {
    Lanes<T> r;
    for (int l = 0; l < kLanes; ++l) r[l] = v[l ^ mask];
    return r;
  }
  /** Per lane, the mask of lanes holding the same value (__match_any_sync). */
  ES_HD Lanes<uint32_t> matchAny(const Lanes<uint32_t>& v) const {
    Lanes<uint32_t> r;
    for (int l = 0; l < kLanes; ++l) {
      uint32_t m = 0;
      for (int k = 0; k < kLanes; ++k) {
        if (v[k] == v[l]) m |= 1u << k;
      }
      r[l] = m;
    }
    return r;
  }
  ES_HD void sync() const {}
};

}  // namespace cuda
}  // namespace embedstack
