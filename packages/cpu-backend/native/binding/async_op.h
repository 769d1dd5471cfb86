// One promise-based core with thin sync/async adapters (sharp's baton pattern):
// a binding function parses and validates its JS arguments into an Op (a plain
// C++ job plus a converter of its result to JS), then either runs it at once
// (sync) or queues it on the libuv pool in an OpWorker (async):
//  - every JS value is converted to plain C++ before queueing; Execute() touches no JS;
//  - the JS typed arrays the job reads are kept alive by references until it ends;
//  - the worker (and its job) is owned by the AsyncWorker machinery, result
//    buffers by unique owners until handed to JS;
//  - a JS Error captured at call time gives native errors the caller's stack.
#pragma once

#include <napi.h>

#include <functional>
#include <utility>
#include <vector>

#include "convert.h"

namespace embedstack {

struct Unit {};

template <class R>
struct Op {
  std::function<R()> job;                          // runs on any thread, no JS
  std::function<Napi::Value(Napi::Env, R&)> toJs;  // runs on the JS thread
  std::vector<Napi::Value> keepAlive;              // JS inputs the job reads
};

template <class R>
class OpWorker final : public Napi::AsyncWorker {
 public:
  OpWorker(Napi::Env env, Op<R>&& op)
      : Napi::AsyncWorker(env, "embedstack:cpu"),
        op_(std::move(op)),
        deferred_(Napi::Promise::Deferred::New(env)),
        stack_(Napi::Persistent(Napi::Error::New(env, "").Value())) {
    for (const Napi::Value& v : op_.keepAlive) {
      if (v.IsObject()) refs_.push_back(Napi::Persistent(v.As<Napi::Object>()));
    }
  }

  Napi::Promise promise() const { return deferred_.Promise(); }

 protected:
  void Execute() override {
    try {
      result_ = op_.job();
    } catch (...) {
      failure_ = currentFailure();
      SetError(failure_.message);
    }
  }

  void OnOK() override {
    Napi::Env env = Env();
    try {
      deferred_.Resolve(op_.toJs(env, result_));
    } catch (...) {
      NativeFailure f = currentFailure();
      Napi::Object stack = stack_.Value();
      deferred_.Reject(makeJsError(env, f, &stack).Value());
    }
  }

  void OnError(const Napi::Error&) override {
    Napi::Object stack = stack_.Value();
    deferred_.Reject(makeJsError(Env(), failure_, &stack).Value());
  }

 private:
  Op<R> op_;
  R result_{};
  NativeFailure failure_;
  Napi::Promise::Deferred deferred_;
  Napi::ObjectReference stack_;
  std::vector<Napi::ObjectReference> refs_;
};

template <class R>
Napi::Value runSync(Napi::Env env, Op<R>& op) {
  R r = op.job();
  return op.toJs(env, r);
}

template <class R>
Napi::Value runAsync(Napi::Env env, Op<R>&& op) {
  auto* worker = new OpWorker<R>(env, std::move(op));
  Napi::Promise p = worker->promise();
  worker->Queue();  // the AsyncWorker deletes itself after OnOK / OnError
  return p;
}

/** Runs a binding body, turning any C++ exception into a coded JS error. */
template <class F>
Napi::Value guard(const Napi::CallbackInfo& info, F&& body) {
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

/** A binding function running the op built by Prepare on the calling thread. */
template <class R, Op<R> (*Prepare)(const Napi::CallbackInfo&)>
Napi::Value syncFn(const Napi::CallbackInfo& info) {
  return guard(info, [&] {
    Op<R> op = Prepare(info);
    return runSync<R>(info.Env(), op);
  });
}

/** A binding function queueing the op built by Prepare on the libuv pool (returns a Promise). */
template <class R, Op<R> (*Prepare)(const Napi::CallbackInfo&)>
Napi::Value asyncFn(const Napi::CallbackInfo& info) {
  return guard(info, [&] { return runAsync<R>(info.Env(), Prepare(info)); });
}

}  // namespace embedstack
