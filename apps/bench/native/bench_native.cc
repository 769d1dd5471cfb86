// Plain native peer loops for embedstack-bench: the "what a C++ developer writes
// by hand" ceiling our backend is held against: no hashing, a contiguous float arena
// [rows, dim] on huge pages and straightforward loops, split across std::threads when
// asked; the gather-reduce prefetches rows ahead (the ceiling must be a real one).
//
// Memory: each arena is one 64-byte aligned malloc'd block owned by a JS External
// (freed by its finalizer, or at once by freeArena). Outputs are caller-owned
// Float32Arrays. Not thread safe with respect to concurrent calls on one arena
// from several JS threads (the bench has one).

#include <napi.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace {

struct Arena {
  float* data = nullptr;
  float* copyDst = nullptr;  // lazily allocated destination of copyArena
  size_t rows = 0;
  size_t dim = 0;
  size_t bytes() const { return rows * dim * sizeof(float); }
  void release() {
    std::free(data);
    std::free(copyDst);
    data = copyDst = nullptr;
    rows = 0;
  }
};

float* allocFloats(size_t count) {
  constexpr size_t kHuge = size_t(2) << 20;
  size_t bytes = ((count * sizeof(float)) + 63) / 64 * 64;
  if (bytes == 0) bytes = 64;
  if (bytes < kHuge) return static_cast<float*>(std::aligned_alloc(64, bytes));
  // From 2 MiB: 2 MiB aligned and advised to use huge pages before the first touch, as the
  // backend's tables are from 2 MiB (random reads over them would otherwise miss the TLB on
  // every line: this VM's transparent huge pages are madvise-only). Until stop 38 only from
  // 8 MiB, which left the hash-bag ceiling's 4.9 MiB index of a 1M-key table on 4 KiB pages.
  bytes = (bytes + kHuge - 1) / kHuge * kHuge;
  void* p = std::aligned_alloc(kHuge, bytes);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p) madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return static_cast<float*>(p);
}

// Runs f(begin, end) over [0, n) split into `threads` contiguous chunks.
template <class F>
void parallelFor(size_t n, int threads, F f) {
  if (threads <= 1 || n < 2) {
    f(size_t{0}, n);
    return;
  }
  size_t t = std::min<size_t>(static_cast<size_t>(threads), n);
  size_t chunk = (n + t - 1) / t;
  std::vector<std::thread> pool;
  for (size_t i = 1; i < t; i++) {
    size_t b = i * chunk, e = std::min(n, b + chunk);
    if (b < e) pool.emplace_back(f, b, e);
  }
  f(size_t{0}, std::min(n, chunk));
  for (auto& th : pool) th.join();
}

Napi::Value fail(const Napi::Env& env, const char* message) {
  Napi::TypeError::New(env, message).ThrowAsJavaScriptException();
  return env.Undefined();
}

Arena* arenaArg(const Napi::CallbackInfo& info, size_t i) {
  if (info.Length() <= i || !info[i].IsExternal()) return nullptr;
  Arena* a = info[i].As<Napi::External<Arena>>().Data();
  return a->data ? a : nullptr;
}

int threadsArg(const Napi::CallbackInfo& info, size_t i) {
  if (info.Length() <= i || !info[i].IsNumber()) return 1;
  int t = info[i].As<Napi::Number>().Int32Value();
  return t < 1 ? 1 : t;
}

template <class T, napi_typedarray_type K>
bool typedArg(const Napi::CallbackInfo& info, size_t i, T*& ptr, size_t& len) {
  if (info.Length() <= i || !info[i].IsTypedArray()) return false;
  auto ta = info[i].As<Napi::TypedArray>();
  if (ta.TypedArrayType() != K) return false;
  auto arr = info[i].As<Napi::TypedArrayOf<T>>();
  ptr = arr.Data();
  len = arr.ElementLength();
  return true;
}

// createArena(rows, dim, threads) -> External; every page is written (resident).
Napi::Value CreateArena(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsNumber()) return fail(env, "createArena(rows, dim, threads?)");
  double rows = info[0].As<Napi::Number>().DoubleValue();
  double dim = info[1].As<Napi::Number>().DoubleValue();
  if (!(rows >= 1 && dim >= 1 && rows * dim < 9e15)) return fail(env, "Expected rows >= 1 and dim >= 1");
  auto* a = new Arena();
  a->rows = static_cast<size_t>(rows);
  a->dim = static_cast<size_t>(dim);
  a->data = allocFloats(a->rows * a->dim);
  if (!a->data) {
    delete a;
    Napi::Error::New(env, "createArena: out of memory").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  float* d = a->data;
  parallelFor(a->rows * a->dim, threadsArg(info, 2), [d](size_t b, size_t e) {
    for (size_t i = b; i < e; i++) d[i] = static_cast<float>((i * 2654435761u) & 0xffff) / 65536.0f - 0.5f;
  });
  return Napi::External<Arena>::New(env, a, [](Napi::Env, Arena* p) {
    p->release();
    delete p;
  });
}

