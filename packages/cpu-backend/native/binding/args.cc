#include "args.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <utility>
#include <sstream>

#include "thread_pool.h"

namespace embedstack {

namespace {

// The tag names the addon and its version (EMBEDSTACK_HANDLE_TAG, cmake/handle_tag.cmake): a
// table handle of the other addon, or of another installed version, is refused.
const napi_type_tag kTableTag = {EMBEDSTACK_HANDLE_TAG, 0x636b2d7461626c65ULL};  // "ck-table" in the low word

const char* typedArrayName(napi_typedarray_type t) {
  switch (t) {
    case napi_int8_array:
      return "Int8Array";
    case napi_uint8_array:
      return "Uint8Array";
    case napi_uint8_clamped_array:
      return "Uint8ClampedArray";
    case napi_int16_array:
      return "Int16Array";
    case napi_uint16_array:
      return "Uint16Array";
    case napi_int32_array:
      return "Int32Array";
    case napi_uint32_array:
      return "Uint32Array";
    case napi_float32_array:
      return "Float32Array";
    case napi_float64_array:
      return "Float64Array";
    case napi_bigint64_array:
      return "BigInt64Array";
    case napi_biguint64_array:
      return "BigUint64Array";
    default:
      return "TypedArray";
  }
}

}  // namespace

std::string formatNumber(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[40];
  if (v == std::floor(v) && std::fabs(v) < 1e21) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.17g", v);
  }
  return buf;
}

namespace {

struct RawTyped {
  napi_typedarray_type type;
  size_t length = 0;
  void* data = nullptr;
  napi_value buffer = nullptr;  // its ArrayBuffer or SharedArrayBuffer
};

RawTyped typedInfo(const Napi::Value& v) {
  RawTyped r{};
  size_t offset;
  napi_status s = napi_get_typedarray_info(v.Env(), v, &r.type, &r.length, &r.data, &r.buffer, &offset);
  ES_CHECK(s == napi_ok, kInvalidType, "Expected a typed array but could not read it");
  if (r.data == nullptr) r.length = 0;  // detached buffer
  return r;
}

Napi::Value argAt(const Napi::CallbackInfo& info, size_t i) {
  return i < info.Length() ? info[i] : info.Env().Undefined();
}

thread_local CallCopies* activeCopies = nullptr;

/** Copies `bytes` (on the pool's threads when large: the caller's thread waits for them). */
void copyBytes(unsigned char* to, const unsigned char* from, size_t bytes) {
  constexpr size_t kChunk = size_t{1} << 20;
  if (bytes < 4 * kChunk) {
    std::memcpy(to, from, bytes);
    return;
  }
  ThreadPool::shared().parallelFor((bytes + kChunk - 1) / kChunk, 1, [&](size_t b, size_t e) {
    const size_t begin = b * kChunk;
    const size_t end = std::min(bytes, e * kChunk);
    std::memcpy(to + begin, from + begin, end - begin);
  });
}

template <class T>
TypedArg<T> typedOf(const Napi::Value& v, const char* name, napi_typedarray_type type, bool nullable,
                    Use use = Use::kInput) {
  TypedArg<T> a;
  if (nullable && (v.IsUndefined() || v.IsNull())) return a;
  ES_CHECK(v.IsTypedArray() && v.As<Napi::TypedArray>().TypedArrayType() == type, kInvalidType,
           "Expected " << name << " to be a " << typedArrayName(type) << (nullable ? " or null" : "")
                       << " but received " << describe(v));
  RawTyped r = typedInfo(v);
  a.data = static_cast<const T*>(r.data);
  a.length = r.length;
  CallCopies* copies = CallCopies::active();
  if (copies != nullptr && use != Use::kNow) {
    a.data = static_cast<const T*>(copies->take(v, r.buffer, r.data, r.length * sizeof(T), sizeof(T), use, name));
  }
  a.present = true;
  return a;
}

template <class T>
TypedArg<T> typedArg(const Napi::CallbackInfo& info, size_t i, const char* name, napi_typedarray_type type,
                     bool nullable, Use use = Use::kInput) {
  return typedOf<T>(argAt(info, i), name, type, nullable, use);
}

}  // namespace

namespace {

/**
 * Large copy buffers kept for later Promise calls. malloc maps a block of 32 MiB or more
 * afresh for each call (the addon's mmap threshold) and unmaps it when freed, so each call
 * would fault in (and the kernel zero) every page of its copies: a loop of large calls of
 * one shape reuses these instead. At most kMaxCached bytes stay cached.
 */
class CopyCache {
 public:
  static constexpr size_t kMinBytes = size_t{32} << 20;
  static constexpr size_t kMaxCached = size_t{256} << 20;

