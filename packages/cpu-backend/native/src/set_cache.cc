#include "set_cache.h"

#include <cstdlib>
#include <cstring>

#if defined(__SSE2__) && !defined(EMBEDSTACK_FORCE_SWAR)
#include <emmintrin.h>
#define EMBEDSTACK_CACHE_SSE2 1
#endif

#include "errors.h"
#include "hash.h"
#include "memory.h"

namespace embedstack {

namespace {

constexpr uint8_t kEmptyTag = 0x80;
/** Keys between two stages of a query's pipeline, and the ring holding the keys in flight. */
constexpr size_t kAhead = 8;
constexpr size_t kRing = 32;
static_assert(kRing >= 3 * kAhead + 1 && (kRing & (kRing - 1)) == 0, "the ring holds every key in flight");

inline uint8_t tagOf(uint64_t h) {
  return static_cast<uint8_t>(h & 0x7f);
}

/** Bit w set where tags[w] == tag, for the 16 tags at p. */
inline uint32_t match16(const uint8_t* p, uint8_t tag) {
#ifdef EMBEDSTACK_CACHE_SSE2
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(static_cast<char>(tag)))));
#else
  uint32_t m = 0;
  for (unsigned w = 0; w < 16; w++) m |= static_cast<uint32_t>(p[w] == tag) << w;
  return m;
#endif
}

}  // namespace

int64_t SetCache::find(int64_t key, uint64_t h) const {
  const uint64_t base = hashGroup(h, sets_) * ways_;
  const uint8_t tag = tagOf(h);
  const uint8_t* tags = tagData() + base;
  const Meta* slotMeta = metaData() + base;
  for (uint32_t w0 = 0; w0 < ways_; w0 += 16) {
    uint32_t m = match16(tags + w0, tag);
    if (ways_ - w0 < 16) m &= (1u << (ways_ - w0)) - 1;
    while (m != 0) {
      const unsigned w = w0 + static_cast<unsigned>(__builtin_ctz(m));
      if (slotMeta[w].key == key) return static_cast<int64_t>(base + w);
      m &= m - 1;
    }
  }
  return -1;
}

int64_t SetCache::firstCandidate(uint64_t base, uint8_t tag) const {
  const uint8_t* tags = tagData() + base;
  for (uint32_t w0 = 0; w0 < ways_; w0 += 16) {
    uint32_t m = match16(tags + w0, tag);
    if (ways_ - w0 < 16) m &= (1u << (ways_ - w0)) - 1;
    if (m != 0) return static_cast<int64_t>(base + w0 + static_cast<unsigned>(__builtin_ctz(m)));
  }
  return -1;
}

SetCache::SetCache(uint64_t capacity, uint32_t dim, uint32_t ways) : dim_(dim) {
  ES_CHECK(dim >= 1, kInvalidArgument, "Expected dim to be an integer >= 1 but received " << dim);
  ES_CHECK(ways >= 1 && ways <= kMaxWays && (ways & (ways - 1)) == 0, kInvalidArgument,
           "Expected ways to be a power of two in [1, " << kMaxWays << "] but received " << ways);
  ES_CHECK(capacity <= kMaxSlots, kInvalidArgument,
           "Expected capacity to be an integer in [0, " << kMaxSlots << "] but received " << capacity);
  ways_ = static_cast<uint32_t>(capacity < ways ? (capacity == 0 ? 1 : capacity) : ways);
  sets_ = (capacity + ways_ - 1) / ways_;
  const uint64_t slots = sets_ * ways_;
  const size_t floats = checkedMul(static_cast<size_t>(slots), dim, "the cache's rows");
  const size_t bytes = checkedAdd(checkedMul(floats, sizeof(float), "the cache's rows"),
                                  checkedMul(static_cast<size_t>(slots), 16, "the cache's slots"), "the cache");
  const size_t memory = physicalMemoryBytes();
  ES_CHECK(memory == 0 || bytes <= memory, kOutOfRange,
           "Expected the cache (capacity " << capacity << " x dim " << dim << ": " << bytes
                                           << " bytes) to fit in this machine's memory (" << memory << " bytes)");
  if (slots == 0) return;
  tags_.allocateZeroed(static_cast<size_t>(slots) + 16, "the cache's tags");
  std::memset(tagData(), kEmptyTag, static_cast<size_t>(slots) + 16);
  meta_.allocateZeroed(checkedMul(static_cast<size_t>(slots), sizeof(Meta), "the cache's slots"), "the cache's keys and stamps");
  values_.allocateZeroed(checkedMul(floats, sizeof(float), "the cache's rows"), "the cache's rows");
}

uint64_t SetCache::setOf(int64_t key) const {
  return hashGroup(hashKey(key), sets_);
}

