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
  if (bytes < 4 * kHuge) return static_cast<float*>(std::aligned_alloc(64, bytes));
  // Large arenas: 2 MiB aligned and advised to use huge pages before the first touch, as the
  // backend's tables are (random row reads over GBs would otherwise miss the TLB on every row).
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
  exports.Set("hardwareThreads", Napi::Function::New(env, HardwareThreads));
  exports.Set("rowLines", Napi::Function::New(env, RowLines));
  exports.Set("trimHeap", Napi::Function::New(env, TrimHeap));
  return exports;
}

}  // namespace

NODE_API_MODULE(bench_native, Init)
