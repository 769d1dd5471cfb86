// Exec and device detection. Host mode is plain C++; the device paths (CUDA runtime
// API, C only) exist in builds with EMBEDSTACK_WITH_CUDA.
#include "runtime.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <utility>

#include "errors.h"

#if defined(EMBEDSTACK_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace embedstack {
namespace cuda {

#if defined(EMBEDSTACK_WITH_CUDA)
// exec/probe.cu: whether device `ordinal` has an image (or PTX) of this build's kernels.
bool deviceRunsKernels(int ordinal, std::string& why);
#endif

namespace {

#if defined(EMBEDSTACK_WITH_CUDA)

std::string describeCuda(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

void checkCuda(cudaError_t e, const std::string& what, const char* file, int line) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so that later calls work
  std::ostringstream s;
  s << "CUDA error " << describeCuda(e) << " while " << what;
  throw EmbedError(e == cudaErrorMemoryAllocation ? ErrorCode::kFailedPrecondition : ErrorCode::kInternal, s.str(),
                   file, line);
}
#define ES_CUDA(call, what) checkCuda((call), (what), __FILE__, __LINE__)

cudaStream_t streamOf(void* s) {
  return static_cast<cudaStream_t>(s);
}

// This addon's memory pools: one per (device, release threshold), created on first use and
// kept for the process (a handful at most; a pool with live allocations cannot be destroyed).
// A pool is trimmed to 0 when its last table goes (~Exec): the cache it kept is then given
// back to the driver, for other CUDA libraries of the process too.
struct PoolEntry {
  cudaMemPool_t pool = nullptr;  // null: the device cannot create pools (the device's current pool is used)
  size_t users = 0;              // live Execs allocating from it
};
struct Pools {
  std::mutex mutex;
  std::map<std::pair<int, size_t>, PoolEntry> byKey;
};
Pools& pools() {
  static Pools* p = new Pools();  // never destroyed: tables may free into a pool at exit
  return *p;
}

/**
 * The pool of (ordinal, threshold), created on first use, one user more. Null when the device
 * does not support creating pools (cudaMemPoolCreate: cudaErrorNotSupported): its allocations
 * then come from the device's current pool (cudaMallocAsync), as before the addon had its own.
 */
cudaMemPool_t acquirePool(int ordinal, size_t threshold) {
  Pools& all = pools();
  std::lock_guard<std::mutex> lock(all.mutex);
  const auto key = std::make_pair(ordinal, threshold);
  auto it = all.byKey.find(key);
  if (it != all.byKey.end()) {
    ++it->second.users;
    return it->second.pool;
  }
  cudaMemPoolProps props;
  std::memset(&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = ordinal;
  cudaMemPool_t pool = nullptr;
  const cudaError_t created = cudaMemPoolCreate(&pool, &props);
  if (created == cudaErrorNotSupported) {
    cudaGetLastError();
    all.byKey.emplace(key, PoolEntry{nullptr, 1});
    return nullptr;
  }
  ES_CUDA(created, "creating a memory pool on device " + std::to_string(ordinal));
  uint64_t keep = threshold == SIZE_MAX ? ~uint64_t{0} : static_cast<uint64_t>(threshold);  // cuuint64_t
  const cudaError_t e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
  if (e != cudaSuccess) {
    cudaMemPoolDestroy(pool);
    ES_CUDA(e, "setting the memory pool's release threshold");
  }
  all.byKey.emplace(key, PoolEntry{pool, 1});
  return pool;
}

/** One user less; the last one gives the pool's cached memory back to the driver. Never throws. */
void releasePool(int ordinal, size_t threshold) noexcept {
  Pools& all = pools();
  std::lock_guard<std::mutex> lock(all.mutex);
  auto it = all.byKey.find(std::make_pair(ordinal, threshold));
  if (it == all.byKey.end() || it->second.users == 0) return;
  if (--it->second.users == 0 && it->second.pool) cudaMemPoolTrimTo(it->second.pool, 0);
  cudaGetLastError();  // an ignored error is not for the next launch check to report
}

/** Gives the cached (freed, still mapped) memory of this addon's pools on `ordinal` back to the driver. */
void trimPools(int ordinal) noexcept {
  Pools& all = pools();
  std::lock_guard<std::mutex> lock(all.mutex);
  for (const auto& [key, entry] : all.byKey) {
    if (key.first == ordinal && entry.pool) cudaMemPoolTrimTo(entry.pool, 0);
  }
  cudaGetLastError();
}

std::string driverReason(cudaError_t e, const DeviceStatus& s) {
  std::ostringstream r;
  r << "cudaGetDeviceCount failed with " << describeCuda(e) << ": ";
  if (e == cudaErrorInsufficientDriver || s.driverVersion == 0) {
    r << (s.driverVersion == 0 ? "no NVIDIA driver is installed" : "the NVIDIA driver is older than this build's CUDA runtime")
      << " (runtime " << s.runtimeVersion / 1000 << "." << (s.runtimeVersion % 1000) / 10
      << "); install or update the NVIDIA driver, or run the host mode (backend 'cuda-host')";
  } else if (e == cudaErrorNoDevice) {
    r << "no CUDA-capable device is visible (check CUDA_VISIBLE_DEVICES)";
  } else {
    r << "the CUDA runtime cannot use this machine's GPUs";
  }
  return r.str();
}

#endif

DeviceStatus detect() {
  DeviceStatus s;
#if defined(EMBEDSTACK_WITH_CUDA)
  s.compiled = true;
  s.architectures = EMBEDSTACK_CUDA_ARCHITECTURES;
  cudaRuntimeGetVersion(&s.runtimeVersion);
  cudaDriverGetVersion(&s.driverVersion);
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    s.reason = driverReason(e, s);
    return s;
  }
  if (count == 0) {
    s.reason = "no CUDA-capable device is visible (cudaGetDeviceCount returned 0; check CUDA_VISIBLE_DEVICES)";
    return s;
  }
  std::string why;
  for (int d = 0; d < count; ++d) {
    DeviceInfo info;
    info.ordinal = d;  // an entry per ordinal, even when its properties fail: devices[d] stays device d
    cudaDeviceProp p;
    const cudaError_t pe = cudaGetDeviceProperties(&p, d);
    if (pe != cudaSuccess) {
      cudaGetLastError();
      info.name = "(unknown)";
      info.why = "device " + std::to_string(d) + ": cudaGetDeviceProperties failed with " + describeCuda(pe);
    } else {
      info.name = p.name;
      info.totalMemory = p.totalGlobalMem;
      info.computeMajor = p.major;
      info.computeMinor = p.minor;
      info.multiprocessors = p.multiProcessorCount;
      info.runsKernels = deviceRunsKernels(d, info.why);
    }
    if (info.runsKernels) {
      s.usable = true;
    } else if (why.empty()) {
      why = info.why;
    }
    s.devices.push_back(info);
  }
  if (!s.usable) {
    s.reason = "no device runs this build's kernels (compiled for architectures " + s.architectures + "): " + why +
               "; rebuild with EMBEDSTACK_CUDA_ARCHITECTURES set to your GPU's (e.g. 86)";
  }
#else
  s.reason =
      "@embedstack/cuda-backend was built without nvcc (host mode only): install the CUDA toolkit (nvcc) and run "
      "`pnpm --filter @embedstack/cuda-backend rebuild`; the host mode runs as backend 'cuda-host'";
#endif
  return s;
}

void* hostAllocate(size_t bytes, const char* what) {
  void* p = std::malloc(bytes);
  if (!p) throwOutOfMemory(bytes, what, __FILE__, __LINE__);
  return p;
}

}  // namespace

const DeviceStatus& deviceStatus() {
  static const DeviceStatus status = detect();
  return status;
}

std::shared_ptr<Exec> Exec::host() {
  static const std::shared_ptr<Exec> instance(new Exec());
  return instance;
}

std::shared_ptr<Exec> Exec::emulated(const Emulation& options) {
  std::shared_ptr<Exec> ex(new Exec());
  ex->emulated_ = true;
  ex->emulation_ = options;
  return ex;
}

void Exec::enqueue(std::function<void()> work) {
  std::lock_guard<std::mutex> lock(queueMutex_);
  queue_.push_back(std::move(work));
}

void Exec::drain() {
  std::lock_guard<std::mutex> one(drainMutex_);
  for (;;) {
    std::vector<std::function<void()>> work;
    {
      std::lock_guard<std::mutex> lock(queueMutex_);
      work.swap(queue_);
    }
    if (work.empty()) return;
    for (std::function<void()>& w : work) w();
  }
}

void Exec::failAllocation(long long k) {
  failCountdown_.store(k < 0 ? -1 : k, std::memory_order_relaxed);
}

void Exec::failLaunch(long long k) {
  failLaunchCountdown_.store(k < 0 ? -1 : k, std::memory_order_relaxed);
}

void Exec::emulatedLaunch(const char* kernel) {
  if (failLaunchCountdown_.load(std::memory_order_relaxed) >= 0 &&
      failLaunchCountdown_.fetch_sub(1, std::memory_order_relaxed) == 0) {
    ES_FAIL(kInternal, "CUDA error cudaErrorLaunchFailure (unspecified launch failure) while launching "
                           << kernel << " (emulated device: an injected failure)");
  }
}

void* Exec::allocate(size_t bytes, MemoryKind kind, const char* what) {
  if (bytes == 0) return nullptr;
  if (emulated_ && failCountdown_.load(std::memory_order_relaxed) >= 0 &&
      failCountdown_.fetch_sub(1, std::memory_order_relaxed) == 0) {
    ES_FAIL(kFailedPrecondition, "CUDA error cudaErrorMemoryAllocation (out of memory) while allocating "
                                     << bytes << " bytes for " << what << " (emulated device: an injected failure)");
  }
  if (!onDevice_) return hostAllocate(bytes, what);
#if defined(EMBEDSTACK_WITH_CUDA)
  activate();
  void* p = nullptr;
  const std::string doing = "allocating " + std::to_string(bytes) + " bytes for " + what;
  if (kind == MemoryKind::kDevice) {
    if (memoryPools_) {
      cudaMemPool_t pool = static_cast<cudaMemPool_t>(pool_);
      const auto attempt = [&] {
        return pool ? cudaMallocFromPoolAsync(&p, bytes, pool, streamOf(stream_))
                    : cudaMallocAsync(&p, bytes, streamOf(stream_));
      };
      cudaError_t e = attempt();
      if (e == cudaErrorMemoryAllocation) {
        // Memory this addon's pools keep cached (up to their thresholds) may be what is missing:
        // wait for this stream's frees, give the cache back, and try once more.
        cudaGetLastError();
        cudaStreamSynchronize(streamOf(stream_));
        trimPools(ordinal_);  // clears the last error: the sync's is not the retry's (a sticky one comes back)
        e = attempt();
      }
      ES_CUDA(e, doing);
    } else {
      ES_CUDA(cudaMalloc(&p, bytes), doing);
    }
  } else {
    ES_CUDA(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable), doing);
  }
  return p;
#else
  (void)kind;
  return nullptr;
#endif
}

