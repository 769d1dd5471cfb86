// A shard plan (core's shardPlan.ts): which keys of a logical table split over N
// shards this table owns, and the local key each maps to.
//  - kAll ('localized', or no plan): every key, local key = key;
//  - kMod: key k owned when floorMod(k, N) == shard; local key k (dynamic tables)
//    or floor(k / N) (static tables: round-robin rows);
//  - kRange: keys [start, end), local key k - start.
// ES_HD: the CUDA backend evaluates plans in its kernels.
#pragma once

#include <cstdint>

#include "hd.h"

namespace embedstack {

struct ShardPlan {
  enum Kind : int { kAll = 0, kMod = 1, kRange = 2 };
  Kind kind = kAll;
  int64_t numShards = 1;
  int64_t shard = 0;
  int64_t start = 0;
  int64_t end = 0;
  bool roundRobin = false;

  ES_HD bool all() const { return kind == kAll; }

  /** True when this shard owns `k`; then *local is its local key. Exact on every int64. */
  ES_HD bool owns(int64_t k, int64_t* local) const {
    switch (kind) {
      case kAll:
        *local = k;
        return true;
      case kMod: {
        if ((numShards & (numShards - 1)) == 0) {
          // A power of two (1, 2, 4, 8 devices): floorMod is the low bits in two's
          // complement, no 64-bit division per key; floor(k / N) only for owned rows.
          if ((k & (numShards - 1)) != shard) return false;
          *local = roundRobin ? (k & ~(numShards - 1)) / numShards : k;
          return true;
        }
        int64_t q = k / numShards;
        int64_t r = k % numShards;
        if (r < 0) {
          r += numShards;
          q -= 1;
        }
        if (r != shard) return false;
        *local = roundRobin ? q : k;
        return true;
      }
      case kRange:
        if (k < start || k >= end) return false;
        *local = k - start;
        return true;
    }
    return false;
  }
};

/**
 * The owning part of every key when kMod plans over one n split the keys: the residue
 * floorMod(k, n) is owned by part[r] (or by no part: a value the caller chose), the local
 * key is k, or floor(k / n) for round-robin rows. Exact on every int64 (INT64_MIN
 * included); a power of two takes the low bits and an arithmetic shift, no division.
 * Host only. `part` is the caller's [n] array, which must outlive this view.
 */
struct ResidueOwners {
  const uint32_t* part = nullptr;
  int64_t n = 1;
  bool roundRobin = false;
  int64_t mask = -1;  // n - 1 when n is a power of two, else -1
  int shift = 0;

  ResidueOwners() = default;
  ResidueOwners(const uint32_t* parts, int64_t residues, bool rr) : part(parts), n(residues), roundRobin(rr) {
    if ((n & (n - 1)) == 0) {
      mask = n - 1;
      shift = __builtin_ctzll(static_cast<unsigned long long>(n));
    }
  }

  /** The part owning k; *local = its local key there. */
  uint32_t owner(int64_t k, int64_t* local) const {
    int64_t q;
    int64_t r;
    if (mask >= 0) {
      r = k & mask;
      q = k >> shift;
    } else {
      q = k / n;
      r = k % n;
      if (r < 0) {
        r += n;
        q -= 1;
      }
    }
    *local = roundRobin ? q : k;
    return part[r];
  }
};

}  // namespace embedstack