size_t SetCache::query(const int64_t* keys, size_t n, float* out, uint8_t* exists) {
  if (sets_ == 0) {
    std::memset(exists, 0, n);
    if (n > 0) std::memset(out, 0, sizeof(float) * dim_ * n);
    return 0;
  }
  size_t hits = 0;
  const size_t rowBytes = sizeof(float) * dim_;
  const uint8_t* tags = tagData();
  Meta* meta = metaData();
  const float* rows = rowData();
  // A rolling pipeline: key i is hashed (and its set's tags prefetched) kAhead keys before its
  // tags are matched (and its slot's meta prefetched), kAhead before its key is confirmed (and its
  // row prefetched), kAhead before its row is copied; so each memory access has the work of
  // kAhead keys to arrive. Stamps are written in key order (stage 4).
  uint64_t hash[kRing];
  int64_t slot[kRing];
  for (size_t i = 0; i < n + 3 * kAhead; i++) {
    if (i < n) {  // 1: hash; prefetch the set's tags
      const size_t r = i & (kRing - 1);
      hash[r] = hashKey(keys[i]);
      __builtin_prefetch(tags + hashGroup(hash[r], sets_) * ways_);
    }
    if (i >= kAhead && i - kAhead < n) {  // 2: match the tags; prefetch the first candidate's key and stamp
      const size_t r = (i - kAhead) & (kRing - 1);
      slot[r] = firstCandidate(hashGroup(hash[r], sets_) * ways_, tagOf(hash[r]));
      if (slot[r] >= 0) __builtin_prefetch(meta + slot[r], 1);
    }
    if (i >= 2 * kAhead && i - 2 * kAhead < n) {  // 3: confirm the key (a tag collision: full search); prefetch the row
      const size_t k = i - 2 * kAhead;
      const size_t r = k & (kRing - 1);
      if (slot[r] >= 0 && meta[slot[r]].key != keys[k]) slot[r] = find(keys[k], hash[r]);
      if (slot[r] >= 0) {
        const char* row = reinterpret_cast<const char*>(rows + static_cast<size_t>(slot[r]) * dim_);
        for (size_t off = 0; off < rowBytes; off += 64) __builtin_prefetch(row + off);
      }
      // the output row too, for writing (a fresh output is not in cache: its lines are fetched meanwhile)
      const char* dst = reinterpret_cast<const char*>(out + k * dim_);
      for (size_t off = 0; off < rowBytes; off += 64) __builtin_prefetch(dst + off, 1);
    }
    if (i >= 3 * kAhead) {  // 4: copy the row (zeros for a miss) and stamp the slot
      const size_t k = i - 3 * kAhead;
      const int64_t s = slot[k & (kRing - 1)];
      if (s < 0) {
        std::memset(out + k * dim_, 0, rowBytes);
        exists[k] = 0;
        continue;
      }
      meta[s].stamp = ++clock_;
      std::memcpy(out + k * dim_, rows + static_cast<size_t>(s) * dim_, rowBytes);
      exists[k] = 1;
      hits++;
    }
  }
  return hits;
}

size_t SetCache::insert(const int64_t* keys, size_t n, const float* values) {
  if (sets_ == 0) return 0;
  size_t evicted = 0;
  const size_t rowBytes = sizeof(float) * dim_;
  for (size_t i = 0; i < n; i++) {
    const uint64_t h = hashKey(keys[i]);
    const uint64_t set = hashGroup(h, sets_);
    int64_t slot = find(keys[i], h);
    if (slot < 0) {
      // the first empty slot of the set, else its least recently used one
      const uint64_t base = set * ways_;
      uint64_t pick = base;
      for (uint32_t w = 0; w < ways_; w++) {
        if (metaData()[base + w].stamp == 0) {
          pick = base + w;
          break;
        }
        if (metaData()[base + w].stamp < metaData()[pick].stamp) pick = base + w;
      }
      if (metaData()[pick].stamp == 0) {
        size_++;
      } else {
        evicted++;
      }
      metaData()[pick].key = keys[i];
      tagData()[pick] = tagOf(h);
      slot = static_cast<int64_t>(pick);
    }
    metaData()[slot].stamp = ++clock_;
    std::memcpy(rowData() + static_cast<size_t>(slot) * dim_, values + i * dim_, rowBytes);
  }
  return evicted;
}

size_t SetCache::update(const int64_t* keys, size_t n, const float* values) {
  if (sets_ == 0) return 0;
  size_t updated = 0;
  for (size_t i = 0; i < n; i++) {
    const int64_t slot = find(keys[i], hashKey(keys[i]));
    if (slot < 0) continue;
    std::memcpy(rowData() + static_cast<size_t>(slot) * dim_, values + i * dim_, sizeof(float) * dim_);
    updated++;
  }
  return updated;
}

size_t SetCache::remove(const int64_t* keys, size_t n) {
  if (sets_ == 0) return 0;
  size_t removed = 0;
  for (size_t i = 0; i < n; i++) {
    const int64_t slot = find(keys[i], hashKey(keys[i]));
    if (slot < 0) continue;
    metaData()[slot].stamp = 0;
    tagData()[slot] = kEmptyTag;
    size_--;
    removed++;
  }
  return removed;
}

void SetCache::keys(int64_t* out) const {
  const uint64_t slots = capacity();
  size_t j = 0;
  for (uint64_t s = 0; s < slots; s++) {
    if (metaData()[s].stamp != 0) out[j++] = metaData()[s].key;
  }
}

void SetCache::clear() {
  if (sets_ == 0) return;
  std::memset(static_cast<void*>(metaData()), 0, sizeof(Meta) * capacity());
  std::memset(tagData(), kEmptyTag, static_cast<size_t>(capacity()));
  size_ = 0;
}

}  // namespace embedstack
