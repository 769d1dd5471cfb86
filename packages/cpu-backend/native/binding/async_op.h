// One promise-based core with thin sync/async adapters (sharp's baton pattern):
// a binding function parses and validates its JS arguments into an Op (a plain
// C++ job plus a converter of its result to JS), then either runs it at once
// (sync) or posts it to the native thread pool in a PoolOp (async):
//  - every JS value is converted to plain C++ before posting; the job touches no JS
//    and no JS memory a caller can reach: a Promise call's typed arrays are copied into
//    memory it owns while its arguments are parsed, and its outputs are written there and
//    copied into the caller's arrays when it settles, once checked to be still there
//    (CallCopies: JS may detach, transfer or shrink a buffer while the job runs, and
//    Node-API cannot pin one); a call without an output array writes its result in place,
//    into an array it made itself (CallCopies::fresh, which no JS holds until it settles)
//    or the addon's own memory;
//  - the job runs on a pool worker, and its parallel parts are helped by the other
//    workers: the same threads as the sync form (no libuv thread, which would also
//    take a slot of the pool Node's fs, dns and zlib share);
//  - the result comes back to the JS thread through the environment's one
//    thread-safe function (AsyncCompletion), which holds the event loop open only
//    while ops are pending;
//  - a JS Error captured at call time gives native errors the caller's stack.
// Per async call: one copy of each input typed array (int32 keys of key ops are widened to
// int64 at call time instead; row splits are copied anyway) and of each output the caller
// gave (out, exists), and a few small allocations: the PoolOp, the argument records (KeysArg, the
// job's captures), and one Node-API reference per output array.
#pragma once

#include <napi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "args.h"
#include "convert.h"
#include "fp_mode.h"
#include "thread_pool.h"

namespace embedstack {

struct Unit {};

template <class R>
struct Op {
  std::function<R()> job;                          // runs on any thread, no JS
  std::function<Napi::Value(Napi::Env, R&)> toJs;  // runs on the JS thread
  size_t helpers = 0;                              // async: pool workers woken with the job (it splits at once)
  bool nearEnd = false;  // async: the job ends with its first parallelFor; wake the JS thread just before (AsyncCompletion)
};

class AsyncCompletion;

/** An async op in flight: run on the pool, then settled on the JS thread. */
class PendingOp : public PoolTask {
 public:
  /** JS thread: resolves or rejects the promise. */
  virtual void settle(Napi::Env env) = 0;
  /** The environment is gone: frees what it can without touching JS. */
  virtual void abandon() = 0;

  bool wantsNearEnd() const noexcept override { return early_; }
  void nearEnd() noexcept override;

 protected:
  PendingOp(AsyncCompletion& done, bool early) : done_(done), early_(early) {}
  AsyncCompletion& done_;

 private:
  friend class AsyncCompletion;
  // Who settles the op once the job ends (AsyncCompletion::finished, awaitEnd).
  enum State : int { kRunning, kSignaled, kWaiting, kHanded, kEnded };
  std::atomic<int> state_{kRunning};
  const bool early_;
};

/**
 * Per environment (instance data): hands finished ops back to the JS thread through
 * one thread-safe function, and at environment teardown waits for jobs still running
 * (they read JS-owned memory).
 *
 * An op with Op::nearEnd wakes the JS thread ahead of its end. Its job's parallelFor calls
 * nearEnd() from the first thread that finds no chunk left while the others still run theirs
 * (ThreadPool::parallelFor): that queues a wake-up, so the JS thread's wake and the event
 * loop's work before the callback run on that idle core while the last chunks finish. Then
 * the JS thread waits for the job's end (awake for kEarlySpinNs, then asleep, at most
 * kEarlyWaitNs in all) and settles the op itself: the job's end needs no second wake of the
 * event loop. If the job has not ended by then, the JS thread returns to the event loop and
 * the job's end queues the settlement as usual.
 */
class AsyncCompletion {
 public:
  /** The environment's instance (created on first use). */
  static AsyncCompletion& of(Napi::Env env);
  ~AsyncCompletion();
  AsyncCompletion(const AsyncCompletion&) = delete;
  AsyncCompletion& operator=(const AsyncCompletion&) = delete;