  static CopyCache& shared() {
    static CopyCache* c = new CopyCache();  // never destroyed: buffers may come back during exit
    return *c;
  }

  /** A cached buffer of at least `bytes` (and less than twice as many), or null; sets capacity. */
  unsigned char* take(size_t bytes, size_t& capacity) {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t best = free_.size();
    for (size_t i = 0; i < free_.size(); ++i) {
      const size_t c = free_[i].second;
      if (c >= bytes && c / 2 < bytes && (best == free_.size() || c < free_[best].second)) best = i;
    }
    if (best == free_.size()) return nullptr;
    unsigned char* p = free_[best].first;
    capacity = free_[best].second;
    cached_ -= capacity;
    free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
    return p;
  }

  /** Keeps p (or frees it, and the oldest cached buffers, to stay within kMaxCached). */
  void give(unsigned char* p, size_t capacity) {
    if (capacity > kMaxCached) {
      delete[] p;
      return;
    }
    std::vector<unsigned char*> drop;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      while (cached_ + capacity > kMaxCached) {
        drop.push_back(free_.front().first);
        cached_ -= free_.front().second;
        free_.erase(free_.begin());
      }
      free_.emplace_back(p, capacity);
      cached_ += capacity;
    }
    for (unsigned char* d : drop) delete[] d;
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<unsigned char*, size_t>> free_;  // oldest first
  size_t cached_ = 0;
};

}  // namespace

CallCopies::Buffer::Buffer(size_t bytes) : data_(nullptr), capacity_(bytes) {
  if (bytes >= CopyCache::kMinBytes) data_ = CopyCache::shared().take(bytes, capacity_);
  if (data_ == nullptr) data_ = new unsigned char[bytes];
}

CallCopies::Buffer::~Buffer() {
  if (data_ == nullptr) return;
  if (capacity_ >= CopyCache::kMinBytes) CopyCache::shared().give(data_, capacity_);
  else delete[] data_;
}

CallCopies* CallCopies::active() noexcept {
  return activeCopies;
}

CallCopies::Scope::Scope(CallCopies& c) noexcept : previous_(activeCopies) {
  activeCopies = &c;
}

CallCopies::Scope::~Scope() {
  activeCopies = previous_;
}

namespace {
std::atomic<uint64_t> copiedArrays{0};
std::atomic<uint64_t> copiedBytes{0};
std::atomic<uint64_t> sharedArrays{0};

/**
 * True when a typed array's `buffer` is a SharedArrayBuffer: that memory is never detached,
 * transferred or shrunk (a growable one only grows, in place), and lives while the array is
 * referenced. Node-API's napi_is_arraybuffer is false for a SharedArrayBuffer, and a typed
 * array's buffer is one of the two, so no user code runs and nothing can pretend to be one.
 */
bool sharedBuffer(napi_env env, napi_value buffer) {
  bool plain = true;
  if (buffer == nullptr || napi_is_arraybuffer(env, buffer, &plain) != napi_ok) return false;
  return !plain;
}
}  // namespace

CallCopies::Stats CallCopies::stats() noexcept {
  return Stats{copiedArrays.load(std::memory_order_relaxed), copiedBytes.load(std::memory_order_relaxed),
               sharedArrays.load(std::memory_order_relaxed)};
}

void* CallCopies::take(const Napi::Value& array, napi_value buffer, void* data, size_t bytes, size_t elementSize,
                       Use use, const char* name) {
  if (bytes == 0) return data;  // nothing to read or write (data may be null: detached)
  // A sync call copies its shared inputs only (Mode). Outputs (kOutput, kInOut) are only
  // written or added to, never read as indices or counts, so shared memory serves them in
  // place (a Promise call's reference keeps it alive until the call ends): a planned find
  // leaves the rows of other shards as they are, as the shards' calls into one `out` expect.
  const bool output = use == Use::kOutput || use == Use::kInOut;
  if (mode_ == Mode::kSharedInputs && output) return data;
  const bool shared = sharedBuffer(array.Env(), buffer);
  if (mode_ == Mode::kSharedInputs && !shared) return data;
  if (shared && output) {
    pinned_.push_back(Napi::Persistent(array.As<Napi::Object>()));
    sharedArrays.fetch_add(1, std::memory_order_relaxed);
    return data;
  }
  if (mode_ == Mode::kPromise) {
    copiedArrays.fetch_add(1, std::memory_order_relaxed);
    copiedBytes.fetch_add(bytes, std::memory_order_relaxed);
  }
  owned_.emplace_back(bytes);
  unsigned char* copy = owned_.back().data();
  if (use != Use::kOutput) copyBytes(copy, static_cast<const unsigned char*>(data), bytes);
  if (use == Use::kOutput || use == Use::kInOut) {
    outputs_.push_back(Output{Napi::Persistent(array.As<Napi::Object>()), copy, bytes, elementSize, name});
  }
  return copy;
}

