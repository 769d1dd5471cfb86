// Distinct keys of a batch, in order of first appearance, on a temporary
// open-addressing table of occurrence indices (a power of two >= 2n slots, empty =
// 0xffffffff: an index, never a key, so every int64 key is valid):
//  - DedupeInsert: each occurrence claims the first empty slot of its probe run or
//    lowers (atomicMin) the slot already holding its key to its own index, so the
//    slot ends at the key's first occurrence;
//  - DedupeFirst: each occurrence reads its key's first occurrence; first
//    occurrences are flagged, and an exclusive scan of the flags numbers the
//    distinct keys in order of first appearance;
//  - DedupeAssign: per occurrence its unique id; per unique its key, first and
//    last occurrence (atomicMax) and count (atomicAdd).
#pragma once

#include "hash.h"
#include "basic.cuh"

namespace embedstack {
namespace cuda {

constexpr uint32_t kEmptySlot = 0xffffffffu;

ES_HD inline size_t dedupeHome(int64_t key, size_t mask) {
  return static_cast<size_t>(hashKey(key)) & mask;
}

struct DedupeInsert {
  static constexpr const char* kName = "dedupeInsert";
  struct Args {
    const int64_t* keys;
    uint32_t* slots;
    size_t mask;
  };
  ES_HD static void thread(const Args& a, size_t i) {
    const int64_t key = a.keys[i];
    const uint32_t me = static_cast<uint32_t>(i);
    for (size_t s = dedupeHome(key, a.mask);; s = (s + 1) & a.mask) {
      uint32_t seen = loadRelaxedU32(&a.slots[s]);
      if (seen == kEmptySlot) {
        seen = atomicCasU32(&a.slots[s], kEmptySlot, me);
        if (seen == kEmptySlot) return;
      }
      if (a.keys[seen] == key) {
        atomicMinU32(&a.slots[s], me);
        return;
      }
    }
  }
};

struct DedupeFirst {
  static constexpr const char* kName = "dedupeFirst";
  struct Args {
    const int64_t* keys;
    const uint32_t* slots;
    size_t mask;
    uint32_t* first;    // [n] first occurrence of each occurrence's key
    uint32_t* isFirst;  // [n] 1 at first occurrences
  };
  ES_HD static void thread(const Args& a, size_t i) {
    const int64_t key = a.keys[i];
    size_t s = dedupeHome(key, a.mask);
    while (a.keys[a.slots[s]] != key) s = (s + 1) & a.mask;
    a.first[i] = a.slots[s];
    a.isFirst[i] = a.slots[s] == static_cast<uint32_t>(i) ? 1u : 0u;
  }
};

struct DedupeAssign {
  static constexpr const char* kName = "dedupeAssign";
  struct Args {
    const int64_t* keys;
    const uint32_t* first;
    const uint32_t* uniqueOfFirst;  // exclusive scan of isFirst
    uint32_t* uniqueOf;             // [n]
    int64_t* uniqueKeys;            // [u]
    uint32_t* firstOf;              // [u]
    uint32_t* lastOf;               // [u], zeroed
    uint32_t* countOf;              // [u], zeroed
  };
  ES_HD static void thread(const Args& a, size_t i) {
    const uint32_t f = a.first[i];
    const uint32_t u = a.uniqueOfFirst[f];
    a.uniqueOf[i] = u;
    if (f == static_cast<uint32_t>(i)) {
      a.uniqueKeys[u] = a.keys[i];
      a.firstOf[u] = f;
    }
    atomicAddU32(&a.countOf[u], 1u);
    atomicMaxU32(&a.lastOf[u], static_cast<uint32_t>(i));
  }
};

}  // namespace cuda
}  // namespace embedstack
