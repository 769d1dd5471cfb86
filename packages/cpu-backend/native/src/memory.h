// Host memory for tables and results.
//  - Block: a large growable allocation (mmap on Linux, transparent huge pages
//    requested; mremap to grow without touching untouched pages), used for the row
//    arena and the hash index. Untouched capacity costs address space, not RSS.
//  - HostArray<T>: a malloc'd result buffer whose ownership can be handed to JS.
// Allocation failure throws EmbedError(FAILED_PRECONDITION), never crashes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <utility>

#include "errors.h"

namespace embedstack {

/** a * b, or throws INVALID_ARGUMENT naming `what` when it overflows size_t. */
size_t checkedMul(size_t a, size_t b, const char* what);
/** a + b, or throws INVALID_ARGUMENT naming `what` when it overflows size_t. */
size_t checkedAdd(size_t a, size_t b, const char* what);

/** Physical memory of the machine in bytes (0 when unknown). */
size_t physicalMemoryBytes();

/**
 * Asks the kernel to back the 2 MiB-aligned interior of [p, p + bytes) with
 * transparent huge pages when it is first touched (Linux; a no-op elsewhere, for
 * small ranges and for pages already present). Used on large result buffers that
 * JS allocated: their first-touch page faults then cost 1/512 as many traps.
 */
void adviseHugePages(void* p, size_t bytes);

/**
 * Declared before a large call's scratch buffers: when it goes out of scope (after
 * them), returns the C library's freed heap memory to the system, so the scratch of
 * a very large batch (about 50 bytes per key: tens of megabytes from 1M keys) does
 * not stay in the process's RSS. Smaller calls leave theirs in the C library's free
 * lists, where the next call reuses it: trimming after every 64K-key write made each
 * call fault its scratch back in page by page, and the trim's madvise costs a TLB
 * shootdown across the pool's threads (a fused Adagrad step of 64K keys ran 2.2x
 * faster without it; the scratch left behind is ~2.7 MB, 0.3 bytes per key of a
 * 10M-key table filled 64K keys at a time).
 */
class ScratchRelease {
 public:
  explicit ScratchRelease(size_t items) : active_(items >= kMinItems) {}
  ~ScratchRelease();
  ScratchRelease(const ScratchRelease&) = delete;
  ScratchRelease& operator=(const ScratchRelease&) = delete;

 private:
  static constexpr size_t kMinItems = size_t{1} << 20;
  bool active_;
};

class Block {
 public:
  Block() = default;
  ~Block() { reset(); }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  Block(Block&& o) noexcept { swap(o); }
  Block& operator=(Block&& o) noexcept {
    if (this != &o) {
      reset();
      swap(o);
    }
    return *this;
  }

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

  /** Replaces the block by `bytes` of zeroed, 64-byte aligned memory. Throws FAILED_PRECONDITION on failure (block
   * unchanged). */
  void allocateZeroed(size_t bytes, const char* what);
  /** Grows or shrinks keeping the first min(old, new) bytes; new bytes are zero. Throws, block unchanged. */
  void resize(size_t bytes, const char* what);
  void reset() noexcept;

 private:
  void swap(Block& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
    std::swap(mapped_, o.mapped_);
  }
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool mapped_ = false;
};

/** A malloc'd array handed to JS as an external ArrayBuffer (or freed here). */
template <class T>
class HostArray {
 public:
  HostArray() = default;
  explicit HostArray(size_t n) { allocate(n); }
  ~HostArray() { std::free(data_); }
  HostArray(const HostArray&) = delete;
  HostArray& operator=(const HostArray&) = delete;
  HostArray(HostArray&& o) noexcept : data_(o.data_), n_(o.n_) {
    o.data_ = nullptr;
    o.n_ = 0;
  }
  HostArray& operator=(HostArray&& o) noexcept {
    if (this != &o) {
      std::free(data_);
      data_ = o.data_;
      n_ = o.n_;
      o.data_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }

  /** Uninitialised storage for n elements (the caller writes every one). */
  void allocate(size_t n) {
    std::free(data_);
    data_ = nullptr;
    n_ = 0;
    if (n == 0) return;
    size_t bytes = checkedMul(n, sizeof(T), "a result buffer");
    void* p = std::malloc(bytes);
    if (!p) throwOutOfMemory(bytes, "a result buffer", __FILE__, __LINE__);
    data_ = static_cast<T*>(p);
    n_ = n;
  }
  T* data() const { return data_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }
  T& operator[](size_t i) const { return data_[i]; }
  /** Gives up ownership (the caller frees with std::free). */
  T* release() {
    T* p = data_;
    data_ = nullptr;
    n_ = 0;
    return p;
  }

 private:
  T* data_ = nullptr;
  size_t n_ = 0;
};

}  // namespace embedstack