void Exec::release(void* p, MemoryKind kind) noexcept {
  if (!p) return;
  if (emulated_) {
    // As cudaFreeAsync: after the work queued before it (pinned memory: cudaFreeHost waits).
    if (kind == MemoryKind::kDevice) {
      try {
        enqueue([p] { std::free(p); });
        return;
      } catch (...) {
      }
    }
    syncQuietly();
    std::free(p);
    return;
  }
  if (!onDevice_) {
    std::free(p);
    return;
  }
#if defined(EMBEDSTACK_WITH_CUDA)
  cudaSetDevice(ordinal_);
  if (kind == MemoryKind::kDevice && memoryPools_) {
    cudaFreeAsync(p, streamOf(stream_));
  } else if (kind == MemoryKind::kDevice) {
    cudaStreamSynchronize(streamOf(stream_));  // queued kernels may still use it (cudaFree would wait for the device anyway)
    cudaFree(p);
  } else {
    cudaStreamSynchronize(streamOf(stream_));  // queued kernels may still read it
    cudaFreeHost(p);
  }
  // The errors of these calls are ignored (a free cannot fail the call): the runtime keeps the
  // last one for cudaGetLastError, where the next launch check would report it as its own.
  cudaGetLastError();
#else
  (void)kind;
#endif
}