void* CallCopies::fresh(Napi::Env env, napi_typedarray_type type, size_t length, size_t elementSize, napi_ref* array) {
  const size_t bytes = checkedMul(length, elementSize, "a result array");
  void* data = nullptr;
  napi_value buffer;
  napi_value ab;
  napi_value typed;
  napi_typedarray_type bufferType;
  size_t bufferLength = 0;
  size_t offset = 1;
  bool ok = napi_create_buffer(env, bytes, &data, &buffer) == napi_ok && data != nullptr &&
            napi_get_typedarray_info(env, buffer, &bufferType, &bufferLength, nullptr, &ab, &offset) == napi_ok;
  size_t abBytes = 0;
  // A Buffer of its own ArrayBuffer (never a pool's slice), so the result's buffer is exactly its bytes.
  ok = ok && offset == 0 && napi_get_arraybuffer_info(env, ab, nullptr, &abBytes) == napi_ok && abBytes == bytes &&
       napi_create_typedarray(env, type, length, ab, 0, &typed) == napi_ok;
  if (!ok) {
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    if (pending) {
      napi_value ignored;
      napi_get_and_clear_last_exception(env, &ignored);
    }
    return nullptr;
  }
  pinned_.push_back(Napi::Persistent(Napi::Object(env, typed)));
  *array = pinned_.back();
  return data;
}

void CallCopies::writeBack() {
  std::vector<unsigned char*> to(outputs_.size());
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const Output& o = outputs_[i];
    RawTyped r = typedInfo(o.array.Value());
    const size_t bytes = r.length * o.elementSize;
    ES_CHECK(bytes >= o.bytes, kShapeMismatch,
             "Expected " << o.name << " to still hold " << o.bytes / o.elementSize
                         << " elements when the call settled but it holds " << r.length
                         << " (its buffer was detached, transferred or shrunk while the call ran); nothing was written");
    to[i] = static_cast<unsigned char*>(r.data);
  }
  for (size_t i = 0; i < outputs_.size(); ++i) copyBytes(to[i], outputs_[i].copy, outputs_[i].bytes);
}

void CallCopies::abandon() noexcept {
  for (Output& o : outputs_) o.array.SuppressDestruct();
  for (Napi::ObjectReference& r : pinned_) r.SuppressDestruct();
}

std::string describe(const Napi::Value& v) {
  if (v.IsUndefined()) return "undefined";
  if (v.IsNull()) return "null";
  if (v.IsNumber()) return formatNumber(v.As<Napi::Number>().DoubleValue());
  if (v.IsBoolean()) return v.As<Napi::Boolean>().Value() ? "true" : "false";
  if (v.IsBigInt()) {
    bool lossless;
    return std::to_string(v.As<Napi::BigInt>().Int64Value(&lossless)) + "n";
  }
  if (v.IsString()) {
    std::string s = v.As<Napi::String>().Utf8Value();
    if (s.size() > 40) s = s.substr(0, 40) + "...";
    return "\"" + s + "\"";
  }
  if (v.IsTypedArray()) {
    RawTyped r = typedInfo(v);
    return std::string(typedArrayName(r.type)) + "(" + std::to_string(r.length) + ")";
  }
  if (v.IsArrayBuffer()) return "ArrayBuffer(" + std::to_string(v.As<Napi::ArrayBuffer>().ByteLength()) + ")";
  if (v.IsArray()) return "array of length " + std::to_string(v.As<Napi::Array>().Length());
  if (v.IsFunction()) return "function";
  if (v.IsExternal()) return "External";
  if (v.IsSymbol()) return "symbol";
  return "object";
}

void tagHandle(const Napi::External<TableHolder>& handle) {
  handle.TypeTag(&kTableTag);
}

TableHolder* holderOf(const Napi::Value& v, const char* name) {
  ES_CHECK(v.IsExternal() && v.As<Napi::External<TableHolder>>().CheckTypeTag(&kTableTag), kInvalidType,
           "Expected " << name << " to be a table handle returned by createTable but received " << describe(v));
  TableHolder* h = v.As<Napi::External<TableHolder>>().Data();
  ES_CHECK(h != nullptr, kInvalidType,
           "Expected " << name << " to be a table handle returned by createTable but received " << describe(v));
  return h;
}

TableHolder* holderArg(const Napi::CallbackInfo& info, size_t i) {
  return holderOf(argAt(info, i), "table");
}

