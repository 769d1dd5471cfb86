#include "memory.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "env.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#if defined(__linux__)
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#define ES_HAVE_MMAP 1
#elif defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

namespace embedstack {

namespace {
// Below this a Block uses malloc; above it, its own mapping (huge pages, mremap).
constexpr size_t kMapThreshold = size_t{1} << 20;
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

size_t checkedMul(size_t a, size_t b, const char* what) {
  size_t r;
  ES_CHECK(!__builtin_mul_overflow(a, b, &r), kInvalidArgument,
           "Expected the size of " << what << " to fit in memory but " << a << " * " << b << " overflows");
  return r;
}

size_t checkedAdd(size_t a, size_t b, const char* what) {
  size_t r;
  ES_CHECK(!__builtin_add_overflow(a, b, &r), kInvalidArgument,
           "Expected the size of " << what << " to fit in memory but " << a << " + " << b << " overflows");
  return r;
}

size_t physicalMemoryBytes() {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<size_t>(pages) * static_cast<size_t>(page);
#endif
  return 0;
}

namespace {
// Under the caller's lock: drops the oldest of a cache's entries[0..count) (each with
// `bytes`), moving them to `out` to be freed outside the lock, until `incoming` more
// bytes fit in `cap` next to `held` and fewer than `maxEntries` remain; returns how many.
template <class Entry>
size_t evictOldest(Entry* entries, size_t& count, size_t& held, size_t incoming, size_t cap, size_t maxEntries, Entry* out) {
  size_t drop = 0;
  while (drop < count && (held + incoming > cap || count - drop >= maxEntries)) {
    held -= entries[drop].bytes;
    out[drop] = entries[drop];
    ++drop;
  }
  for (size_t j = drop; j < count; ++j) entries[j - drop] = entries[j];
  count -= drop;
  return drop;
}

// The scratch cache: freed blocks (power-of-two sizes >= kScratchMinBlock), newest
// last; at most kScratchCacheBytes in all. Never destroyed (pool threads may still
// allocate while the process exits).
class ScratchCache {
 public:
  // The first size class whose blocks hold `bytes`, or -1 when they are not cached.
  static int classOf(size_t bytes) {
    if (bytes < kScratchMinBlock || bytes > kScratchCacheBytes) return -1;
    int c = 0;
    while ((kScratchMinBlock << c) < bytes) ++c;
    return c;
  }
  static size_t classBytes(int c) { return kScratchMinBlock << c; }

  void* take(int c) {
    std::lock_guard<std::mutex> lock(mutex_);
    const size_t bytes = classBytes(c);
    for (size_t i = count_; i-- > 0;) {
      if (entries_[i].bytes != bytes) continue;
      void* p = entries_[i].p;
      for (size_t j = i + 1; j < count_; ++j) entries_[j - 1] = entries_[j];
      --count_;
      held_ -= bytes;
      return p;
    }
    return nullptr;
  }

  void give(void* p, int c) noexcept {
    Entry evicted[kMaxEntries];
    size_t nEvicted;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const size_t bytes = classBytes(c);
      nEvicted = evictOldest(entries_, count_, held_, bytes, kScratchCacheBytes, kMaxEntries, evicted);
      entries_[count_++] = {p, bytes};
      held_ += bytes;
    }
    for (size_t i = 0; i < nEvicted; ++i) std::free(evicted[i].p);
  }

  size_t held() {
    std::lock_guard<std::mutex> lock(mutex_);
    return held_;
  }

  void clear() noexcept {
    void* freed[kMaxEntries];
    size_t n;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      n = count_;
      for (size_t i = 0; i < n; ++i) freed[i] = entries_[i].p;
      count_ = 0;
      held_ = 0;
    }
    for (size_t i = 0; i < n; ++i) std::free(freed[i]);
  }