void Exec::toDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (emulated_) {  // a copy from pageable memory may run after the call returned
    enqueue([dst, src, bytes] { std::memcpy(dst, src, bytes); });
    return;
  }
  if (!onDevice_) {
    std::memcpy(dst, src, bytes);
    return;
  }
#if defined(EMBEDSTACK_WITH_CUDA)
  activate();
  ES_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, streamOf(stream_)), "copying to the device");
#endif
}

void Exec::toHost(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (emulated_) drain();
  if (!onDevice_) {
    std::memcpy(dst, src, bytes);
    return;
  }
#if defined(EMBEDSTACK_WITH_CUDA)
  activate();
  ES_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, streamOf(stream_)), "copying to the host");
  ES_CUDA(cudaStreamSynchronize(streamOf(stream_)), "copying to the host");
#endif
}

void Exec::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (emulated_) {
    enqueue([dst, src, bytes] { std::memmove(dst, src, bytes); });
    return;
  }
  if (!onDevice_) {
    std::memmove(dst, src, bytes);
    return;
  }
#if defined(EMBEDSTACK_WITH_CUDA)
  activate();
  ES_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, streamOf(stream_)), "copying on the device");
#endif
}

void Exec::zero(void* p, size_t bytes) {
  if (bytes == 0) return;
  if (emulated_) {
    enqueue([p, bytes] { std::memset(p, 0, bytes); });
    return;
  }
  if (!onDevice_) {
    std::memset(p, 0, bytes);
    return;
  }
#if defined(EMBEDSTACK_WITH_CUDA)
  activate();
  ES_CUDA(cudaMemsetAsync(p, 0, bytes, streamOf(stream_)), "clearing device memory");
#endif
}