std::shared_ptr<Table> tableOf(const Napi::Value& v, const char* name, TableHolder** holder) {
  TableHolder* h = holderOf(v, name);
  ES_CHECK(h->table != nullptr && !h->table->disposed(), kDisposed,
           "Expected " << name << " to be a live table but it was disposed");
  if (holder) *holder = h;
  return h->table;
}

std::shared_ptr<Table> tableArg(const Napi::CallbackInfo& info, size_t i, TableHolder** holder) {
  return tableOf(argAt(info, i), "table", holder);
}

TypedArg<float> floatArg(const Napi::CallbackInfo& info, size_t i, const char* name, bool nullable, Use use) {
  return typedArg<float>(info, i, name, napi_float32_array, nullable, use);
}
TypedArg<float> floatOf(const Napi::Value& v, const char* name) {
  return typedOf<float>(v, name, napi_float32_array, false);
}
TypedArg<uint8_t> uint8Arg(const Napi::CallbackInfo& info, size_t i, const char* name, Use use) {
  return typedArg<uint8_t>(info, i, name, napi_uint8_array, false, use);
}
TypedArg<int32_t> int32Arg(const Napi::CallbackInfo& info, size_t i, const char* name, Use use) {
  return typedArg<int32_t>(info, i, name, napi_int32_array, false, use);
}
TypedArg<uint32_t> uint32Arg(const Napi::CallbackInfo& info, size_t i, const char* name) {
  return typedArg<uint32_t>(info, i, name, napi_uint32_array, false);
}

TypedArg<double> float64Arg(const Napi::CallbackInfo& info, size_t i, const char* name, size_t expectedLength) {
  TypedArg<double> a = typedArg<double>(info, i, name, napi_float64_array, false, Use::kNow);
  checkLength(a.length, expectedLength, name, "numbers");
  return a;
}

TypedArg<double> float64ArrayArg(const Napi::CallbackInfo& info, size_t i, const char* name) {
  return typedArg<double>(info, i, name, napi_float64_array, false, Use::kInOut);
}

TypedArg<uint64_t> scoresArg(const Napi::CallbackInfo& info, size_t i, size_t n) {
  TypedArg<uint64_t> a = typedArg<uint64_t>(info, i, "scores", napi_biguint64_array, true);
  if (a.present) checkLength(a.length, n, "scores", "scores (one per key)");
  return a;
}

void KeysArg::widen() {
  if (narrow == nullptr) return;
  widened.assign(narrow, narrow + n);
  data = widened.data();
  narrow = nullptr;
}

KeysArg keysArg(const Napi::CallbackInfo& info, size_t i, const TableHolder& holder, const char* name, bool keepInt32) {
  KeysArg k;
  if (holder.int32Keys) {
    // Widened at once (no copy needed), or kept narrow for the job (a Promise call's copy).
    TypedArg<int32_t> a = typedArg<int32_t>(info, i, name, napi_int32_array, false, keepInt32 ? Use::kInput : Use::kNow);
    k.narrow = a.data;
    k.n = a.length;
    if (!keepInt32) k.widen();
  } else {
    TypedArg<int64_t> a = typedArg<int64_t>(info, i, name, napi_bigint64_array, false);
    k.data = a.data;
    k.n = a.length;
  }
  ES_CHECK(k.n < UINT32_MAX, kInvalidArgument,
           "Expected " << name << " to hold fewer than 2^32 keys but received " << k.n);
  return k;
}

void checkLength(size_t actual, size_t expected, const char* name, const char* what) {
  ES_CHECK(actual == expected, kShapeMismatch,
           "Expected " << name << " to hold " << expected << " " << what << " but received " << actual);
}

double numberArg(const Napi::CallbackInfo& info, size_t i, const char* name) {
  Napi::Value v = argAt(info, i);
  ES_CHECK(v.IsNumber(), kInvalidType, "Expected " << name << " to be a number but received " << describe(v));
  return v.As<Napi::Number>().DoubleValue();
}

double integerArg(const Napi::CallbackInfo& info, size_t i, const char* name, double min, double max,
                  bool allowInfinity) {
  double v = numberArg(info, i, name);
  if (allowInfinity && v == INFINITY) return v;
  ES_CHECK(std::isfinite(v) && v == std::floor(v) && v >= min && v <= max, kInvalidArgument,
           "Expected " << name << " to be an integer in [" << formatNumber(min) << ", " << formatNumber(max)
                       << "] but received " << formatNumber(v));
  return v;
}

bool boolArg(const Napi::CallbackInfo& info, size_t i, const char* name) {
  Napi::Value v = argAt(info, i);
  ES_CHECK(v.IsBoolean(), kInvalidType, "Expected " << name << " to be a boolean but received " << describe(v));
  return v.As<Napi::Boolean>().Value();
}

}  // namespace embedstack