 private:
  static constexpr size_t kMaxEntries = kScratchCacheBytes / kScratchMinBlock;
  struct Entry {
    void* p;
    size_t bytes;  // classBytes of its size class
  };
  std::mutex mutex_;
  Entry entries_[kMaxEntries];
  size_t count_ = 0;
  size_t held_ = 0;
};

ScratchCache& scratchCache() {
  static ScratchCache* cache = new ScratchCache();
  return *cache;
}
}  // namespace

void* scratchAllocate(size_t bytes) {
  const int c = ScratchCache::classOf(bytes);
  if (c >= 0) {
    if (void* p = scratchCache().take(c)) return p;
    bytes = ScratchCache::classBytes(c);
  }
  void* p = std::malloc(bytes == 0 ? 1 : bytes);
  if (!p) throw std::bad_alloc();
  return p;
}

void scratchFree(void* p, size_t bytes) noexcept {
  if (!p) return;
  const int c = ScratchCache::classOf(bytes);
  if (c >= 0) {
    scratchCache().give(p, c);
  } else {
    std::free(p);
  }
}

size_t scratchCachedBytes() { return scratchCache().held(); }

namespace {
constexpr size_t kResultGrain = size_t{64} << 10;  // mapped blocks are whole 64 KiB
// The result cache's most entries (past them the oldest go, whatever the cap): 256 MiB of the
// smallest blocks, 1 MiB; a cap larger than that holds larger blocks.
constexpr size_t kResultMaxEntries = 256;
constexpr size_t kResultCacheMaxMb = 65536;

size_t roundUp(size_t x, size_t to) { return (x + to - 1) / to * to; }

// A block of `bytes` (whole kResultGrain) from the system, or nullptr. Plain 4 KiB pages:
// huge pages made a miss dearer here (a VM whose host backs memory in 4 KiB pages
// faults in a fresh 2 MiB page 512 times over; a loop of fresh 26.6 MB results took
// 64-95 ms of CPU per call with MADV_HUGEPAGE blocks, 42 ms without).
void* mapResult(size_t bytes) {
#ifdef ES_HAVE_MMAP
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
#else
  return std::malloc(bytes);
#endif
}

void unmapResult(void* p, size_t bytes) noexcept {
#ifdef ES_HAVE_MMAP
  munmap(p, bytes);
#else
  (void)bytes;
  std::free(p);
#endif
}

// Freed result blocks, oldest first; at most cap_ bytes in all. Never destroyed (the
// finalizers of results still alive at exit, and pool threads, may free into it).
class ResultCache {
 public:
  ResultCache() {
    const long mb = envWhole("EMBEDSTACK_CPU_RESULT_CACHE_MB", 0, static_cast<long>(kResultCacheMaxMb), -1);
    cap_ = mb < 0 ? resultCacheDefaultCap(physicalMemoryBytes()) : static_cast<size_t>(mb) << 20;
  }

  // The smallest cached block of `bytes` to bytes + bytes / 4 (the newest of equals), or {}.
  ResultBlock take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t best = count_;
    for (size_t i = count_; i-- > 0;) {
      const size_t b = entries_[i].bytes;
      if (b < bytes || b - bytes > bytes / 4) continue;
      if (best == count_ || b < entries_[best].bytes) best = i;
    }
    if (best == count_) {
      ++misses_;
      return {};
    }
    const ResultBlock got = entries_[best];
    for (size_t j = best + 1; j < count_; ++j) entries_[j - 1] = entries_[j];
    --count_;
    held_ -= got.bytes;
    ++hits_;
    return got;
  }