void Exec::sync() {
  if (emulated_) drain();
#if defined(EMBEDSTACK_WITH_CUDA)
  if (!onDevice_) return;
  activate();
  ES_CUDA(cudaStreamSynchronize(streamOf(stream_)), "running kernels");
#endif
}

void Exec::syncQuietly() noexcept {
  if (emulated_) {
    try {
      drain();
    } catch (...) {
    }
    return;
  }
#if defined(EMBEDSTACK_WITH_CUDA)
  if (!onDevice_) return;
  cudaSetDevice(ordinal_);
  cudaStreamSynchronize(streamOf(stream_));
  cudaGetLastError();  // a non-sticky error is for the next call to see, not this destructor
#endif
}

void Exec::activate() const {
#if defined(EMBEDSTACK_WITH_CUDA)
  if (onDevice_) ES_CUDA(cudaSetDevice(ordinal_), "selecting device " + std::to_string(ordinal_));
#endif
}

void Exec::checkLaunch(const char* kernel) {
#if defined(EMBEDSTACK_WITH_CUDA)
  if (onDevice_) ES_CUDA(cudaGetLastError(), std::string("launching ") + kernel);
#else
  (void)kernel;
#endif
}

#if defined(EMBEDSTACK_WITH_CUDA)

std::shared_ptr<Exec> Exec::device(int ordinal, size_t poolReleaseThreshold) {
  const DeviceStatus& s = deviceStatus();
  ES_CHECK(s.usable, kFailedPrecondition, "Expected a usable CUDA device but " << s.reason);
  ES_CHECK(ordinal >= 0 && static_cast<size_t>(ordinal) < s.devices.size(), kInvalidArgument,
           "Expected device to be an ordinal in [0, " << s.devices.size() << ") but received " << ordinal);
  std::shared_ptr<Exec> ex(new Exec());
  ex->onDevice_ = true;
  ex->ordinal_ = ordinal;
  const DeviceInfo& d = s.devices[static_cast<size_t>(ordinal)];
  // With several GPUs another one may be the usable one: this one's kernels would fail at their first launch.
  ES_CHECK(d.runsKernels, kFailedPrecondition,
           "Expected CUDA device " << ordinal << " to run this build's kernels (compiled for architectures "
                                   << s.architectures << ") but " << d.why
                                   << "; rebuild with EMBEDSTACK_CUDA_ARCHITECTURES including its architecture");
  ex->multiprocessors_ = d.multiprocessors;
  ES_CUDA(cudaSetDevice(ordinal), "selecting the device");
  // Stream-ordered allocation needs memory pools (absent on some virtualised GPUs and old drivers).
  int poolsSupported = 0;
  ES_CUDA(cudaDeviceGetAttribute(&poolsSupported, cudaDevAttrMemoryPoolsSupported, ordinal), "asking for memory pool support");
  ex->memoryPools_ = poolsSupported != 0;
  if (ex->memoryPools_) {
    ex->pool_ = acquirePool(ordinal, poolReleaseThreshold);
    ex->poolHeld_ = true;
    ex->poolThreshold_ = poolReleaseThreshold;
  }
  cudaStream_t stream;
  ES_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "creating a stream");
  ex->stream_ = stream;
  return ex;
}

Exec::~Exec() {
  if (emulated_) syncQuietly();
  if (!onDevice_) return;
  cudaSetDevice(ordinal_);
  if (stream_) {
    cudaStreamSynchronize(streamOf(stream_));  // the table's frees are done (and seen): trimmable
    cudaStreamDestroy(streamOf(stream_));
  }
  if (poolHeld_) releasePool(ordinal_, poolThreshold_);
  cudaGetLastError();
}

#else

std::shared_ptr<Exec> Exec::device(int, size_t) {
  ES_FAIL(kFailedPrecondition, "Expected a usable CUDA device but " << deviceStatus().reason);
}

Exec::~Exec() {
  if (emulated_) syncQuietly();
}

#endif

}  // namespace cuda
}  // namespace embedstack
