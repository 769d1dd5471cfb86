// Validation of everything the addon receives from JS. Every check throws an
// EmbedError (INVALID_TYPE / SHAPE_MISMATCH / OUT_OF_RANGE / INVALID_ARGUMENT /
// DISPOSED) whose message names the argument, what was expected and what was
// received, so that no input can crash the process, even when the addon is
// called directly, bypassing @embedstack/core.
#pragma once

#include <napi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "memory.h"
#include "table.h"

namespace embedstack {

/** What the JS handle of a table wraps (an External tagged with our type tag). */
struct TableHolder {
  std::shared_ptr<Table> table;
  bool int32Keys = false;
  size_t dim = 0;
};

/** A number as JS prints it (NaN, -Infinity, 1048576, 0.5), for messages. */
std::string formatNumber(double v);

/** Short description of a JS value for messages ("Float64Array(3)", "NaN", "undefined"...). */
std::string describe(const Napi::Value& v);

/** Marks a new handle as ours. */
void tagHandle(const Napi::External<TableHolder>& handle);
/** The live table behind info[i] (throws INVALID_TYPE for a foreign value, DISPOSED after dispose). */
std::shared_ptr<Table> tableArg(const Napi::CallbackInfo& info, size_t i, TableHolder** holder = nullptr);
/** The holder behind info[i] even when disposed (for dispose / isDisposed). */
TableHolder* holderArg(const Napi::CallbackInfo& info, size_t i);
/** The holder behind a JS value (INVALID_TYPE naming `name` for a foreign value). */
TableHolder* holderOf(const Napi::Value& v, const char* name);
/** The live table behind a JS value (INVALID_TYPE / DISPOSED naming `name`). */
std::shared_ptr<Table> tableOf(const Napi::Value& v, const char* name, TableHolder** holder = nullptr);

/** How a call's job uses a typed array argument (what a Promise call copies, see CallCopies). */
enum class Use {
  kInput,   // read by the job: a Promise call reads a private copy
  kNow,     // read while the arguments are parsed (plans, row splits, int32 keys widened at once): never copied,
            // so each element is read once (shared memory may change between two reads)
  kOutput,  // every element written by the job: a Promise call writes a private buffer, copied out when it settles
  kInOut,   // written in part (or added to) by the job: a Promise call copies it in, and out when it settles
            // (both in place over a SharedArrayBuffer: never read as indices or counts)
};

/**
 * A Promise call's private copies of its typed array arguments. A pool job must not read or
 * write the caller's arrays: while it runs, JS may detach (transfer) or shrink their buffers,
 * and Node-API cannot pin an ArrayBuffer's memory. So while asyncFn parses a call's
 * arguments, each typed array is copied into memory the call owns as its pointer is taken
 * (inputs), or gets a private buffer that is copied into the caller's array when the call
 * settles on the JS thread, after checking that array still holds as many bytes (outputs).
 * Outputs over a SharedArrayBuffer are used in place (that memory cannot be detached or shrunk).
 * Sync calls copy only their inputs over a SharedArrayBuffer (Mode::kSharedInputs, in guard):
 * JS cannot touch their arrays between their parsing and the end of their job (only getters
 * the parsing itself reads), but another thread may write shared memory.
 */
class CallCopies {
 public:
  /**
   * kPromise: a Promise call's copies (above). kSharedInputs: a sync call's (guard): only its
   * inputs over a SharedArrayBuffer are copied, as the call's arguments are parsed. Another thread (a Worker) can rewrite shared memory while the call
   * runs, and the kernels read an input more than once assuming it unchanged (a batch's keys
   * deduped then placed, a capped table's scores compared in a sort, the exists flags counted
   * then applied): a changed value between two reads could write past their buffers. Plain
   * arrays are used in place by a sync call, as are outputs (only written or added to).
   */
  enum class Mode { kPromise, kSharedInputs };
  explicit CallCopies(Mode mode = Mode::kPromise) noexcept : mode_(mode) {}
  /** True for a Promise call's copies (its results may be made in JS memory: fresh()). */
  bool promise() const noexcept { return mode_ == Mode::kPromise; }
  CallCopies(CallCopies&&) = default;
  CallCopies& operator=(CallCopies&&) = default;

  /** The copies of the call whose arguments this thread is parsing (a sync call's: Mode::kSharedInputs), or null outside guard. */
  static CallCopies* active() noexcept;

  /** Makes a call's copies active on this thread while it lives (asyncFn, around the parsing). */
  class Scope {
   public:
    explicit Scope(CallCopies& c) noexcept;
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CallCopies* previous_;
  };

  /**
   * The job's memory for `bytes` at `data` (the typed array `array` over `buffer`, argument `name`): a copy
   * (kInput, kInOut) or an unfilled buffer (kOutput); outputs are recorded for writeBack().
   */
  void* take(const Napi::Value& array, napi_value buffer, void* data, size_t bytes, size_t elementSize, Use use,
             const char* name);

  /**
   * Promise calls without an output array: results below this size are made by fresh()
   * (Node's allocator: the C heap, which keeps and reuses freed blocks below malloc's mmap
   * threshold); larger ones come from the addon's result cache (memory.h resultAllocate),
   * which reuses them where malloc would map fresh memory for each.
   */
  static constexpr size_t kFreshMaxBytes = kMallocMmapThreshold;