  void give(void* p, size_t bytes) noexcept {
    ResultBlock evicted[kResultMaxEntries + 1];
    size_t nEvicted = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (bytes > cap_) {
        evicted[nEvicted++] = {p, bytes};
      } else {
        nEvicted = evictOldest(entries_, count_, held_, bytes, cap_, kResultMaxEntries, evicted);
        entries_[count_++] = {p, bytes};
        held_ += bytes;
      }
    }
    for (size_t i = 0; i < nEvicted; ++i) unmapResult(evicted[i].p, evicted[i].bytes);
  }

  ResultCacheStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    ResultCacheStats s;
    s.heldBytes = held_;
    s.heldBlocks = count_;
    s.capBytes = cap_;
    s.hits = hits_;
    s.misses = misses_;
    return s;
  }

  // Sets the cap (keep: true) or empties the cache (keep: false, cap unchanged); returns
  // the bytes unmapped.
  size_t shrink(size_t cap, bool keep) noexcept {
    ResultBlock evicted[kResultMaxEntries + 1];
    size_t nEvicted;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (keep) cap_ = cap;
      nEvicted = evictOldest(entries_, count_, held_, 0, keep ? cap : 0, kResultMaxEntries, evicted);
    }
    size_t released = 0;
    for (size_t i = 0; i < nEvicted; ++i) {
      unmapResult(evicted[i].p, evicted[i].bytes);
      released += evicted[i].bytes;
    }
    return released;
  }

 private:
  std::mutex mutex_;
  ResultBlock entries_[kResultMaxEntries];
  size_t count_ = 0;
  size_t held_ = 0;
  size_t cap_ = 0;
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
};

ResultCache& resultCache() {
  static ResultCache* cache = new ResultCache();
  return *cache;
}
}  // namespace

ResultBlock resultAllocate(size_t bytes) {
  if (bytes < kResultMinBlock) {
    void* p = std::malloc(bytes == 0 ? 1 : bytes);
    if (!p) throw std::bad_alloc();
    return {p, bytes};
  }
  const size_t want = roundUp(bytes, kResultGrain);
  const ResultBlock cached = resultCache().take(want);
  if (cached.p != nullptr) return cached;
  void* p = mapResult(want);
  if (!p) {
    // Out of memory or of mappings (vm.max_map_count): give the idle blocks back and try once more.
    resultCache().shrink(0, false);
    p = mapResult(want);
  }
  if (!p) throw std::bad_alloc();
  return {p, want};
}

void resultFree(void* p, size_t blockBytes) noexcept {
  if (!p) return;
  if (blockBytes < kResultMinBlock) {
    std::free(p);
  } else {
    resultCache().give(p, blockBytes);
  }
}

ResultCacheStats resultCacheStats() { return resultCache().stats(); }

void setResultCacheCap(size_t bytes) { resultCache().shrink(bytes, true); }

size_t clearResultCache() { return resultCache().shrink(0, false); }

#if defined(__GLIBC__) && defined(ES_HAVE_MMAP)
namespace {
std::atomic<bool> residentReadFails{false};

// The process's resident bytes (/proc/self/statm), or 0 when unknown.
size_t residentBytes() {
  if (residentReadFails.load(std::memory_order_relaxed)) return 0;
  const int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[128];
  const ssize_t got = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (got <= 0) return 0;
  buf[got] = '\0';
  char* p = buf;
  std::strtoull(p, &p, 10);  // size
  const unsigned long long pages = std::strtoull(p, nullptr, 10);
  const long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
}
// The RSS growth inside write calls since the last trim, counted once over the union of the
// calls' windows: every window's opening and closing reads the RSS and the scratch cache, and
// the growth between two readings counts when a window was open in between (less the
// cache's refill). So two writes at once, a write waiting for a table lock while another
// one writes, or a planned call and the table writes it runs on pool threads, count each
// byte of growth once; one window alone counts its own growth, from its start to its end.
// Never destroyed (pool threads may write while the process exits).
class GrowthCount {
 public:
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    read(open_ > 0);
    ++open_;
  }

  // Closes the window of a call of `items` keys; true when the caller is to trim: the count
  // reached kTrimGrowthBytes, or, when the RSS could not be read, the keys of such calls since
  // the last trim reached kTrimItemsUnknownRss.
  bool close(size_t items) {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool known = read(true);
    --open_;
    if (!known) unknownItems_ += items;
    return grown_ >= ScratchRelease::kTrimGrowthBytes || unknownItems_ >= ScratchRelease::kTrimItemsUnknownRss;
  }

