// Where a table's memory lives and how its kernels run: one Exec per table.
//  - host mode (Exec::host()): "device" memory is host memory, copies are memcpy,
//    kernels run on CPU threads (the shared thread pool) through the host grid
//    launcher, synchronously;
//  - device mode (Exec::device(ordinal), CUDA builds only): memory is HBM (or
//    pinned host memory for spilled rows), copies and kernels are queued on the
//    table's own stream, sync() waits for them;
//  - emulated device (Exec::emulated(options), every build; a test aid): host memory
//    used through the device protocol. Calls stage their inputs and outputs (Stage
//    copies as on a device), copies, frees and kernels are queued and run only when
//    the host waits (sync, toHost), as a stream may run them after the call that
//    queued them returned; the host grid launcher can run items and lanes in reverse
//    order, and an allocation can be made to fail. What the device mode would get
//    wrong on a GPU (host memory gone before a queued copy reads it, a result read
//    before the wait, an order-dependent kernel body, a change made before an
//    allocation that can fail) then shows on the host.
// Every failure throws an EmbedError (out of memory: FAILED_PRECONDITION naming
// what the bytes were for; other CUDA errors: INTERNAL with the CUDA error name).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace embedstack {
namespace cuda {

enum class MemoryKind {
  kDevice,  // HBM (host mode: the host heap)
  kPinned,  // page-locked host memory mapped into the device's address space (hybrid spill)
};

/** What this machine offers (device builds ask the CUDA runtime; host builds say why not). */
struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  size_t totalMemory = 0;
  int computeMajor = 0;
  int computeMinor = 0;
  int multiprocessors = 0;
  bool runsKernels = false;  // has an image (or PTX) of this build's kernels
  std::string why;           // why not (its properties or the kernel probe failed)
};
struct DeviceStatus {
  bool compiled = false;  // built with nvcc (device kernels present)
  bool usable = false;    // at least one device runs this build's kernels
  std::string reason;     // why not usable (empty when usable)
  int runtimeVersion = 0;
  int driverVersion = 0;
  std::string architectures;  // the CMAKE_CUDA_ARCHITECTURES compiled in ("80;90"), empty for host builds
  std::vector<DeviceInfo> devices;  // devices[d] is ordinal d
};
/** Detected once per process (cudaGetDeviceCount and friends; never throws). */
const DeviceStatus& deviceStatus();

/** How an emulated device (Exec::emulated) runs work. */
struct Emulation {
  /** Items of a launch (threads, groups) run from the last to the first. */
  bool reverseItems = false;
  /** A group's lanes run from 31 to 0 in each `each` (a warp gives no order). */
  bool reverseLanes = false;
};

class Exec {
 public:
  /** The host mode (one shared instance). */
  static std::shared_ptr<Exec> host();
  /**
   * CUDA device `ordinal` with a fresh stream. Throws FAILED_PRECONDITION (the reason) when unusable.
   * Its device memory comes from a memory pool of this addon's own (one per device and
   * threshold, shared by the tables that ask for the same), never the device's default pool:
   * that one is the process's, shared with other CUDA libraries. The pool keeps up to
   * `poolReleaseThreshold` bytes of freed memory mapped across stream syncs
   * (cudaMemPoolAttrReleaseThreshold; SIZE_MAX: all), so a call's scratch is not mapped
   * and unmapped again on every call. An allocation that runs out of memory gives the
   * cached memory of this addon's pools on the device back (cudaMemPoolTrimTo) and is
   * tried once more; the last Exec of a pool gives its cache back when it goes. Devices
   * without memory pools use cudaMalloc / cudaFree (no cache); devices that have pools but
   * cannot create one (cudaErrorNotSupported) use the device's current pool (cudaMallocAsync).
   */
  static std::shared_ptr<Exec> device(int ordinal, size_t poolReleaseThreshold);
  /** An emulated device of its own (see the top of this file). */
  static std::shared_ptr<Exec> emulated(const Emulation& options);

  ~Exec();
  Exec(const Exec&) = delete;
  Exec& operator=(const Exec&) = delete;

  bool onDevice() const { return onDevice_; }
  /** Calls copy their inputs in and their outputs out (device mode, emulated device); host mode hands kernels the caller's arrays. */
  bool stages() const { return onDevice_ || emulated_; }
  /** Copies, frees and kernels are queued until the host waits (emulated device). */
  bool deferred() const { return emulated_; }
  const Emulation& emulation() const { return emulation_; }
  /** Queues work of an emulated device (run in order by the next wait). */
  void enqueue(std::function<void()> work);
  /**
   * Emulated device: the allocation `k` allocations from now (0: the next) throws the
   * out-of-memory error of device mode; negative: none. For tests of the "all memory
   * before the first change" rule.
   */
  void failAllocation(long long k);
  /**
   * Emulated device: the kernel launch `k` launches from now (0: the next) throws the
   * INTERNAL error of a launch that failed on a device (the kernel does not run); negative:
   * none. For tests of what a call leaves behind when a launch fails half-way.
   */
  void failLaunch(long long k);
  /** Emulated device: throws when failLaunch's countdown reaches this launch of `kernel`. */
  void emulatedLaunch(const char* kernel);
  int ordinal() const { return ordinal_; }
  /** The cudaStream_t of device mode (null in host mode). */
  void* stream() const { return stream_; }
  /** Multiprocessors of the device (sizes grids); 0 in host mode. */
  int multiprocessors() const { return multiprocessors_; }

  /** Uninitialised memory (nullptr for 0 bytes). */
  void* allocate(size_t bytes, MemoryKind kind, const char* what);
  void release(void* p, MemoryKind kind) noexcept;
  void toDevice(void* dst, const void* src, size_t bytes);
  void toHost(void* dst, const void* src, size_t bytes);
  void copy(void* dst, const void* src, size_t bytes);
  void zero(void* p, size_t bytes);
  /** Waits for everything queued (device mode); then checks for a failed kernel. */
  void sync();
  /** sync() for destructors and error paths: never throws (a failure shows at the next call). */
  void syncQuietly() noexcept;
  /** Throws INTERNAL when the last kernel launch failed (device mode). */
  void checkLaunch(const char* kernel);
  /**
   * Makes this Exec's device current on the calling thread (device mode; a no-op in host
   * mode). Async calls run on the native pool's threads, whose current device is 0 by default:
   * every device path calls it before using the stream.
   */
  void activate() const;

 private:
  Exec() = default;
  /** Emulated device: runs what is queued, in order. */
  void drain();
  bool onDevice_ = false;
  int ordinal_ = -1;
  void* stream_ = nullptr;
  int multiprocessors_ = 0;
  bool memoryPools_ = true;  // device: stream-ordered allocation (cudaMallocAsync) is supported
  void* pool_ = nullptr;     // device with memory pools: the cudaMemPool_t its device memory comes from (null: the device's current pool)
  bool poolHeld_ = false;    // counted as a user of the addon's pool (ordinal_, poolThreshold_), released by ~Exec
  size_t poolThreshold_ = 0;
  bool emulated_ = false;
  Emulation emulation_;
  std::mutex queueMutex_;  // guards queue_
  std::mutex drainMutex_;  // one drain at a time: a wait returns after everything queued before it ran
  std::vector<std::function<void()>> queue_;
  std::atomic<long long> failCountdown_{-1};
  std::atomic<long long> failLaunchCountdown_{-1};
};

}  // namespace cuda
}  // namespace embedstack
