// Launching a kernel body (kernels/*.cuh) on the table's Exec: as a CUDA kernel on
// its stream in device mode, or by the host grid launcher on CPU threads (the
// shared thread pool) in host mode. The same body runs in both places.
//
// A kernel is a struct K with `struct Args` (plain pointers and numbers) and
//  - thread kernels: `ES_HD static void thread(const Args&, size_t i)`, run for
//    every i in [0, n) (grid-stride on the device);
//  - group kernels: `template <class G> ES_HD static void group(G&, const Args&,
//    size_t item)`, run by one 32-lane group per item, with `K::kSharedBytes` of
//    group-private shared memory at `g.shared` (4 groups per 128-thread block on
//    the device).
// Host launches finish before returning; device launches are queued (Exec::sync
// waits), and so are an emulated device's (runtime.h), which run each launch's items
// one after the other in the order its Emulation asks for. Launch failures throw
// through Exec::checkLaunch.
#pragma once

#include <cstddef>
#include <memory>

#include "exec.h"
#include "group_device.cuh"
#include "group_host.h"
#include "runtime.h"
#include "thread_pool.h"

// Kernel bodies are ES_HD templates instantiated for one side only (HostGroup on
// the host, DeviceGroup on the device): silence nvcc's cross-side call check.
#if defined(__CUDACC__)
#define ES_KERNEL_BODY _Pragma("nv_exec_check_disable")
#else
#define ES_KERNEL_BODY
#endif

namespace embedstack {
namespace cuda {

constexpr int kThreadBlock = 256;
constexpr int kGroupBlock = 128;
constexpr int kGroupsPerBlock = kGroupBlock / kLanes;
/** Host launches below this many threads (items * 32 for groups) run on the calling thread. */
constexpr size_t kHostParallelWork = 1 << 15;

#if defined(__CUDACC__)

template <class K>
__global__ void __launch_bounds__(kThreadBlock) threadKernel(typename K::Args a, size_t n) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) K::thread(a, i);
}

template <class K>
__global__ void __launch_bounds__(kGroupBlock) groupKernel(typename K::Args a, size_t items) {
  extern __shared__ __align__(16) char sharedMemory[];
  DeviceGroup g;
  const size_t groupInBlock = threadIdx.x / kLanes;
  g.shared = sharedMemory + groupInBlock * K::kSharedBytes;
  const size_t stride = static_cast<size_t>(gridDim.x) * kGroupsPerBlock;
  for (size_t item = static_cast<size_t>(blockIdx.x) * kGroupsPerBlock + groupInBlock; item < items; item += stride) {
    K::group(g, a, item);
  }
}

inline unsigned gridFor(const Exec& ex, size_t units, int perBlock, int blocksPerSm) {
  const size_t wanted = (units + static_cast<size_t>(perBlock) - 1) / static_cast<size_t>(perBlock);
  const size_t cap = static_cast<size_t>(ex.multiprocessors() > 0 ? ex.multiprocessors() : 1) * blocksPerSm;
  return static_cast<unsigned>(wanted < cap ? wanted : cap);
}

#endif

/** Runs K::thread for every i in [0, n). */
template <class K>
void launchThreads(Exec& ex, size_t n, const typename K::Args& a) {
  if (n == 0) return;
#if defined(__CUDACC__)
  if (ex.onDevice()) {
    ex.activate();
    threadKernel<K><<<gridFor(ex, n, kThreadBlock, 8), kThreadBlock, 0, static_cast<cudaStream_t>(ex.stream())>>>(a, n);
    ex.checkLaunch(K::kName);
    return;
  }
#endif
  if (ex.deferred()) {
    ex.emulatedLaunch(K::kName);
    ex.enqueue([a, n, reverse = ex.emulation().reverseItems] {
      for (size_t k = 0; k < n; ++k) K::thread(a, reverse ? n - 1 - k : k);
    });
    return;
  }
  auto run = [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) K::thread(a, i);
  };
  if (n < kHostParallelWork) {
    run(0, n);
  } else {
    ThreadPool::shared().parallelFor(n, parallelGrain(n, 4096), run);
  }
}

/** Runs K::group for every item in [0, items), one 32-lane group each. */
template <class K>
void launchGroups(Exec& ex, size_t items, const typename K::Args& a) {
  if (items == 0) return;
#if defined(__CUDACC__)
  if (ex.onDevice()) {
    ex.activate();
    groupKernel<K><<<gridFor(ex, items, kGroupsPerBlock, 16), kGroupBlock, kGroupsPerBlock * K::kSharedBytes,
                     static_cast<cudaStream_t>(ex.stream())>>>(a, items);
    ex.checkLaunch(K::kName);
    return;
  }
#endif
  if (ex.deferred()) {
    ex.emulatedLaunch(K::kName);
    ex.enqueue([a, items, order = ex.emulation()] {
      std::unique_ptr<char[]> shared(K::kSharedBytes > 0 ? new char[K::kSharedBytes] : nullptr);
      HostGroup g;
      g.shared = shared.get();
      g.reverseLanes = order.reverseLanes;
      for (size_t k = 0; k < items; ++k) K::group(g, a, order.reverseItems ? items - 1 - k : k);
    });
    return;
  }
  auto run = [&](size_t b, size_t e) {
    std::unique_ptr<char[]> shared(K::kSharedBytes > 0 ? new char[K::kSharedBytes] : nullptr);
    HostGroup g;
    g.shared = shared.get();
    for (size_t item = b; item < e; ++item) K::group(g, a, item);
  };
  if (items * kLanes < kHostParallelWork) {
    run(0, items);
  } else {
    ThreadPool::shared().parallelFor(items, parallelGrain(items, 64), run);
  }
}

}  // namespace cuda
}  // namespace embedstack
