#include "memory.h"

#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#if defined(__linux__)
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

ScratchRelease::~ScratchRelease() {
#if defined(__GLIBC__)
  if (active_) malloc_trim(0);
#endif
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
