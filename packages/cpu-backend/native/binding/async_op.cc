#include "async_op.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "env.h"

namespace embedstack {

namespace {

// The thread-safe function carries two kinds of items: an op whose job has ended (settle it),
// and an op's early wake-up (PendingOp::nearEnd), tagged in the pointer's low bit.
static_assert(alignof(PendingOp) >= 2, "a wake item tags the op's pointer in its low bit");
void* wakeItem(PendingOp* op) { return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(op) | 1); }
bool isWake(void* item) { return (reinterpret_cast<uintptr_t>(item) & 1) != 0; }
PendingOp* opOf(void* item) { return reinterpret_cast<PendingOp*>(reinterpret_cast<uintptr_t>(item) & ~uintptr_t{1}); }

// AsyncCompletion::EarlyWakeStats, counted by the JS threads.
std::atomic<uint64_t> earlyWakes{0};
std::atomic<uint64_t> earlySettled{0};
std::atomic<uint64_t> earlyGaveUp{0};

}  // namespace

long long AsyncCompletion::earlyWaitNs() {
  static const long long ns = envWhole("EMBEDSTACK_CPU_EARLY_WAIT_US", 0, 1000000, kEarlyWaitNs / 1000) * 1000;
  return ns;
}

AsyncCompletion::EarlyWakeStats AsyncCompletion::earlyWakeStats() {
  EarlyWakeStats s;
  s.wakes = earlyWakes.load(std::memory_order_relaxed);
  s.settled = earlySettled.load(std::memory_order_relaxed);
  s.gaveUp = earlyGaveUp.load(std::memory_order_relaxed);
  return s;
}

void PendingOp::nearEnd() noexcept { done_.nearEnd(this); }

AsyncCompletion& AsyncCompletion::of(Napi::Env env) {
  AsyncCompletion* c = env.GetInstanceData<AsyncCompletion>();
  if (c == nullptr) {
    c = new AsyncCompletion(env);
    env.SetInstanceData<AsyncCompletion>(c);  // deleted at environment teardown
  }
  return *c;
}

AsyncCompletion::AsyncCompletion(napi_env env) : env_(env) {
  napi_value name;
  napi_status s = napi_create_string_utf8(env, "embedstack:cpu", NAPI_AUTO_LENGTH, &name);
  if (s == napi_ok) s = napi_create_threadsafe_function(env, nullptr, nullptr, name, 0, 1, nullptr, nullptr, this, callJs, &tsfn_);
  if (s == napi_ok) s = napi_unref_threadsafe_function(env, tsfn_);  // referenced only while ops are pending
  if (s == napi_ok) s = napi_add_env_cleanup_hook(env, teardown, this);
  NAPI_THROW_IF_FAILED_VOID(Napi::Env(env), s);
}

AsyncCompletion::~AsyncCompletion() = default;

void AsyncCompletion::started() {
  if (pending_++ == 0) napi_ref_threadsafe_function(env_, tsfn_);
  std::lock_guard<std::mutex> lock(mutex_);
  ++running_;
}

void AsyncCompletion::nearEnd(PendingOp* op) noexcept {
  int s = PendingOp::kRunning;
  if (!op->state_.compare_exchange_strong(s, PendingOp::kSignaled, std::memory_order_relaxed)) return;
  // Failing (closing): finished() then finds no waiter and goes its usual way.
  napi_call_threadsafe_function(tsfn_, wakeItem(op), napi_tsfn_nonblocking);
}

void AsyncCompletion::finished(PendingOp* op) noexcept {
  int s = op->state_.load(std::memory_order_acquire);
  for (;;) {
    if (s == PendingOp::kWaiting) {
      // The JS thread waits for this job in awaitEnd: it settles the op (do not touch it after this).
      if (op->state_.compare_exchange_weak(s, PendingOp::kHanded, std::memory_order_acq_rel)) {
        std::lock_guard<std::mutex> lock(mutex_);
        handed_.notify_all();
        break;
      }
    } else if (op->state_.compare_exchange_weak(s, PendingOp::kEnded, std::memory_order_acq_rel)) {
      // Closing (the environment is being torn down): nothing on the JS side waits any more.
      if (napi_call_threadsafe_function(tsfn_, op, napi_tsfn_nonblocking) != napi_ok) op->abandon();
      break;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (--running_ == 0) idle_.notify_all();
}

void AsyncCompletion::awaitEnd(napi_env env, PendingOp* op) {
  // The op is alive here: its settlement is queued after this wake-up, or made below.
  earlyWakes.fetch_add(1, std::memory_order_relaxed);
  const long long waitNs = earlyWaitNs();  // 0 (tests): the wait below ends at once, the usual give-up
  int s = PendingOp::kSignaled;
  if (!op->state_.compare_exchange_strong(s, PendingOp::kWaiting, std::memory_order_acq_rel)) return;  // ended: queued
  // Awake first: this thread was woken onto the core of a thread with no chunk left, and the
  // last chunks are short. Then asleep (a yielding thread still takes its share of a core
  // the job may need): finished() wakes it.
  const auto start = std::chrono::steady_clock::now();
  const auto handed = [op] { return op->state_.load(std::memory_order_acquire) == PendingOp::kHanded; };
  while (!handed() && std::chrono::steady_clock::now() < start + std::chrono::nanoseconds(std::min(kEarlySpinNs, waitNs))) {
    std::this_thread::yield();
  }
  {
    std::unique_lock<std::mutex> lock(mutex_);
    handed_.wait_until(lock, start + std::chrono::nanoseconds(waitNs), handed);
  }
  s = PendingOp::kWaiting;
  if (op->state_.compare_exchange_strong(s, PendingOp::kSignaled, std::memory_order_acq_rel)) {  // finished() queues it
    earlyGaveUp.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  earlySettled.fetch_add(1, std::memory_order_relaxed);
  settle(env, op);  // kHanded
}

void AsyncCompletion::settle(napi_env env, PendingOp* op) {
  try {
    // Its own scope: the handles settle() makes (the stack Error, whose frames' closures
    // hold the call's arrays) must die before the microtasks Node runs after this
    // callback, or every result survives the next scavenge and waits for a full GC.
    Napi::HandleScope scope(env);
    op->settle(Napi::Env(env));
  } catch (...) {
    // settle() rejects on its own failures; only a failing Node-API call lands here.
  }
  if (--pending_ == 0) napi_unref_threadsafe_function(env, tsfn_);
}

void AsyncCompletion::callJs(napi_env env, napi_value, void* self, void* data) {
  auto* c = static_cast<AsyncCompletion*>(self);
  if (isWake(data)) {
    // Torn down: the op's own item (queued after this one) or finished() frees it.
    if (env != nullptr) c->awaitEnd(env, opOf(data));
    return;
  }
  auto* op = static_cast<PendingOp*>(data);
  if (env == nullptr) {  // the thread-safe function is being torn down with this op queued
    op->abandon();
    return;
  }
  c->settle(env, op);
}

void AsyncCompletion::teardown(void* self) {
  // Jobs still running read typed arrays this environment is about to free: wait for them.
  auto* c = static_cast<AsyncCompletion*>(self);
  std::unique_lock<std::mutex> lock(c->mutex_);
  c->closing_ = true;
  c->idle_.wait(lock, [c] { return c->running_ == 0; });
}

}  // namespace embedstack
