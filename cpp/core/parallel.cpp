#include "core/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>

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

// Workers wait for `announced` to change (it holds the generation and the number of helpers the
// call wants), then claim tasks from `next` (the generation in its high bits, the next task
// index in its low bits) until none is left. A worker first spins on `announced` for
// kSpinMicros after its last task, and only then sleeps on `wake`: waking a sleeping web worker
// (Atomics.wait/notify) takes longer than a whole call of a small attention, so back-to-back
// calls would otherwise run on the caller alone. The caller claims tasks too and then waits only
// for claimed tasks to finish (`finished`), never for a helper to wake up: a helper that wakes
// late finds nothing to claim, and one still asleep from an earlier generation cannot claim a
// later generation's task by mistake (the claim is a compare-exchange that checks the
// generation). Worker threads are created on first need and live for the process.
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
      finished_.store(0, std::memory_order_relaxed);
      generation = (announced_.load(std::memory_order_relaxed) >> kHelperBits) + 1;
      next_.store(generation << kIndexBits, std::memory_order_release);
      announced_.store(generation << kHelperBits | static_cast<uint64_t>(helpers), std::memory_order_release);
    }
    wake_.notify_all();
    drain(0, generation);
    // Only claimed tasks are left: spin rather than sleep (a browser main thread may not block;
    // Emscripten busy-waits there anyway, with a warning).
    while (finished_.load(std::memory_order_acquire) < tasks) std::this_thread::yield();
  }

 private:
  static constexpr int kIndexBits = 40;
  static constexpr int kHelperBits = 16;
  static constexpr uint64_t kHelperMask = (uint64_t{1} << kHelperBits) - 1;
  // Long enough to span the JS work between back-to-back calls (copying the inputs into the
  // heap), short enough that an idle page does not keep a core busy.
  static constexpr int kSpinMicros = 1000;

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
      const uint64_t announced = wait_for_announcement(seen);
      seen = announced;
      // A helper the call does not want has no scratch: it must not claim a task.
      if (index <= static_cast<int>(announced & kHelperMask)) drain(index, announced >> kHelperBits);
    }
  }

  // The next announcement after `seen`: spun for up to kSpinMicros, then slept for.
  uint64_t wait_for_announcement(uint64_t seen) {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point give_up = Clock::now() + std::chrono::microseconds(kSpinMicros);
    for (int polls = 1;; ++polls) {
      const uint64_t announced = announced_.load(std::memory_order_acquire);
      if (announced != seen) return announced;
      if (polls % 256 == 0 && Clock::now() > give_up) break;  // reading the clock costs a JS call
    }
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [&] { return announced_.load(std::memory_order_relaxed) != seen; });
    return announced_.load(std::memory_order_relaxed);
  }

  int max_threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  ParallelBody body_ = nullptr;
  void* context_ = nullptr;
  std::atomic<int64_t> tasks_{0};  // atomic: a stale helper may read it while a call sets it
  std::atomic<uint64_t> announced_{0};  // generation << kHelperBits | helpers wanted
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
