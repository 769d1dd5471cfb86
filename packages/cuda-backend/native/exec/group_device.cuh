// The device side of the 32-lane cooperative group (see exec.h): a warp. Each
// thread is one lane, `each` runs its own lane's body, per-lane values are plain
// registers and the collectives are warp intrinsics over the full mask (kernels
// keep control flow group-uniform around them).
#pragma once

#include "exec.h"

#if defined(__CUDACC__)

namespace embedstack {
namespace cuda {

template <class T>
struct DeviceLanes {
  T v;
  ES_HD T& operator[](int) { return v; }
  ES_HD const T& operator[](int) const { return v; }
};

struct DeviceGroup {
  template <class T>
  using Lanes = DeviceLanes<T>;
  static constexpr bool kOnDevice = true;
  static constexpr unsigned kAll = 0xffffffffu;

  char* shared = nullptr;

  __device__ static int lane() { return static_cast<int>(threadIdx.x & 31u); }

  template <class F>
  __device__ void each(F&& f) const {
    f(lane());
  }
  template <class F>
  __device__ uint32_t ballot(F&& pred) const {
    return __ballot_sync(kAll, pred(lane()) ? 1 : 0);
  }
  template <class T>
  __device__ T shfl(const Lanes<T>& v, int src) const {
    return __shfl_sync(kAll, v.v, src);
  }
  template <class T>
  __device__ Lanes<T> shflUp(const Lanes<T>& v, int delta) const {
    return Lanes<T>{__shfl_up_sync(kAll, v.v, delta)};
  }
  template <class T>
  __device__ Lanes<T> shflXor(const Lanes<T>& v, int mask) const {
    return Lanes<T>{__shfl_xor_sync(kAll, v.v, mask)};
  }
  __device__ Lanes<uint32_t> matchAny(const Lanes<uint32_t>& v) const {
    return Lanes<uint32_t>{__match_any_sync(kAll, v.v)};
  }
  __device__ void sync() const { __syncwarp(); }
};

}  // namespace cuda
}  // namespace embedstack

#endif