  // After a trim: the counts start again, and windows still open measure from the RSS and the cache as they are now.
  void trimmed() {
    std::lock_guard<std::mutex> lock(mutex_);
    grown_ = 0;
    unknownItems_ = 0;
    lastRss_ = residentBytes();
    lastCached_ = scratchCache().held();
  }

 private:
  // Reads the RSS and the cache's bytes; adds the growth since the previous reading when
  // `count`. False when the RSS is unknown now or was at the previous reading.
  bool read(bool count) {
    const size_t rss = residentBytes();
    const size_t cached = scratchCache().held();
    const bool known = rss != 0 && lastRss_ != 0;
    if (count && known) {
      const size_t refill = cached > lastCached_ ? cached - lastCached_ : 0;
      if (rss > lastRss_ + refill) grown_ += rss - lastRss_ - refill;
    }
    lastRss_ = rss;
    lastCached_ = cached;
    return known;
  }

  std::mutex mutex_;
  unsigned open_ = 0;      // windows open now
  size_t lastRss_ = 0;     // the RSS at the last reading (0: unknown)
  size_t lastCached_ = 0;  // scratchCachedBytes() at the last reading
  size_t grown_ = 0;       // growth counted since the last trim
  size_t unknownItems_ = 0;  // keys of the calls that closed with the RSS unknown, since the last trim
};

GrowthCount& growthCount() {
  static GrowthCount* count = new GrowthCount();
  return *count;
}

std::atomic<uint64_t> trimCount{0};
// ScratchReleases alive on this thread: only the outermost one of nested write calls on one thread opens a window.
thread_local unsigned releaseDepth = 0;

void trimNow() noexcept {
  scratchCache().clear();
  malloc_trim(0);
  growthCount().trimmed();
  trimCount.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

ScratchRelease::ScratchRelease(size_t items)
    : items_(items), active_(releaseDepth == 0 && items >= kMinItems), large_(active_ && items >= kLargeItems) {
  if (active_ && !large_) growthCount().open();
  ++releaseDepth;  // last: a constructor that threw leaves the depth as it was
}

ScratchRelease::~ScratchRelease() {
  --releaseDepth;
  if (!active_) return;
  if (large_ || growthCount().close(items_)) trimNow();
}

uint64_t scratchTrims() noexcept { return trimCount.load(std::memory_order_relaxed); }

void failResidentReadsForTests(bool fail) noexcept { residentReadFails.store(fail, std::memory_order_relaxed); }
#else
ScratchRelease::ScratchRelease(size_t items) : items_(items), active_(items >= kMinItems), large_(items >= kLargeItems) {}
ScratchRelease::~ScratchRelease() = default;
uint64_t scratchTrims() noexcept { return 0; }
void failResidentReadsForTests(bool) noexcept {}
#endif

namespace {
std::atomic<int> tuning{static_cast<int>(AllocatorTuning::kNotRun)};

bool envSet(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0';
}

AllocatorTuning tuneOnce() noexcept {
#if defined(__GLIBC__)
  const char* opt = std::getenv("EMBEDSTACK_TUNE_MALLOC");
  if (opt != nullptr && std::strcmp(opt, "0") == 0) return AllocatorTuning::kOptedOut;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if ((tunables != nullptr && (std::strstr(tunables, "glibc.malloc.mmap_threshold") != nullptr ||
                               std::strstr(tunables, "glibc.malloc.trim_threshold") != nullptr)) ||
      envSet("MALLOC_MMAP_THRESHOLD_") || envSet("MALLOC_TRIM_THRESHOLD_")) {
    return AllocatorTuning::kUserSet;
  }
  // Setting either threshold turns glibc's adaptive adjustment off, so set both.
  if (mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMallocMmapThreshold)) != 1) return AllocatorTuning::kUnsupported;
  if (mallopt(M_TRIM_THRESHOLD, static_cast<int>(kMallocTrimThreshold)) != 1) return AllocatorTuning::kUnsupported;
  return AllocatorTuning::kTuned;
#else
  return AllocatorTuning::kUnsupported;
#endif
}
}  // namespace

