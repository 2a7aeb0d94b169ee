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

// Workers sleep on `wake` until `generation` changes, then claim tasks from `next` (the
// generation in its high bits, the next task index in its low bits) until none is left. The
// caller claims tasks too and then waits only for claimed tasks to finish (`finished`), never
// for a helper to wake up: a helper that wakes late finds nothing to claim, and one still asleep
// from an earlier generation cannot claim a later generation's task by mistake (the claim is a
// compare-exchange that checks the generation). Worker threads are created on first need and
// live for the process.
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
    uint64_t generation;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      body_ = body;
      context_ = context;
      tasks_.store(tasks, std::memory_order_relaxed);
      active_helpers_ = helpers;
      finished_.store(0, std::memory_order_relaxed);
      generation = ++generation_;
      next_.store(generation << kIndexBits, std::memory_order_release);
    }
    wake_.notify_all();
    drain(0, generation);
    // Only claimed tasks are left: spin rather than sleep (a browser main thread may not block;
    // Emscripten busy-waits there anyway, with a warning).
    while (finished_.load(std::memory_order_acquire) < tasks) std::this_thread::yield();
  }

 private:
  static constexpr int kIndexBits = 40;

  Pool() {
    const unsigned n = std::thread::hardware_concurrency();
    max_threads_ = n == 0 ? 1 : static_cast<int>(n);
  }

  void drain(int worker, uint64_t generation) {
    const uint64_t index_mask = (uint64_t{1} << kIndexBits) - 1;
    for (;;) {
      uint64_t claim = next_.load(std::memory_order_acquire);
      if ((claim >> kIndexBits) != generation) return;
      const int64_t task = static_cast<int64_t>(claim & index_mask);
      if (task >= tasks_.load(std::memory_order_relaxed)) return;
      if (!next_.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel)) continue;
      body_(context_, task, worker);
      finished_.fetch_add(1, std::memory_order_release);
    }
  }

  void worker_loop(int index) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (index > active_helpers_) continue;  // not needed this time (no scratch for it)
      }
      drain(index, seen);
    }
  }

  int max_threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  uint64_t generation_ = 0;
  int active_helpers_ = 0;
  ParallelBody body_ = nullptr;
  void* context_ = nullptr;
  std::atomic<int64_t> tasks_{0};  // atomic: a stale helper may read it while a call sets it
  std::atomic<uint64_t> next_{0};
  std::atomic<int64_t> finished_{0};
};

}  // namespace

int max_threads() { return Pool::get().max_threads(); }
void set_max_threads(int n) { Pool::get().set_max_threads(n); }
void parallel_for(int threads, int64_t tasks, ParallelBody body, void* context) {
  Pool::get().run(threads, tasks, body, context);
}

#endif

}  // namespace sdpa