  /**
   * A result array this Promise call makes on the JS thread, as its parsing runs: `length`
   * elements of `type` (elementSize bytes each, `length` > 0), uninitialised, in an
   * ArrayBuffer of exactly their bytes from Node's allocator (freed by V8's collector, like
   * Buffer.allocUnsafeSlow's). No JS holds it before the call settles, so nothing can detach,
   * transfer or shrink it: the job writes it in place, with no private copy. It is kept
   * alive until the call ends; `*array` is the reference the settlement reads it from
   * (valid until then). Returns its memory, or null when Node could not make it (the
   * caller then lets the job allocate its result).
   */
  void* fresh(Napi::Env env, napi_typedarray_type type, size_t length, size_t elementSize, napi_ref* array);

  /**
   * JS thread, once the job succeeded: copies each output into its caller's array. First
   * checks that every one still holds its bytes (it may have been detached, transferred or
   * shrunk while the job ran): if one does not, throws SHAPE_MISMATCH naming it, nothing written.
   */
  void writeBack();

  /** The environment is gone: drops the references without calling into it. */
  void abandon() noexcept;

  /** Process-wide counts of what Promise calls did with their typed arrays (info().asyncCopies). */
  struct Stats {
    uint64_t arrays;  // typed arrays copied in, or given a private buffer copied out
    uint64_t bytes;   // their bytes (an array copied both ways counts once)
    uint64_t shared;  // output arrays over a SharedArrayBuffer, used in place (shared inputs are copied: arrays)
  };
  static Stats stats() noexcept;

 private:
  struct Output {
    Napi::ObjectReference array;
    const unsigned char* copy;
    size_t bytes;
    size_t elementSize;
    std::string name;
  };
  /** One copy's memory; a large one goes back to a small process-wide cache (args.cc CopyCache). */
  class Buffer {
   public:
    explicit Buffer(size_t bytes);
    ~Buffer();
    Buffer(Buffer&& o) noexcept : data_(o.data_), capacity_(o.capacity_) { o.data_ = nullptr; }
    Buffer& operator=(Buffer&&) = delete;
    Buffer(const Buffer&) = delete;
    unsigned char* data() const { return data_; }

   private:
    unsigned char* data_;
    size_t capacity_;
  };
  Mode mode_ = Mode::kPromise;
  std::vector<Buffer> owned_;
  std::vector<Output> outputs_;
  std::vector<Napi::ObjectReference> pinned_;  // outputs over a SharedArrayBuffer used in place, and fresh() results
};

/** A typed array argument: pointer into JS memory (valid while the JS value lives), or a Promise call's copy. */
template <class T>
struct TypedArg {
  const T* data = nullptr;
  size_t length = 0;
  bool present = false;
};

TypedArg<float> floatArg(const Napi::CallbackInfo& info, size_t i, const char* name, bool nullable,
                         Use use = Use::kInput);
/** A Float32Array held by a JS value read from an array (not an argument). */
TypedArg<float> floatOf(const Napi::Value& v, const char* name);
TypedArg<uint8_t> uint8Arg(const Napi::CallbackInfo& info, size_t i, const char* name, Use use = Use::kInput);
TypedArg<int32_t> int32Arg(const Napi::CallbackInfo& info, size_t i, const char* name, Use use = Use::kInput);
TypedArg<uint32_t> uint32Arg(const Napi::CallbackInfo& info, size_t i, const char* name);
/** A Float64Array of `expectedLength` numbers, read while parsing (Use::kNow). */
TypedArg<double> float64Arg(const Napi::CallbackInfo& info, size_t i, const char* name, size_t expectedLength);
/** A Float64Array of any length (a caller's output array, added to: Use::kInOut). */
TypedArg<double> float64ArrayArg(const Napi::CallbackInfo& info, size_t i, const char* name);
TypedArg<uint64_t> scoresArg(const Napi::CallbackInfo& info, size_t i, size_t n);

/** Keys in the table's dtype (BigInt64Array or Int32Array), as int64 (int32 kept as given with keepInt32). */
struct KeysArg {
  const int64_t* data = nullptr;
  size_t n = 0;
  std::vector<int64_t> widened;  // int32 keys sign-extended (data points here)
  /** int32 keys not widened yet (keysArg's keepInt32): data is null until widen(). */
  const int32_t* narrow = nullptr;
  /** Widens `narrow` into `widened` (data points there); nothing when already int64. */
  void widen();
};
/** keepInt32: an int32 table's keys stay in `narrow` (the caller widens them where it must). */
KeysArg keysArg(const Napi::CallbackInfo& info, size_t i, const TableHolder& holder, const char* name,
                bool keepInt32 = false);

/** Checks that `arr` holds exactly `expected` elements (SHAPE_MISMATCH). */
void checkLength(size_t actual, size_t expected, const char* name, const char* what);

/** A number argument: finite integer in [min, max] (or +Infinity when allowInfinity). */
double integerArg(const Napi::CallbackInfo& info, size_t i, const char* name, double min, double max,
                  bool allowInfinity = false);
double numberArg(const Napi::CallbackInfo& info, size_t i, const char* name);
bool boolArg(const Napi::CallbackInfo& info, size_t i, const char* name);

}  // namespace embedstack