// freeArena(arena): releases the memory now (the External stays, unusable).
Napi::Value FreeArena(const Napi::CallbackInfo& info) {
  if (Arena* a = arenaArg(info, 0)) a->release();
  return info.Env().Undefined();
}

// copyArena(arena, threads) -> bytes copied (the whole arena into a twin buffer).
Napi::Value CopyArena(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Arena* a = arenaArg(info, 0);
  if (!a) return fail(env, "copyArena(arena, threads)");
  int threads = threadsArg(info, 1);
  size_t bytes = a->bytes();
  if (!a->copyDst) {
    a->copyDst = allocFloats(a->rows * a->dim);
    if (!a->copyDst) {
      Napi::Error::New(env, "copyArena: out of memory").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    std::memset(a->copyDst, 0, bytes);
  }
  const char* src = reinterpret_cast<const char*>(a->data);
  char* dst = reinterpret_cast<char*>(a->copyDst);
  const size_t block = 1 << 20;
  size_t blocks = (bytes + block - 1) / block;
  parallelFor(blocks, threads, [=](size_t b, size_t e) {
    size_t from = b * block, to = std::min(bytes, e * block);
    std::memcpy(dst + from, src + from, to - from);
  });
  return Napi::Number::New(env, static_cast<double>(bytes));
}

// gather(arena, rows: Uint32Array, out: Float32Array, threads): out[i] = arena[rows[i]].
Napi::Value Gather(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Arena* a = arenaArg(info, 0);
  uint32_t* idx;
  float* out;
  size_t n, outLen;
  if (!a || !typedArg<uint32_t, napi_uint32_array>(info, 1, idx, n) || !typedArg<float, napi_float32_array>(info, 2, out, outLen)) {
    return fail(env, "gather(arena, rows: Uint32Array, out: Float32Array, threads)");
  }
  const size_t dim = a->dim, rows = a->rows;
  if (outLen < n * dim) return fail(env, "gather: out is shorter than rows.length * dim");
  const float* data = a->data;
  parallelFor(n, threadsArg(info, 3), [=](size_t b, size_t e) {
    for (size_t i = b; i < e; i++) {
      size_t r = idx[i];
      if (r < rows) std::memcpy(out + i * dim, data + r * dim, dim * sizeof(float));
    }
  });
  return env.Undefined();
}

// Calls ask(address) once for every 64-byte cache line that a row of the arena, rowBytes at
// `row`, touches: an address every 64 bytes from its first byte (four per step: an aligned
// dim-64 row in one step), then its last byte when that lies a line further than the last
// step's, as when a row starts late in a line (dim 12 from byte 32: 48 bytes over 2 lines, one
// step). A row of whole lines (dim a multiple of 16) starts on a line in the arena, so it
// needs no more. CPU time of gatherReduce (26 ids a bag, 2M rows) against the steps alone,
// which missed those lines, both addons in one process at load 6-7: dims 12 and 7 0.54-0.66x,
// dims 36 (no line missed) and 64 0.98-1.02x (the old addon against itself: 0.92-1.17x);
// asking for the last byte of every row instead cost 1.12-1.14x at dim 36.
template <class Ask>
__attribute__((always_inline)) inline void eachLine(const void* row, size_t rowBytes, Ask ask) {
  const char* p = reinterpret_cast<const char*>(row);
  size_t off = 0;
  for (; off + 256 <= rowBytes; off += 256) {
    ask(p + off);
    ask(p + off + 64);
    ask(p + off + 128);
    ask(p + off + 192);
  }
  for (; off < rowBytes; off += 64) ask(p + off);
  // the row's start within its line plus the bytes past its whole lines: over 64 when the last byte is a line further
  if ((reinterpret_cast<uintptr_t>(p) & 63) + rowBytes % 64 > 64) ask(p + rowBytes - 1);
}

// Asks for every cache line of a row, into every level (kLocality 3) or L2 and beyond (2).
template <int kLocality>
__attribute__((always_inline)) inline void prefetchRow(const float* row, size_t rowBytes) {
  eachLine(row, rowBytes, [](const char* line) { __builtin_prefetch(line, 0, kLocality); });
}

// The prefetches of one id of a bag's first column block: the row `ahead` ids on into L2, and
// again, `near` ids on, into L1 (ids past `idEnd` or out of range: none).
struct Prefetch {
  const float* data;
  const uint32_t* ids;
  size_t rows, dim, rowBytes;
  int32_t ahead, near, idEnd;
  __attribute__((always_inline)) inline void at(int32_t j) const {
    if (j + ahead < idEnd && ids[j + ahead] < rows) prefetchRow<2>(data + size_t{ids[j + ahead]} * dim, rowBytes);
    if (j + near < idEnd && ids[j + near] < rows) prefetchRow<3>(data + size_t{ids[j + near]} * dim, rowBytes);
  }
};

// Sums columns [d0, d0 + W) of the bag's rows ids[from..to) into a local array of fixed width
// (the compiler keeps it in vector registers: no store and reload per row), then stores them
// once, scaled; prefetching as `pf` says when `prefetch`.
template <size_t W>
__attribute__((always_inline)) inline void sumColumns(const Prefetch& pf, bool prefetch, int32_t from, int32_t to, size_t d0, float scale, float* __restrict dst) {
  float acc[W] = {};
  for (int32_t j = from; j < to; j++) {
    if (prefetch) pf.at(j);
    const size_t row = pf.ids[j];
    if (row >= pf.rows) continue;
    const float* __restrict src = pf.data + row * pf.dim + d0;
    for (size_t d = 0; d < W; d++) acc[d] += src[d];
  }
  for (size_t d = 0; d < W; d++) dst[d0 + d] = acc[d] * scale;
}

// The same for the last w < 64 columns of a row whose dim is not a multiple of 64.
inline void sumTail(const Prefetch& pf, bool prefetch, int32_t from, int32_t to, size_t d0, size_t w, float scale, float* __restrict dst) {
  float acc[64] = {};
  for (int32_t j = from; j < to; j++) {
    if (prefetch) pf.at(j);
    const size_t row = pf.ids[j];
    if (row >= pf.rows) continue;
    const float* __restrict src = pf.data + row * pf.dim + d0;
    for (size_t d = 0; d < w; d++) acc[d] += src[d];
  }
  for (size_t d = 0; d < w; d++) dst[d0 + d] = acc[d] * scale;
}

// gatherReduce(arena, splits: Int32Array [nrows+1], ids: Uint32Array, out: Float32Array
// [nrows*dim], mean: boolean, threads): out[r] = sum (or mean) of arena rows ids[splits[r]..splits[r+1]).
Napi::Value GatherReduce(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Arena* a = arenaArg(info, 0);
  int32_t* splits;
  uint32_t* ids;
  float* out;
  size_t ns, nids, outLen;
  if (!a || !typedArg<int32_t, napi_int32_array>(info, 1, splits, ns) || !typedArg<uint32_t, napi_uint32_array>(info, 2, ids, nids) ||
      !typedArg<float, napi_float32_array>(info, 3, out, outLen) || ns < 1) {
    return fail(env, "gatherReduce(arena, splits: Int32Array, ids: Uint32Array, out: Float32Array, mean, threads)");
  }
  const size_t nrows = ns - 1, dim = a->dim, rows = a->rows;
  if (outLen < nrows * dim) return fail(env, "gatherReduce: out is shorter than nrows * dim");
  if (splits[0] != 0 || static_cast<size_t>(splits[nrows]) > nids) return fail(env, "gatherReduce: bad splits");
  for (size_t r = 0; r < nrows; r++) {
    if (splits[r + 1] < splits[r]) return fail(env, "gatherReduce: splits must be non-decreasing");
  }
  const bool mean = info.Length() > 4 && info[4].ToBoolean().Value();
  const float* data = a->data;
  // The ceiling loop (issue #14: at least as fast as PyTorch's EmbeddingBag): rows are random
  // reads from a large arena, so the loop is bound by how many misses are in flight. It asks for
  // each row about 6 KiB of rows ahead (24 ids at dim 64) into L2, and again a third of that
  // ahead into L1 (the CPU backend's bag kernels do the same: column_blocks.h; one prefetch into
  // L1 24 ahead read 0.7x PyTorch here), and sums each bag in blocks of 64 columns held in a
  // local array the compiler keeps in vector registers, in float, in bag order.
  const size_t rowBytes = dim * sizeof(float);
  const int32_t ahead = static_cast<int32_t>(std::min<size_t>(32, std::max<size_t>(2, 6144 / rowBytes)));
  const int32_t near = std::max<int32_t>(1, ahead / 3);
  constexpr size_t kBlock = 64;
  parallelFor(nrows, threadsArg(info, 5), [=](size_t b, size_t e) {
    const Prefetch pf{data, ids, rows, dim, rowBytes, ahead, near, splits[e]};
    for (int32_t j = splits[b]; j < std::min(splits[b] + ahead, pf.idEnd); j++) {
      if (ids[j] < rows) prefetchRow<2>(data + size_t{ids[j]} * dim, rowBytes);
    }
    for (int32_t j = splits[b]; j < std::min(splits[b] + near, pf.idEnd); j++) {
      if (ids[j] < rows) prefetchRow<3>(data + size_t{ids[j]} * dim, rowBytes);
    }
    for (size_t r = b; r < e; r++) {
      const int32_t from = splits[r], to = splits[r + 1];
      const float scale = mean && to > from ? 1.0f / static_cast<float>(to - from) : 1.0f;
      float* dst = out + r * dim;
      size_t d0 = 0;
      for (; d0 + kBlock <= dim; d0 += kBlock) sumColumns<kBlock>(pf, d0 == 0, from, to, d0, scale, dst);
      if (d0 < dim) sumTail(pf, d0 == 0, from, to, d0, dim - d0, scale, dst);
    }
  });
  return env.Undefined();
}

// ---- The hash-indexed bag's ceiling (issue #14) ----------------------------------------------
//
// What a dynamic (hash-indexed) table's bag must read per id, with the least work around it:
// one random 64-byte line of an array the size of the table's hash index (its group), then,
// from a word of that line, a 12-byte record at the id's row in an array the size of the
// table's key/score records (its key compared, its score stored), then the row itself, pooled
// into the bag's output as gatherReduce pools it (float sums in registers, bag order: the same
// output bits). No probe: every id's group is one multiply-shift of the id, the word is the row
// offset (0: the record and row are the id's own, but the CPU cannot know it before the line
// arrives, so the record and row wait on the index line as they wait on a real probe), no
// overflow, no wrong candidate. A dynamic bag with the cpu backend's current layout (index,
// 12-byte key/score record, row: three arrays) over a table of these sizes cannot touch fewer
// lines, so this loop bounds it (a layout with the key and score inside the row record would
// touch one line fewer, and is not bounded by it): the dynamic bag / this loop is how close the
// table comes to what its layout allows on this machine, and this loop / gatherReduce is what the two extra
// lines per id cost here (MEASUREMENTS.md: on a VM whose host maps guest memory in 4 KiB pages
// each random line past ~12 MB of footprint is a nested page walk).

struct HashLayout {
  uint8_t* index = nullptr;  // groups x 64 bytes, every 4-byte word 0
  size_t groups = 0;
  char* records = nullptr;  // rows x 12 bytes: int64 key (the row number), uint32 score
  size_t rows = 0;
  uint32_t clock = 0;  // the score a call stores (bumped per call)
  void release() {
    std::free(index);
    std::free(records);
    index = nullptr;
    records = nullptr;
    groups = rows = 0;
  }
};

constexpr size_t kRecordBytes = 12;

HashLayout* layoutArg(const Napi::CallbackInfo& info, size_t i) {
  if (info.Length() <= i || !info[i].IsExternal()) return nullptr;
  HashLayout* l = info[i].As<Napi::External<HashLayout>>().Data();
  return l->index ? l : nullptr;
}

// createHashLayout(indexBytes, rows, threads) -> External: an index of indexBytes / 64 groups
// (at least 1) and rows 12-byte records, every page written.
Napi::Value CreateHashLayout(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsNumber()) return fail(env, "createHashLayout(indexBytes, rows, threads?)");
  const double indexBytes = info[0].As<Napi::Number>().DoubleValue();
  const double rows = info[1].As<Napi::Number>().DoubleValue();
  if (!(indexBytes >= 0 && indexBytes < 1e12 && rows >= 1 && rows < 4e9)) return fail(env, "Expected indexBytes in [0, 1e12) and rows in [1, 4e9)");
  auto* l = new HashLayout();
  l->groups = std::max<size_t>(1, static_cast<size_t>(indexBytes) / 64);
  l->rows = static_cast<size_t>(rows);
  l->index = reinterpret_cast<uint8_t*>(allocFloats(l->groups * 16));
  l->records = reinterpret_cast<char*>(allocFloats((l->rows * kRecordBytes + 3) / 4));
  if (!l->index || !l->records) {
    l->release();
    delete l;
    Napi::Error::New(env, "createHashLayout: out of memory").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  const int threads = threadsArg(info, 2);
  uint8_t* index = l->index;
  parallelFor(l->groups, threads, [index](size_t b, size_t e) { std::memset(index + b * 64, 0, (e - b) * 64); });
  char* records = l->records;
  parallelFor(l->rows, threads, [records](size_t b, size_t e) {
    for (size_t r = b; r < e; r++) {
      const int64_t key = static_cast<int64_t>(r);
      const uint32_t score = 0;
      std::memcpy(records + r * kRecordBytes, &key, 8);
      std::memcpy(records + r * kRecordBytes + 8, &score, 4);
    }
  });
  return Napi::External<HashLayout>::New(env, l, [](Napi::Env, HashLayout* p) {
    p->release();
    delete p;
  });
}

// freeHashLayout(layout): releases the memory now (the External stays, unusable).
Napi::Value FreeHashLayout(const Napi::CallbackInfo& info) {
  if (HashLayout* l = layoutArg(info, 0)) l->release();
  return info.Env().Undefined();
}

// How the hash bag runs: its passes and prefetch distances (hashBagReduce's tuning argument).
// Without one: variant 1 while the index and records together fit 8 MiB, else variant 0, with
// the distances below: the fastest measured here at 64K / 256K and at 1M / 4M keys (CPU time,
// cpu-backend MEASUREMENTS.md "The hash-indexed bag's ceiling", Nov 30 2026).
struct HashBagTuning {
  int variant = 0;          // 0: passes A, B, C (the dynamic bag's); 1: A, then B and the pooling in one loop; 2: one pipelined loop
  size_t chunk = 1024;      // ids per chunk (bag rows are never split; a longer bag row is one chunk)
  size_t indexAhead = 64;   // ids ahead an index line is asked for (pass A / the pipeline's first stage)
  size_t recordAhead = 32;  // ids ahead a record and its row are asked for, into L2
  size_t rowNear = 8;       // ids ahead the row is asked for again, into L1 (pooling)
  bool touch = true;        // store the score (as an lru table's read does)
  bool recordForWrite = false;  // the record asked for writing (prefetchw) rather than reading
};

struct HashBagView {
  const uint8_t* index;
  size_t groups;
  char* records;
  const float* data;
  size_t rows;  // min(layout rows, arena rows): ids at or past it are skipped
  size_t dim;
  size_t rowBytes;
  uint32_t clock;
  bool touch;
  bool recordForWrite;

  __attribute__((always_inline)) const uint8_t* line(uint32_t id) const {
    const uint64_t h = uint64_t{id} * 0x9E3779B97F4A7C15ull;
    return index + (((h >> 32) * groups) >> 32) * 64;
  }
  __attribute__((always_inline)) void askLine(uint32_t id) const {
    if (id < rows) __builtin_prefetch(line(id), 0, 3);
  }
  // The candidate row: the id plus the word of its line at the slot its hash names (0).
  __attribute__((always_inline)) uint32_t candidate(uint32_t id) const {
    if (id >= rows) return UINT32_MAX;
    const uint64_t h = uint64_t{id} * 0x9E3779B97F4A7C15ull;
    uint32_t word;
    std::memcpy(&word, line(id) + ((h >> 8) & 15) * 4, 4);
    return id + word;
  }
  __attribute__((always_inline)) void askRecordAndRow(uint32_t c, int rowLocality) const {
    if (c >= rows) return;
    const char* rec = records + size_t{c} * kRecordBytes;
    if (recordForWrite) {
      __builtin_prefetch(rec, 1, 2);
      __builtin_prefetch(rec + kRecordBytes - 1, 1, 2);
    } else {
      __builtin_prefetch(rec, 0, 2);
      __builtin_prefetch(rec + kRecordBytes - 1, 0, 2);
    }
    if (rowLocality == 3) {
      prefetchRow<3>(data + size_t{c} * dim, rowBytes);
    } else {
      prefetchRow<2>(data + size_t{c} * dim, rowBytes);
    }
  }
  // The row of candidate c when its record's key is c (its score stored), else nullptr.
  __attribute__((always_inline)) const float* resolve(uint32_t c) const {
    if (c >= rows) return nullptr;
    char* rec = records + size_t{c} * kRecordBytes;
    int64_t key;
    std::memcpy(&key, rec, 8);
    if (key != static_cast<int64_t>(c)) return nullptr;
    if (touch) {
      // as the table's storeReadScore: relaxed atomics (the other thread may read the same id),
      // an unchanged score not stored, without a branch (records are 4-aligned: 12 bytes from a line)
      uint32_t* score = reinterpret_cast<uint32_t*>(rec + 8);
      uint32_t unused;
      uint32_t* dst = __atomic_load_n(score, __ATOMIC_RELAXED) != clock ? score : &unused;
      __atomic_store_n(dst, clock, __ATOMIC_RELAXED);
    }
    return data + size_t{c} * dim;
  }
};

// out[dst row] = columns [d0, d0 + W) of the sum of rows p[from..to) (nullptr: skipped), scaled.
// When `prefetch`, asks for p[j + ahead] into L2 and p[j + near] into L1 first.
template <size_t W>
__attribute__((always_inline)) inline void sumPointers(const float* const* p, size_t from, size_t to, size_t end, bool prefetch, size_t ahead, size_t near,
                                                       size_t rowBytes, size_t d0, size_t w, float scale, float* __restrict dst) {
  float acc[W] = {};
  for (size_t j = from; j < to; j++) {
    if (prefetch) {
      if (j + ahead < end && p[j + ahead]) prefetchRow<2>(p[j + ahead], rowBytes);
      if (j + near < end && p[j + near]) prefetchRow<3>(p[j + near], rowBytes);
    }
    const float* __restrict src = p[j];
    if (!src) continue;
    src += d0;
    for (size_t d = 0; d < (W == 64 ? W : w); d++) acc[d] += src[d];
  }
  for (size_t d = 0; d < (W == 64 ? W : w); d++) dst[d0 + d] = acc[d] * scale;
}

// Pools bag rows [r0, r1) (entries [e0, ..) of p, indexed from e0) into out, as gatherReduce.
inline void poolPointers(const float* const* p, const int32_t* splits, size_t r0, size_t r1, size_t end, size_t ahead, size_t near, bool mean,
                         size_t dim, size_t rowBytes, float* out) {
  const size_t e0 = static_cast<size_t>(splits[r0]);
  for (size_t r = r0; r < r1; r++) {
    const size_t from = static_cast<size_t>(splits[r]) - e0, to = static_cast<size_t>(splits[r + 1]) - e0;
    const float scale = mean && to > from ? 1.0f / static_cast<float>(to - from) : 1.0f;
    float* dst = out + r * dim;
    size_t d0 = 0;
    for (; d0 + 64 <= dim; d0 += 64) sumPointers<64>(p, from, to, end, d0 == 0, ahead, near, rowBytes, d0, 64, scale, dst);
    if (d0 < dim) sumPointers<63>(p, from, to, end, d0 == 0, ahead, near, rowBytes, d0, dim - d0, scale, dst);
  }
}

// One thread's bag rows [b, e) in chunks.
void hashBagRange(const HashBagView& v, const HashBagTuning& t, const int32_t* splits, const uint32_t* ids, size_t b, size_t e, bool mean, float* out) {
  std::vector<uint32_t> cand;
  std::vector<const float*> rowp;
  const size_t rowAhead = std::min<size_t>(32, std::max<size_t>(2, 6144 / v.rowBytes));  // gatherReduce's distance
  for (size_t r0 = b; r0 < e;) {
    size_t r1 = r0 + 1;
    const size_t e0 = static_cast<size_t>(splits[r0]);
    while (r1 < e && static_cast<size_t>(splits[r1 + 1]) - e0 <= t.chunk) r1++;
    const size_t m = static_cast<size_t>(splits[r1]) - e0;
    const uint32_t* cid = ids + e0;
    if (cand.size() < m) {
      cand.resize(m);
      rowp.resize(m);
    }
    uint32_t* c = cand.data();
    const float** p = rowp.data();
    if (t.variant == 2) {
      // One loop: the index line indexAhead ids on, the record and row recordAhead on (from
      // that id's line), the id's own record checked and its row pooled.
      const size_t lag = t.indexAhead > t.recordAhead ? t.indexAhead - t.recordAhead : 1;
      for (size_t j = 0; j < std::min(m, t.indexAhead); j++) v.askLine(cid[j]);
      for (size_t j = 0; j < std::min(m, lag); j++) {
        c[j] = v.candidate(cid[j]);
        v.askRecordAndRow(c[j], 2);
      }
      for (size_t r = r0; r < r1; r++) {
        const size_t from = static_cast<size_t>(splits[r]) - e0, to = static_cast<size_t>(splits[r + 1]) - e0;
        const float scale = mean && to > from ? 1.0f / static_cast<float>(to - from) : 1.0f;
        float* dst = out + r * v.dim;
        // columns in blocks: the first block runs the stages, later blocks reread the rows
        size_t d0 = 0;
        for (; d0 < v.dim; d0 += 64) {
          const size_t w = std::min<size_t>(64, v.dim - d0);
          float acc[64] = {};
          for (size_t j = from; j < to; j++) {
            if (d0 == 0) {
              if (j + t.indexAhead < m) v.askLine(cid[j + t.indexAhead]);
              if (j + lag < m) {
                c[j + lag] = v.candidate(cid[j + lag]);
                v.askRecordAndRow(c[j + lag], 2);
              }
              if (t.rowNear < lag && j + t.rowNear < m && c[j + t.rowNear] < v.rows) prefetchRow<3>(v.data + size_t{c[j + t.rowNear]} * v.dim, v.rowBytes);
              p[j] = v.resolve(c[j]);
            }
            const float* src = p[j];
            if (!src) continue;
            src += d0;
            if (w == 64) {
              for (size_t d = 0; d < 64; d++) acc[d] += src[d];
            } else {
              for (size_t d = 0; d < w; d++) acc[d] += src[d];
            }
          }
          for (size_t d = 0; d < w; d++) dst[d0 + d] = acc[d] * scale;
        }
      }
      r0 = r1;
      continue;
    }
    // A: index lines indexAhead ahead, candidates.
    for (size_t j = 0; j < std::min(m, t.indexAhead); j++) v.askLine(cid[j]);
    for (size_t j = 0; j < m; j++) {
      if (j + t.indexAhead < m) v.askLine(cid[j + t.indexAhead]);
      c[j] = v.candidate(cid[j]);
    }
    if (t.variant == 0) {
      // B: records and rows into L2 recordAhead ahead, keys compared, scores stored; C: pooled.
      for (size_t j = 0; j < std::min(m, t.recordAhead); j++) v.askRecordAndRow(c[j], 2);
      for (size_t j = 0; j < m; j++) {
        if (j + t.recordAhead < m) v.askRecordAndRow(c[j + t.recordAhead], 2);
        p[j] = v.resolve(c[j]);
      }
      poolPointers(p, splits, r0, r1, m, rowAhead, t.rowNear, mean, v.dim, v.rowBytes, out);
    } else {
      // B and the pooling in one loop: records and rows into L2 recordAhead ahead, rows into L1 rowNear ahead.
      for (size_t j = 0; j < std::min(m, t.recordAhead); j++) v.askRecordAndRow(c[j], 2);
      for (size_t r = r0; r < r1; r++) {
        const size_t from = static_cast<size_t>(splits[r]) - e0, to = static_cast<size_t>(splits[r + 1]) - e0;
        const float scale = mean && to > from ? 1.0f / static_cast<float>(to - from) : 1.0f;
        float* dst = out + r * v.dim;
        size_t d0 = 0;
        for (; d0 < v.dim; d0 += 64) {
          const size_t w = std::min<size_t>(64, v.dim - d0);
          float acc[64] = {};
          for (size_t j = from; j < to; j++) {
            if (d0 == 0) {
              if (j + t.recordAhead < m) v.askRecordAndRow(c[j + t.recordAhead], 2);
              if (j + t.rowNear < m && c[j + t.rowNear] < v.rows) prefetchRow<3>(v.data + size_t{c[j + t.rowNear]} * v.dim, v.rowBytes);
              p[j] = v.resolve(c[j]);
            }
            const float* src = p[j];
            if (!src) continue;
            src += d0;
            if (w == 64) {
              for (size_t d = 0; d < 64; d++) acc[d] += src[d];
            } else {
              for (size_t d = 0; d < w; d++) acc[d] += src[d];
            }
          }
          for (size_t d = 0; d < w; d++) dst[d0 + d] = acc[d] * scale;
        }
      }
    }
    r0 = r1;
  }
}

// hashBagReduce(layout, arena, splits: Int32Array, ids: Uint32Array, out: Float32Array, mean, threads,
// tuning?: Float64Array [variant, chunk, indexAhead, recordAhead, rowNear, touch, recordForWrite]): out as
// gatherReduce's (same bits), reading per id an index line and a record of the layout first.
Napi::Value HashBagReduce(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  HashLayout* l = layoutArg(info, 0);
  Arena* a = arenaArg(info, 1);
  int32_t* splits;
  uint32_t* ids;
  float* out;
  size_t ns, nids, outLen;
  if (!l || !a || !typedArg<int32_t, napi_int32_array>(info, 2, splits, ns) || !typedArg<uint32_t, napi_uint32_array>(info, 3, ids, nids) ||
      !typedArg<float, napi_float32_array>(info, 4, out, outLen) || ns < 1) {
    return fail(env, "hashBagReduce(layout, arena, splits: Int32Array, ids: Uint32Array, out: Float32Array, mean, threads, tuning?)");
  }
  const size_t nrows = ns - 1, dim = a->dim;
  if (outLen < nrows * dim) return fail(env, "hashBagReduce: out is shorter than nrows * dim");
  if (splits[0] != 0 || static_cast<size_t>(splits[nrows]) > nids) return fail(env, "hashBagReduce: bad splits");
  for (size_t r = 0; r < nrows; r++) {
    if (splits[r + 1] < splits[r]) return fail(env, "hashBagReduce: splits must be non-decreasing");
  }
  const bool mean = info.Length() > 5 && info[5].ToBoolean().Value();
  HashBagTuning t;
  t.variant = l->groups * 64 + l->rows * kRecordBytes <= (size_t{8} << 20) ? 1 : 0;
  if (info.Length() > 7 && !info[7].IsUndefined()) {
    double* tune;
    size_t nt;
    if (!typedArg<double, napi_float64_array>(info, 7, tune, nt) || nt != 7) return fail(env, "hashBagReduce: tuning is a Float64Array of 7");
    const auto at = [&](size_t i, double lo, double hi) { return tune[i] >= lo && tune[i] <= hi; };
    if (!at(0, 0, 2) || !at(1, 1, 1 << 20) || !at(2, 1, 1024) || !at(3, 1, 1024) || !at(4, 1, 1024) || !at(5, 0, 1) || !at(6, 0, 1)) {
      return fail(env, "hashBagReduce: tuning out of range");
    }
    t = HashBagTuning{static_cast<int>(tune[0]), static_cast<size_t>(tune[1]), static_cast<size_t>(tune[2]), static_cast<size_t>(tune[3]),
                      static_cast<size_t>(tune[4]), tune[5] != 0, tune[6] != 0};
  }
  const HashBagView v{l->index, l->groups, l->records, a->data, std::min(l->rows, a->rows), dim, dim * sizeof(float), ++l->clock, t.touch, t.recordForWrite};
  parallelFor(nrows, threadsArg(info, 6), [&](size_t b, size_t e) { hashBagRange(v, t, splits, ids, b, e, mean, out); });
  return env.Undefined();
}

// rowLines(startByte, rowBytes): the lines the gather-reduce prefetches for a row that starts
// startByte bytes past a 64-byte aligned address (as a row of the arena can: rowBytes a
// multiple of 64 only from a line's start), as byte offsets of their starts from it (tests).
Napi::Value RowLines(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsNumber()) return fail(env, "rowLines(startByte, rowBytes)");
  const double start = info[0].As<Napi::Number>().DoubleValue(), bytes = info[1].As<Napi::Number>().DoubleValue();
  if (!(start >= 0 && start < 65536 && bytes >= 0 && bytes < 65536)) return fail(env, "rowLines: startByte and rowBytes in [0, 65536)");
  alignas(64) static char base[2 * 65536];  // never read: only its addresses are used
  std::vector<double> lines;
  eachLine(base + static_cast<size_t>(start), static_cast<size_t>(bytes), [&](const char* line) { lines.push_back(static_cast<double>((reinterpret_cast<uintptr_t>(line) & ~uintptr_t{63}) - reinterpret_cast<uintptr_t>(base))); });
  Napi::Array out = Napi::Array::New(env, lines.size());
  for (size_t i = 0; i < lines.size(); i++) out.Set(static_cast<uint32_t>(i), lines[i]);
  return out;
}