AllocatorTuning tuneAllocator() noexcept {
  static const AllocatorTuning done = [] {
    const AllocatorTuning t = tuneOnce();
    tuning.store(static_cast<int>(t), std::memory_order_relaxed);
    return t;
  }();
  return done;
}

AllocatorTuning allocatorTuning() noexcept { return static_cast<AllocatorTuning>(tuning.load(std::memory_order_relaxed)); }

const char* allocatorTuningName(AllocatorTuning t) noexcept {
  switch (t) {
    case AllocatorTuning::kTuned:
      return "tuned";
    case AllocatorTuning::kOptedOut:
      return "opted-out";
    case AllocatorTuning::kUserSet:
      return "user-set";
    case AllocatorTuning::kUnsupported:
      return "unsupported";
    case AllocatorTuning::kNotRun:
      break;
  }
  return "not-run";
}

void adviseHugePages(void* p, size_t bytes) {
#if defined(ES_HAVE_MMAP) && defined(MADV_HUGEPAGE)
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHugePage - 1);
  if (end > begin && end - begin >= 2 * kHugePage) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

static void checkFits(size_t bytes, const char* what) {
  size_t phys = physicalMemoryBytes();
  // Linux overcommits: a mapping larger than RAM may "succeed" and be killed later.
  if (phys != 0 && bytes > phys) throwOutOfMemory(bytes, what, __FILE__, __LINE__);
}

#ifdef ES_HAVE_MMAP
static void* mapZeroed(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
#ifdef MADV_HUGEPAGE
  if (bytes >= kHugePage) madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return p;
}
#endif

void Block::allocateZeroed(size_t bytes, const char* what) {
  checkFits(bytes, what);
  Block fresh;
  if (bytes > 0) {
#ifdef ES_HAVE_MMAP
    if (bytes >= kMapThreshold) {
      fresh.data_ = mapZeroed(bytes);
      fresh.mapped_ = true;
    } else
#endif
    {
      void* p = nullptr;
      if (posix_memalign(&p, 64, bytes) == 0) {
        std::memset(p, 0, bytes);
        fresh.data_ = p;
      }
    }
    if (!fresh.data_) throwOutOfMemory(bytes, what, __FILE__, __LINE__);
    fresh.bytes_ = bytes;
  }
  reset();
  swap(fresh);
}

void Block::resize(size_t bytes, const char* what) {
  if (bytes == bytes_) return;
  if (data_ == nullptr || bytes == 0) {
    allocateZeroed(bytes, what);
    return;
  }
  checkFits(bytes, what);
#ifdef ES_HAVE_MMAP
  if (mapped_ && bytes >= kMapThreshold) {
    // Moves page tables, not bytes; pages beyond the old end are fresh zero pages.
    void* p = mremap(data_, bytes_, bytes, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) throwOutOfMemory(bytes, what, __FILE__, __LINE__);
#ifdef MADV_HUGEPAGE
    if (bytes >= kHugePage) madvise(p, bytes, MADV_HUGEPAGE);
#endif
    data_ = p;
    bytes_ = bytes;
    return;
  }
#endif
  Block grown;
  grown.allocateZeroed(bytes, what);
  std::memcpy(grown.data_, data_, bytes < bytes_ ? bytes : bytes_);
  reset();
  swap(grown);
}

void Block::reset() noexcept {
  if (data_ != nullptr) {
#ifdef ES_HAVE_MMAP
    if (mapped_) {
      munmap(data_, bytes_);
    } else
#endif
    {
      std::free(data_);
    }
  }
  data_ = nullptr;
  bytes_ = 0;
  mapped_ = false;
}

}  // namespace embedstack
