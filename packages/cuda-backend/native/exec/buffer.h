// Per-call scratch and staging in a table's memory space (Exec):
//  - DeviceArray<T>: an owned array in device memory (host memory in host mode);
//  - Stage: the inputs and outputs of one call. In host mode `in`/`out` hand the
//    caller's own host pointers to the kernels (no copy); in device mode (and on an
//    emulated device) they copy inputs to device buffers and, at finish(), results
//    back to the caller's arrays. A copy from host memory may still be queued when
//    the call that asked for it returns (CUDA: pageable copies only "might be"
//    synchronous), so host data the Stage builds itself is kept by the Stage
//    (`inCopy`), and a Stage that ends before finish() (an error) waits for its
//    stream: the caller's arrays are not read after the call returned.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "memory.h"
#include "runtime.h"

namespace embedstack {
namespace cuda {

template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(Exec& ex, size_t n, const char* what, MemoryKind kind = MemoryKind::kDevice) { reset(ex, n, what, kind); }
  ~DeviceArray() { free(); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& o) noexcept { swap(o); }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      free();
      swap(o);
    }
    return *this;
  }

  /** Replaces the array by n uninitialised elements (throws, keeping the old one, when allocation fails). */
  void reset(Exec& ex, size_t n, const char* what, MemoryKind kind = MemoryKind::kDevice) {
    T* p = static_cast<T*>(ex.allocate(checkedMul(n, sizeof(T), what), kind, what));
    free();
    ex_ = &ex;
    data_ = p;
    n_ = n;
    kind_ = kind;
  }
  void free() noexcept {
    if (ex_ && data_) ex_->release(data_, kind_);
    data_ = nullptr;
    n_ = 0;
  }
  T* data() const { return data_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }
  MemoryKind kind() const { return kind_; }

 private:
  void swap(DeviceArray& o) noexcept {
    std::swap(ex_, o.ex_);
    std::swap(data_, o.data_);
    std::swap(n_, o.n_);
    std::swap(kind_, o.kind_);
  }
  Exec* ex_ = nullptr;
  T* data_ = nullptr;
  size_t n_ = 0;
  MemoryKind kind_ = MemoryKind::kDevice;
};

class Stage {
 public:
  explicit Stage(Exec& ex) : ex_(ex) {}
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;
  /** Waits for the stream unless finish() did (an error path): queued copies may read the caller's arrays. */
  ~Stage() {
    if (!finished_ && ex_.stages()) ex_.syncQuietly();
  }

  /** A pointer the kernels can read holding host[0..n) (null stays null). */
  template <class T>
  const T* in(const T* host, size_t n, const char* what) {
    if (!host || !ex_.stages()) return host;
    T* d = scratch<T>(n, what);
    ex_.toDevice(d, host, n * sizeof(T));
    return d;
  }
  /** in() of host data the call built itself: the Stage keeps the host copy until the copy has run. */
  template <class T>
  const T* inCopy(const std::vector<T>& host, const char* what) {
    if (host.empty()) return nullptr;
    kept_.emplace_back(reinterpret_cast<const unsigned char*>(host.data()),
                       reinterpret_cast<const unsigned char*>(host.data() + host.size()));
    T* d = scratch<T>(host.size(), what);
    ex_.toDevice(d, kept_.back().data(), host.size() * sizeof(T));
    return d;
  }
  /** A pointer the kernels write n elements to; they land in host[0..n) at finish(). */
  template <class T>
  T* out(T* host, size_t n, const char* what) {
    if (!host || !ex_.stages()) return host;
    T* d = scratch<T>(n, what);
    downloads_.push_back({host, d, n * sizeof(T)});
    return d;
  }
  /** The same for data the kernels read and write (copied in now, back at finish()). */
  template <class T>
  T* inOut(T* host, size_t n, const char* what) {
    if (!host || !ex_.stages()) return host;
    T* d = const_cast<T*>(in<T>(host, n, what));
    downloads_.push_back({host, d, n * sizeof(T)});
    return d;
  }
  /** Uninitialised scratch in device memory, freed with the Stage. */
  template <class T>
  T* scratch(size_t n, const char* what) {
    buffers_.emplace_back(ex_, checkedMul(n, sizeof(T), what), what);
    return reinterpret_cast<T*>(buffers_.back().data());
  }
  /** Waits for the kernels and copies every `out` back to the host. */
  void finish() {
    for (const Download& d : downloads_) ex_.toHost(d.host, d.device, d.bytes);
    downloads_.clear();
    ex_.sync();
    finished_ = true;
  }
  Exec& exec() { return ex_; }

 private:
  struct Download {
    void* host;
    const void* device;
    size_t bytes;
  };
  Exec& ex_;
  std::vector<DeviceArray<unsigned char>> buffers_;
  std::vector<Download> downloads_;
  std::vector<std::vector<unsigned char>> kept_;  // host sources of inCopy (freed after the destructor's wait)
  bool finished_ = false;
};

/** Reads one value back from device memory (waits for queued work). */
template <class T>
T readBack(Exec& ex, const T* p) {
  T v{};
  ex.toHost(&v, p, sizeof(T));
  return v;
}

}  // namespace cuda
}  // namespace embedstack
