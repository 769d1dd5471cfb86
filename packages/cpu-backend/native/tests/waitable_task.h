// A posted pool task the test waits for: run() ends with finish(), the test calls wait().
#pragma once

#include <condition_variable>
#include <mutex>

#include "thread_pool.h"

namespace estest {

struct WaitableTask : embedstack::PoolTask {
  std::mutex m;
  std::condition_variable cv;
  bool finished = false;
  void finish() {
    std::lock_guard<std::mutex> lock(m);
    finished = true;
    cv.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return finished; });
  }
};

}  // namespace estest
