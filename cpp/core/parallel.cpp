#include "core/parallel.h"

#include <algorithm>
#include <atomic>

#ifndef SDPA_THREADS
#define SDPA_THREADS 1
#endif

#if SDPA_THREADS
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
#endif

namespace sdpa {

#if !SDPA_THREADS

int max_threads() { return 1; }
void set_max_threads(int) {}
void parallel_for(int, int64_t tasks, ParallelBody body, void* context) {
  for (int64_t t = 0; t < tasks; ++t) body(context, t, 0);
}

#else

namespace {

// Workers sleep on `wake` until `generation` changes, then take tasks from `next` until none is
// left and count themselves out of `remaining_`. Worker threads are created on first need and live for the process.
class Pool {
 public:
  static Pool& get() {
    static Pool* pool = new Pool;  // never destroyed: workers may still be parked at exit
    return *pool;
  }

  int max_threads() const { return max_threads_; }
  void set_max_threads(int n) { max_threads_ = std::max(1, n); }

  void run(int threads, int64_t tasks, ParallelBody body, void* context) {
    threads = static_cast<int>(std::min<int64_t>({threads, max_threads_, tasks}));
    if (threads <= 1) {
      for (int64_t t = 0; t < tasks; ++t) body(context, t, 0);
      return;
    }
    const int helpers = threads - 1;
    while (static_cast<int>(workers_.size()) < helpers) {
      const int index = static_cast<int>(workers_.size()) + 1;
      workers_.emplace_back([this, index] { worker_loop(index); });
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      body_ = body;
      context_ = context;
      tasks_ = tasks;
      next_.store(0, std::memory_order_relaxed);
      active_helpers_ = helpers;
      remaining_.store(helpers, std::memory_order_relaxed);
      ++generation_;
    }
    wake_.notify_all();
    drain(0);
    // The helpers are finishing their last task: spin rather than sleep on a condition variable
    // (a browser main thread may not block; Emscripten busy-waits there anyway, with a warning).
    while (remaining_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  }

 private:
  Pool() {
    const unsigned n = std::thread::hardware_concurrency();
    max_threads_ = n == 0 ? 1 : static_cast<int>(n);
  }

  void drain(int worker) {
    for (int64_t t; (t = next_.fetch_add(1, std::memory_order_relaxed)) < tasks_;) body_(context_, t, worker);
  }

  void worker_loop(int index) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (index > active_helpers_) continue;  // not needed this time
      }
      drain(index);
      remaining_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  int max_threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  uint64_t generation_ = 0;
  int active_helpers_ = 0;
  std::atomic<int> remaining_{0};
  ParallelBody body_ = nullptr;
  void* context_ = nullptr;
  int64_t tasks_ = 0;
  std::atomic<int64_t> next_{0};
};

}  // namespace

int max_threads() { return Pool::get().max_threads(); }
void set_max_threads(int n) { Pool::get().set_max_threads(n); }
void parallel_for(int threads, int64_t tasks, ParallelBody body, void* context) {
  Pool::get().run(threads, tasks, body, context);
}

#endif

}  // namespace sdpa