  /** JS thread, before posting: counts the op (the event loop stays open while any is pending). */
  void started();
  /** Pool thread, when the job has ended: hands op to the JS thread waiting for it, or queues op->settle there. */
  void finished(PendingOp* op) noexcept;
  /** Pool thread, the job still running: queues a wake-up of the JS thread (see the class comment). */
  void nearEnd(PendingOp* op) noexcept;

  /** How long the JS thread, woken by nearEnd(), waits for the job's end at most (it holds the event loop). */
  static constexpr long long kEarlyWaitNs = 100000;
  /** The first part of that wait, awake (yielding its core); then asleep until finished() wakes it. */
  static constexpr long long kEarlySpinNs = 30000;
  /**
   * The wait in use: kEarlyWaitNs, or EMBEDSTACK_CPU_EARLY_WAIT_US (0 to 1000000; tests only:
   * 0 makes every woken JS thread give up at once, a long wait makes it settle the op),
   * read once, at the addon's load.
   */
  static long long earlyWaitNs();

  /** What the JS threads did when woken by nearEnd(), since the process started (info().earlyWake). */
  struct EarlyWakeStats {
    uint64_t wakes = 0;    // wake-ups run on a JS thread
    uint64_t settled = 0;  // ... that waited for the job's end and settled the op there
    uint64_t gaveUp = 0;   // ... that returned with the job still running (its end settles the op)
  };
  static EarlyWakeStats earlyWakeStats();

 private:
  explicit AsyncCompletion(napi_env env);
  static void callJs(napi_env env, napi_value, void* self, void* op);
  static void teardown(void* self);
  /** JS thread, woken by nearEnd(): waits for the job's end and settles op, or leaves it to finished(). */
  void awaitEnd(napi_env env, PendingOp* op);
  /** JS thread: settles op (which deletes it). */
  void settle(napi_env env, PendingOp* op);

  napi_env env_;
  napi_threadsafe_function tsfn_ = nullptr;
  size_t pending_ = 0;  // JS thread only: started, not yet settled
  std::mutex mutex_;
  std::condition_variable idle_;
  std::condition_variable handed_;  // awaitEnd's op was handed to the JS thread
  size_t running_ = 0;  // started, job not yet ended (guarded by mutex_)
  bool closing_ = false;
};

template <class R>
class PoolOp final : public PendingOp {
 public:
  PoolOp(Napi::Env env, Op<R>&& op, CallCopies&& copies, AsyncCompletion& done)
      : PendingOp(done, op.nearEnd),
        op_(std::move(op)),
        copies_(std::move(copies)),
        deferred_(Napi::Promise::Deferred::New(env)) {}  // the job reads copies_ (its inputs, and its outputs until settle)

  Napi::Promise promise() const { return deferred_.Promise(); }

  /**
   * JS thread, after posting (the job may be running, but the op cannot settle before the
   * binding returns): the call site's stack for native errors. Taken here, not before the
   * post, because V8 captures it in 5-10 us and the job need not wait for it. Without it
   * (its capture failed), an error gets the stack of its settlement.
   */
  void captureStack(Napi::Env env) noexcept {
    napi_value msg;
    napi_value err;
    napi_ref ref;
    if (napi_create_string_utf8(env, "", 0, &msg) == napi_ok && napi_create_error(env, nullptr, msg, &err) == napi_ok &&
        napi_create_reference(env, err, 1, &ref) == napi_ok) {
      stack_ = Napi::ObjectReference(env, ref);
    } else {
      napi_value ignored;
      napi_get_and_clear_last_exception(env, &ignored);
    }
  }