Napi::Value HardwareThreads(const Napi::CallbackInfo& info) {
  unsigned t = std::thread::hardware_concurrency();
  return Napi::Number::New(info.Env(), t == 0 ? 1 : t);
}

// Returns the C heap's free pages to the OS (glibc's malloc_trim); false where there is none.
// The memory suite trims before each RSS reading, so that a table's own trims cannot return, and
// be credited with, memory the process held before it was filled.
Napi::Value TrimHeap(const Napi::CallbackInfo& info) {
#if defined(__GLIBC__)
  malloc_trim(0);
  return Napi::Boolean::New(info.Env(), true);
#else
  return Napi::Boolean::New(info.Env(), false);
#endif
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("createArena", Napi::Function::New(env, CreateArena));
  exports.Set("freeArena", Napi::Function::New(env, FreeArena));
  exports.Set("copyArena", Napi::Function::New(env, CopyArena));
  exports.Set("gather", Napi::Function::New(env, Gather));
  exports.Set("gatherReduce", Napi::Function::New(env, GatherReduce));
  exports.Set("createHashLayout", Napi::Function::New(env, CreateHashLayout));
  exports.Set("freeHashLayout", Napi::Function::New(env, FreeHashLayout));
  exports.Set("hashBagReduce", Napi::Function::New(env, HashBagReduce));
  exports.Set("hardwareThreads", Napi::Function::New(env, HardwareThreads));
  exports.Set("rowLines", Napi::Function::New(env, RowLines));
  exports.Set("trimHeap", Napi::Function::New(env, TrimHeap));
  return exports;
}

}  // namespace

NODE_API_MODULE(bench_native, Init)
