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
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "errors.h"

namespace embedstack {

/** a * b, or throws INVALID_ARGUMENT naming `what` when it overflows size_t. */
size_t checkedMul(size_t a, size_t b, const char* what);
/** a + b, or throws INVALID_ARGUMENT naming `what` when it overflows size_t. */
size_t checkedAdd(size_t a, size_t b, const char* what);

/** Physical memory of the machine in bytes (0 when unknown). */
size_t physicalMemoryBytes();

/**
 * What tuneAllocator() did: kTuned (glibc's thresholds set), kOptedOut
 * (EMBEDSTACK_TUNE_MALLOC=0), kUserSet (the user set them: GLIBC_TUNABLES or
 * MALLOC_*_THRESHOLD_), kUnsupported (not glibc). Read with allocatorTuning().
 */
enum class AllocatorTuning : int { kNotRun = 0, kTuned, kOptedOut, kUserSet, kUnsupported };

/**
 * Once per process (the first addon load): raises glibc malloc's mmap threshold to its
 * maximum, kMallocMmapThreshold, and its trim threshold to kMallocTrimThreshold, unless
 * the user set either or opted out. Why: result arrays of multi-MB lookups are freed by
 * V8's garbage collector some calls later, not when the next call starts, so several
 * are alive at once; with glibc's adaptive thresholds the heap then trims its top on a
 * free and the next result faults every page back in (a 26 MB bag output: 1,300-1,600
 * page faults per call and up to 2x the call's time). With these thresholds the freed
 * results stay in the heap and are reused (4-5 faults per call). The trim threshold is
 * 256 MiB, not 64: V8 collects once some 64 MiB of array buffers have piled up, so up to
 * 64 MiB plus a result below the mmap threshold (32 MiB) are freed at once, and at 64 MiB
 * the heap still gave its top back after most collections (64K-key findSync at dim 64,
 * 16 MiB results: 50-110 faults per call, 7 at 256 MiB; 30 MiB results: 194 -> 6).
 * Explicit trims (ScratchRelease) still return memory after large writes. The same effect
 * as starting Node with
 * GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=268435456.
 */
constexpr size_t kMallocMmapThreshold = size_t{32} << 20;
constexpr size_t kMallocTrimThreshold = size_t{256} << 20;
AllocatorTuning tuneAllocator() noexcept;
/** What tuneAllocator() did (kNotRun before it ran). */
AllocatorTuning allocatorTuning() noexcept;
/** "tuned", "opted-out", "user-set", "unsupported" or "not-run". */
const char* allocatorTuningName(AllocatorTuning t) noexcept;

/**
 * Asks the kernel to back the 2 MiB-aligned interior of [p, p + bytes) with
 * transparent huge pages when it is first touched (Linux; a no-op elsewhere, for
 * small ranges and for pages already present). Used on large result buffers that
 * JS allocated: their first-touch page faults then cost 1/512 as many traps.
 */
void adviseHugePages(void* p, size_t bytes);

/**
 * The per-call scratch of write calls (batch dedupe, per-unique rows and flags, the
 * admitted list) is allocated through ScratchAllocator. Blocks of at least
 * kScratchMinBlock bytes are rounded up to a power of two and, when freed, kept in a
 * process-wide cache of at most kScratchCacheBytes (newest kept; the oldest freed past
 * the cap), where the next call of a similar size takes them back with their pages
 * still present. Smaller blocks, and blocks larger than the cap, use malloc directly.
 * So a stream of 64K-key writes (about 3-4 MB of scratch each) reuses the same
 * resident scratch without page faults, and the process keeps at most
 * kScratchCacheBytes of it between calls.
 */
constexpr size_t kScratchMinBlock = size_t{64} << 10;
constexpr size_t kScratchCacheBytes = size_t{8} << 20;

/** A scratch block of `bytes` (cached or malloc'd); throws std::bad_alloc on failure. */
void* scratchAllocate(size_t bytes);
/** Returns a block from scratchAllocate(bytes) (same `bytes`) to the cache or to malloc. */
void scratchFree(void* p, size_t bytes) noexcept;
/** Bytes the scratch cache holds now (at most kScratchCacheBytes). */
size_t scratchCachedBytes();

template <class T>
class ScratchAllocator {
 public:
  using value_type = T;
  static_assert(alignof(T) <= alignof(std::max_align_t), "scratch blocks have malloc's alignment");
  ScratchAllocator() noexcept = default;
  template <class U>
  ScratchAllocator(const ScratchAllocator<U>&) noexcept {}  // NOLINT(google-explicit-constructor)
  T* allocate(size_t n) { return static_cast<T*>(scratchAllocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { scratchFree(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const ScratchAllocator<U>&) const noexcept {
    return true;
  }
  template <class U>
  bool operator!=(const ScratchAllocator<U>&) const noexcept {
    return false;
  }
};

/** A std::vector whose storage comes from the scratch cache (see ScratchAllocator). */
template <class T>
using ScratchVector = std::vector<T, ScratchAllocator<T>>;

/**
 * `n` Ts from the scratch cache (scratchAllocate: a block of kScratchMinBlock or more comes
 * back from the cache with its pages present), left uninitialised (its user writes what it
 * reads first): trivial types only.
 */
template <class T>
class ScratchArray {
 public:
  static_assert(std::is_trivially_copyable<T>::value && std::is_trivially_destructible<T>::value, "trivial types only");
  ScratchArray() = default;
  explicit ScratchArray(size_t n) { reset(n); }
  ~ScratchArray() { reset(0); }
  ScratchArray(const ScratchArray&) = delete;
  ScratchArray& operator=(const ScratchArray&) = delete;
  /** Room for `n` Ts (the contents are not kept); throws std::bad_alloc, leaving it empty. */
  void reset(size_t n) {
    if (p_ != nullptr) scratchFree(p_, bytes_);
    p_ = nullptr;
    bytes_ = 0;
    if (n > 0) {
      p_ = static_cast<T*>(scratchAllocate(n * sizeof(T)));
      bytes_ = n * sizeof(T);
    }
  }
  T* data() const { return p_; }
  T& operator[](size_t i) const { return p_[i]; }

 private:
  size_t bytes_ = 0;
  T* p_ = nullptr;
};

/**
 * Declared before a write call's scratch buffers; when it goes out of scope (after
 * them) it may return the C library's free memory (in every arena, including what
 * other threads of the process freed) to the system with malloc_trim(0):
 *  - after every call of at least kLargeItems keys (its scratch is tens of MB);
 *  - after a call of at least kMinItems keys once the RSS has grown by kTrimGrowthBytes
 *    or more inside such calls since the last trim. Each call counts the growth between
 *    its start and its end (/proc/self/statm, about 4-7 us a read), less what it put back
 *    into the scratch cache: the new rows and index of a fill, scratch past the cache
 *    freed to the heap. What grows the RSS between calls (the caller's result arrays, other
 *    code) does not count, nor does the cache's refill after a trim. Calls that overlap
 *    in time (two tables written at once, a write waiting for another's lock, a planned
 *    call's table writes on pool threads) count the growth of the time any of them was
 *    open once, not once per call. When the RSS cannot be read (no /proc, no file descriptor
 *    left), the calls that closed without it count their keys instead, and trim once those
 *    reach kTrimItemsUnknownRss (1M, the keys that make one call trim): a loop of 64K-key
 *    writes then trims every 16th call, not every call (which made each fault its scratch
 *    back in), and keeps at most what 1M keys of writes leave free between trims.
 * A trim also empties the scratch cache, so right after one the process keeps none
 * of its scratch. Nested write calls on one thread (a planned call around a table's write)
 * decide once, in the outermost; on pool threads their growth is counted once (above). A loop of writes on resident keys does not trim, even between
 * lookups that return fresh 16 MiB results, and reuses its scratch through the cache:
 * a trim after every 64K-key write made each call fault its scratch back in and pay
 * the madvise's TLB shootdowns (a fused Adagrad step ran 2.2x slower; a findSync without
 * `out` then an upsertSync of 64K keys 1.4x, when the RSS since the last trim decided).
 * A fill trims after most calls (each adds its rows): without any trim the C library kept
 * 9-14 MB of free memory at the end of the bench's 1M-key fill, most of it freed by other
 * threads of the process (V8's helpers).
 */
class ScratchRelease {
 public:
  explicit ScratchRelease(size_t items);
  ~ScratchRelease();
  ScratchRelease(const ScratchRelease&) = delete;
  ScratchRelease& operator=(const ScratchRelease&) = delete;

  static constexpr size_t kMinItems = 16384;
  static constexpr size_t kLargeItems = size_t{1} << 20;
  static constexpr size_t kTrimGrowthBytes = size_t{4} << 20;
  static constexpr size_t kTrimItemsUnknownRss = kLargeItems;

 private:
  size_t items_;
  bool active_;
  bool large_;
};

/** The trims ScratchRelease has made in this process (tests and tools). */
uint64_t scratchTrims() noexcept;
/** Tests: while `fail`, ScratchRelease reads the RSS as unknown (as when /proc/self/statm cannot be read). */
void failResidentReadsForTests(bool fail) noexcept;

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

/**
 * Result blocks: the storage of HostArray, i.e. of the result arrays the addon allocates
 * (exportBatch's arrays, the binding's find / lookupCombined when called without an
 * output) and of per-call buffers (per-entry gradients, a sharded call's owned entries
 * and rows).
 *
 * Blocks of at least kResultMinBlock bytes are mappings of whole 64 KiB; when freed (by
 * their owner, or by the finalizer of the external ArrayBuffer a result became) they
 * wait in a process-wide cache, and the next request of a similar size (a block at most
 * 1/4 larger) takes one back with its pages present. Without it every such request
 * was fresh memory, a page fault per 4 KiB written (a 26.6 MB result: 6,650 faults, on
 * the order of the call's own work), whenever the C heap had given the freed blocks back
 * to the system. The cache holds at most resultCacheStats().capBytes (resultCacheDefaultCap,
 * or EMBEDSTACK_CPU_RESULT_CACHE_MB; 0 turns it off): past the cap the oldest blocks are
 * unmapped, and a block larger than the cap is unmapped when freed. A block is cached
 * only once its owner freed it (a JS result: once V8 collected its ArrayBuffer and Node
 * ran the finalizer), and every kernel writes every element of its result, so no bytes
 * of an earlier result reach a new one (tests/test_result_cache.cc recycles a block of
 * garbage). Smaller blocks use malloc. Thread-safe.
 *
 * Node runs an external ArrayBuffer's finalizer as its event loop turns, not during the
 * collection: a synchronous loop gets no block back until it yields. That is why the
 * public API's sync find and bag fill arrays that JS allocates (cpuTable.ts), which V8 frees
 * in the collection itself. Their Promise forms without an output (which the caller awaits,
 * so the loop turns) take their results from here from CallCopies::kFreshMaxBytes (32 MiB)
 * on; below it, from Node's allocator (binding/args.h, CallCopies::fresh).
 */
constexpr size_t kResultMinBlock = size_t{1} << 20;
/**
 * The cache's default cap: 1/16 of the machine's memory, at least kResultCacheMinBytes and
 * at most kResultCacheMaxBytes (kResultCacheMinBytes when the memory is unknown). From
 * 8 GiB of memory it holds two 256 MiB results of a 1M-key find at dim 64: a loop of awaited
 * calls has two in turn (the next call starts before V8 collected the previous result), and
 * a fresh one faulted 65,536 pages per call (at a 512 MiB cap, every other call did).
 */
constexpr size_t kResultCacheMinBytes = size_t{128} << 20;
constexpr size_t kResultCacheMaxBytes = size_t{1024} << 20;
/** The default cap for a machine with `physicalBytes` of memory (0: unknown). */
constexpr size_t resultCacheDefaultCap(size_t physicalBytes) {
  return physicalBytes / 16 < kResultCacheMinBytes   ? kResultCacheMinBytes
         : physicalBytes / 16 > kResultCacheMaxBytes ? kResultCacheMaxBytes
                                                     : physicalBytes / 16;
}

/** A result block: its address and its size (at least what was asked). */
struct ResultBlock {
  void* p = nullptr;
  size_t bytes = 0;
};
/** A block of at least `bytes` (> 0): cached, mapped or malloc'd. Throws std::bad_alloc on failure. */
ResultBlock resultAllocate(size_t bytes);
/** Returns a block from resultAllocate (its ResultBlock::bytes) to the cache, or to the system. */
void resultFree(void* p, size_t blockBytes) noexcept;

/** What the result cache holds and has done since the process started. */
struct ResultCacheStats {
  size_t heldBytes = 0;
  size_t heldBlocks = 0;
  size_t capBytes = 0;
  uint64_t hits = 0;    // requests served by a cached block
  uint64_t misses = 0;  // requests of >= kResultMinBlock bytes that mapped a new block
};
ResultCacheStats resultCacheStats();
/** Sets the cap (bytes; 0 turns caching off), unmapping what no longer fits. Tests and tools. */
void setResultCacheCap(size_t bytes);
/** Unmaps every cached block (JS: the binding's clearResultCache); returns the bytes unmapped. */
size_t clearResultCache();

/** An array in a result block (see resultAllocate), handed to JS as an external ArrayBuffer (or freed here). */
template <class T>
class HostArray {
 public:
  HostArray() = default;
  explicit HostArray(size_t n) { allocate(n); }
  ~HostArray() { resultFree(data_, block_); }
  HostArray(const HostArray&) = delete;
  HostArray& operator=(const HostArray&) = delete;
  HostArray(HostArray&& o) noexcept : data_(o.data_), n_(o.n_), block_(o.block_) {
    o.data_ = nullptr;
    o.n_ = 0;
    o.block_ = 0;
  }
  HostArray& operator=(HostArray&& o) noexcept {
    if (this != &o) {
      resultFree(data_, block_);
      data_ = o.data_;
      n_ = o.n_;
      block_ = o.block_;
      o.data_ = nullptr;
      o.n_ = 0;
      o.block_ = 0;
    }
    return *this;
  }

  /** Uninitialised storage for n elements (the caller writes every one). */
  void allocate(size_t n) {
    resultFree(data_, block_);
    data_ = nullptr;
    n_ = 0;
    block_ = 0;
    if (n == 0) return;
    size_t bytes = checkedMul(n, sizeof(T), "a result buffer");
    ResultBlock b;
    try {
      b = resultAllocate(bytes);
    } catch (const std::bad_alloc&) {
      throwOutOfMemory(bytes, "a result buffer", __FILE__, __LINE__);
    }
    data_ = static_cast<T*>(b.p);
    n_ = n;
    block_ = b.bytes;
  }
  T* data() const { return data_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }
  T& operator[](size_t i) const { return data_[i]; }
  /** Gives up ownership: the caller frees the block with resultFree(p, bytes). */
  ResultBlock release() {
    ResultBlock b{data_, block_};
    data_ = nullptr;
    n_ = 0;
    block_ = 0;
    return b;
  }

 private:
  T* data_ = nullptr;
  size_t n_ = 0;
  size_t block_ = 0;  // bytes of the block (>= n_ * sizeof(T))
};

}  // namespace embedstack
