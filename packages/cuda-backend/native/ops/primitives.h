// Host drivers of the data-parallel primitives (kernels/scan.cuh, sort.cuh,
// select.cuh, dedupe.cuh). Pointers are in the Stage's memory space (device memory,
// or host memory in host mode); scratch comes from the Stage and lives as long as it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "buffer.h"
#include "select.cuh"

namespace embedstack {
namespace cuda {

/** out = exclusive prefix sums of in[0..n) (in place allowed); returns the total. */
uint32_t exclusiveScan(Stage& st, const uint32_t* in, uint32_t* out, size_t n);

/** Sorts (keys, values) by keys[0..n) < 2^keyBits, stably (equal keys keep their order). In place. */
void sortPairs(Stage& st, uint32_t* keys, uint32_t* values, size_t n, uint32_t keyBits);

/** The distinct keys of a batch (in order of first appearance) and where each occurs. */
struct Dedupe {
  size_t n = 0;
  size_t unique = 0;
  const int64_t* keys = nullptr;  // [n] the batch
  uint32_t* uniqueOf = nullptr;   // [n]
  int64_t* uniqueKeys = nullptr;  // [unique]
  uint32_t* firstOf = nullptr;    // [unique]
  uint32_t* lastOf = nullptr;     // [unique]
  uint32_t* countOf = nullptr;    // [unique]
  // With occurrence lists: occList[occOffsets[u] .. occOffsets[u + 1]) are u's occurrences in order.
  uint32_t* occOffsets = nullptr;  // [unique + 1]
  uint32_t* occList = nullptr;     // [n]
};
Dedupe dedupe(Stage& st, const int64_t* keys, size_t n, bool occurrenceLists);

/**
 * Decides which of c[0..n) to keep: the `keep` best by (score desc, new keys
 * first, smaller key). state[i] ends kKeep or kDrop.
 */
void selectKeep(Stage& st, const SelectCandidate* c, size_t n, size_t keep, uint8_t* state);

/** base + i for each i < n with flags[i] != 0, ascending, into out (sized n); returns how many. */
uint32_t compactIndices(Stage& st, const uint8_t* flags, size_t n, uint32_t* out, uint32_t base = 0);

}  // namespace cuda
}  // namespace embedstack