  void run() noexcept override {
    try {
      result_ = op_.job();
    } catch (...) {
      failure_ = currentFailure();
      failed_ = true;
    }
    done_.finished(this);
  }

  void settle(Napi::Env env) override {
    Napi::Object stack;
    if (!stack_.IsEmpty()) stack = stack_.Value();
    const Napi::Object* at = stack_.IsEmpty() ? nullptr : &stack;
    if (failed_) {
      deferred_.Reject(makeJsError(env, failure_, at).Value());
    } else {
      try {
        copies_.writeBack();  // into the caller's output arrays, if they are still there
        deferred_.Resolve(op_.toJs(env, result_));
      } catch (...) {
        deferred_.Reject(makeJsError(env, currentFailure(), at).Value());
      }
    }
    delete this;
  }

  void abandon() override {
    // The references belong to a dead environment: drop them without calling into it.
    stack_.SuppressDestruct();
    copies_.abandon();
    delete this;
  }

 private:
  Op<R> op_;
  CallCopies copies_;
  R result_{};
  bool failed_ = false;
  NativeFailure failure_;
  Napi::Promise::Deferred deferred_;
  Napi::ObjectReference stack_;
};

template <class R>
Napi::Value runSync(Napi::Env env, Op<R>& op) {
  R r = op.job();
  return op.toJs(env, r);
}

template <class R>
Napi::Value runAsync(Napi::Env env, Op<R>&& op, CallCopies&& copies) {
  AsyncCompletion& done = AsyncCompletion::of(env);
  const size_t helpers = op.helpers;
  auto* pending = new PoolOp<R>(env, std::move(op), std::move(copies), done);
  Napi::Promise p = pending->promise();
  done.started();
  ThreadPool::shared().post(pending, helpers);  // settle() deletes it, on this thread, after this returns
  pending->captureStack(env);
  return p;
}

/** Runs a binding body, turning any C++ exception into a coded JS error. */
template <class F>
Napi::Value guardErrors(const Napi::CallbackInfo& info, F&& body) {
  try {
    return body();
  } catch (const Napi::Error& e) {
    Napi::Object o = e.Value();
    if (!o.Has("code")) o.Set("code", "INTERNAL");
    throw;
  } catch (...) {
    throw makeJsError(info.Env(), currentFailure());
  }
}

/**
 * Runs a binding body in the default floating-point mode (fp_mode.h: the caller's FTZ / DAZ
 * or unmasked exceptions do not reach the kernels; its mode is restored after), turning any
 * C++ exception into a coded JS error.
 */
template <class F>
Napi::Value guard(const Napi::CallbackInfo& info, F&& body) {
  const DefaultFpMode fpMode;
  return guardErrors(info, [&]() -> Napi::Value {
    // A sync call's inputs over a SharedArrayBuffer, copied as they are parsed (CallCopies::Mode;
    // nothing to write back: its outputs are used in place); a Promise call's parsing makes its
    // own copies active instead (asyncFn).
    CallCopies shared(CallCopies::Mode::kSharedInputs);
    CallCopies::Scope scope(shared);
    return body();
  });
}

/** A binding function running the op built by Prepare on the calling thread. */
template <class R, Op<R> (*Prepare)(const Napi::CallbackInfo&)>
Napi::Value syncFn(const Napi::CallbackInfo& info) {
  return guard(info, [&] {
    Op<R> op = Prepare(info);
    return runSync<R>(info.Env(), op);
  });
}

/** A binding function posting the op built by Prepare to the native pool (returns a Promise). */
template <class R, Op<R> (*Prepare)(const Napi::CallbackInfo&)>
Napi::Value asyncFn(const Napi::CallbackInfo& info) {
  return guard(info, [&] {
    CallCopies copies;
    Op<R> op = [&] {
      CallCopies::Scope scope(copies);  // the job gets copies of the caller's arrays
      return Prepare(info);
    }();
    return runAsync<R>(info.Env(), std::move(op), std::move(copies));
  });
}

}  // namespace embedstack
