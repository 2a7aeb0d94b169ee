#include "cpu/thread_pool.h"

#include <algorithm>
#include <atomic>

#ifndef SDPA_THREADS
#define SDPA_THREADS 1
#endif

#if SDPA_THREADS
#include <pthread.h>
#include <semaphore.h>
#include <time.h>

#include <chrono>
#include <memory>
#include <thread>
#include <utility>
#include <vector>
#endif

namespace sdpa {

namespace {
OverlappedWork* pending_work = nullptr;  // the calling thread's; the pool is not reentrant
}  // namespace

OverlappedWork::OverlappedWork(void (*work)(void*), void* context) : work_(work), context_(context) {
  pending_work = this;
}

OverlappedWork::~OverlappedWork() { pending_work = nullptr; }

void run_overlapped_work() {
  OverlappedWork* work = pending_work;
  if (work == nullptr || work->ran_) return;
  work->ran_ = true;
  work->work_(work->context_);
}

#if !SDPA_THREADS

int max_threads() { return 1; }
void set_max_threads(int) {}
PoolWakeState pool_wake_state() { return {}; }
void parallel_for(int, int64_t tasks, ParallelBody body, void* context) {
  run_overlapped_work();
  for (int64_t t = 0; t < tasks; ++t) body(context, t, 0);
}

#else

namespace {

// Helpers wait for `announced` to change (it holds the generation and the number of helpers the
// call wants), then claim tasks from `next` (the generation in its high bits, the next task
// index in its low bits) until none is left. The caller claims tasks too and then waits only
// for claimed tasks to finish (`finished`), never for a helper to wake up: a helper that wakes
// late finds nothing to claim, and one from an earlier generation cannot claim a later
// generation's task by mistake (the claim is a compare-exchange that checks the generation).
//
// Waiting: a helper first spins on `announced` after its last task, then dozes, then sleeps
// lightly, then sleeps on its own semaphore.
//  - Spinning, for a quarter of the last call's time (1 to 8 ms): long enough to span the JS work
//    between back-to-back calls (copying the inputs into the heap grows with the call), short
//    enough that an idle page does not keep a core busy for long. Waking a sleeping web worker
//    is slow (up to milliseconds under load, and the posting thread is held up about as long,
//    whether by a semaphore post or a condition variable's notify): spinning keeps back-to-back
//    calls from paying that, and dispatch/ leaves sleepers asleep for a lone call shorter than
//    a wake-up (wake_state() is its input).
//  - Dozing covers calls a few to 50 ms apart (a model's other layers in between): the helper
//    looks at `announced` every 200 µs from timed waits that nobody ends, so the caller posts
//    nothing and finds it within about a poll, for a fraction of a core.
//  - Then, for a second, a light sleep: the same timed waits, 2 ms long. A helper that wakes on
//    its own timer stays on its own core, whereas a helper posted after a longer idle may be
//    scheduled onto the caller's core and share it for several calls.
// A helper sets `asleep` before its last look at `announced`, and the caller posts only to a
// wanted helper whose `asleep` it clears, so every post is consumed by exactly one sem_wait.
// Helper threads are created on first need and live for the process.
class Pool {
 public:
  static Pool& get() {
    static Pool* pool = new Pool;  // never destroyed: helpers may still be parked at exit
    return *pool;
  }

  int max_threads() const { return max_threads_; }
  void set_max_threads(int n) { max_threads_ = std::max(1, n); }

  PoolWakeState wake_state() const {
    PoolWakeState state;
    state.wake_micros = wake_micros_;
    state.follows_last_call = now_ns() - last_end_ < spin_nanos_.load(std::memory_order_relaxed);
    state.awake_helpers = leading_awake_helpers();
    return state;
  }

  void run(int threads, int64_t tasks, ParallelBody body, void* context) {
    threads = static_cast<int>(std::min<int64_t>({threads, max_threads_, tasks}));
    const int64_t start = now_ns();
    if (threads <= 1) {
      run_overlapped_work();
      for (int64_t t = 0; t < tasks; ++t) body(context, t, 0);
      last_end_ = now_ns();
      return;
    }
    const int helpers = threads - 1;
    while (static_cast<int>(helpers_.size()) < helpers) {
      helpers_.push_back(std::make_unique<Helper>());
      Helper* helper = helpers_.back().get();
      const int index = static_cast<int>(helpers_.size());
      helper->thread = std::thread([this, helper, index] { helper_loop(*helper, index); });
    }
    const uint64_t generation =
        ((announced_.load(std::memory_order_relaxed) >> kHelperBits) + 1) & kGenerationMask;
    // Closed to the last generation first: a helper that loaded the old claim word just before
    // tasks_ changes then fails its compare-exchange instead of claiming a task past the end.
    next_.store(generation << kIndexBits | kIndexMask);
    body_ = body;
    context_ = context;
    tasks_.store(tasks, std::memory_order_relaxed);
    finished_.store(0, std::memory_order_relaxed);
    next_.store(generation << kIndexBits, std::memory_order_release);
    announced_.store(generation << kHelperBits | static_cast<uint64_t>(helpers));
    Helper* woken = nullptr;
    int64_t posted_at = 0;
    for (int i = 0; i < helpers; ++i) {
      Helper& helper = *helpers_[i];
      if (!helper.asleep.exchange(false)) continue;
      if (woken == nullptr) {
        woken = &helper;
        helper.woke_at.store(0, std::memory_order_relaxed);
        posted_at = now_ns();
      }
      sem_post(&helper.wake);
    }
    run_overlapped_work();
    drain(0, generation);
    // Only claimed tasks are left: spin rather than sleep (a browser main thread may not block).
    while (finished_.load(std::memory_order_acquire) < tasks) std::this_thread::yield();
    last_end_ = now_ns();
    spin_nanos_.store(std::clamp((last_end_ - start) / 4, kMinSpinNanos, kMaxSpinNanos),
                      std::memory_order_relaxed);
    if (woken != nullptr) {
      // A helper still asleep now took at least the whole call to wake.
      const int64_t woke_at = woken->woke_at.load(std::memory_order_relaxed);
      const double micros = static_cast<double>((woke_at != 0 ? woke_at : last_end_) - posted_at) / 1e3;
      wake_micros_ = wake_micros_ == 0 ? micros : 0.75 * wake_micros_ + 0.25 * micros;
    }
  }

 private:
  // A call with n helpers announces work to helpers_[0, n): how many of those can join without
  // a post.
  int leading_awake_helpers() const {
    int awake = 0;
    const int n = static_cast<int>(helpers_.size());
    while (awake < n && !helpers_[awake]->asleep.load(std::memory_order_relaxed)) ++awake;
    return awake;
  }

  static constexpr int kIndexBits = 40;
  static constexpr uint64_t kIndexMask = (uint64_t{1} << kIndexBits) - 1;
  // The generation wraps within the claim word's high bits, so claims keep matching it.
  static constexpr uint64_t kGenerationMask = (uint64_t{1} << (64 - kIndexBits)) - 1;
  static constexpr int kHelperBits = 16;
  static constexpr uint64_t kHelperMask = (uint64_t{1} << kHelperBits) - 1;
  static constexpr int64_t kMinSpinNanos = 1'000'000, kMaxSpinNanos = 8'000'000;
  static constexpr int64_t kDozeNanos = 50'000'000, kDozePollNanos = 200'000;
  static constexpr int64_t kLightSleepNanos = 1'000'000'000, kLightSleepPollNanos = 2'000'000;

  struct Helper {
    Helper() {
      sem_init(&wake, 0, 0);
      // The doze's timeouts on the monotonic clock: Emscripten's CLOCK_REALTIME counts whole ms.
      pthread_condattr_t attributes;
      pthread_condattr_init(&attributes);
      pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
      pthread_cond_init(&never_signalled, &attributes);
      pthread_condattr_destroy(&attributes);
    }
    // Sleeps for about `nanos` (a timed wait nobody ends early: waking a thread costs its waker).
    void doze(int64_t nanos) {
      timespec until;
      clock_gettime(CLOCK_MONOTONIC, &until);
      const int64_t end = until.tv_nsec + nanos;
      until.tv_sec += static_cast<time_t>(end / 1'000'000'000);
      until.tv_nsec = static_cast<long>(end % 1'000'000'000);
      pthread_mutex_lock(&doze_lock);
      pthread_cond_timedwait(&never_signalled, &doze_lock, &until);
      pthread_mutex_unlock(&doze_lock);
    }
    std::thread thread;
    std::atomic<bool> asleep{false};
    std::atomic<int64_t> woke_at{0};  // now_ns() when it last returned from sem_wait
    sem_t wake;
    pthread_mutex_t doze_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t never_signalled;
  };

  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  Pool() {
    const unsigned n = std::thread::hardware_concurrency();
    max_threads_ = n == 0 ? 1 : static_cast<int>(n);
  }

  void drain(int worker, uint64_t generation) {
    for (;;) {
      uint64_t claim = next_.load(std::memory_order_acquire);
      if ((claim >> kIndexBits) != generation) return;
      const int64_t task = static_cast<int64_t>(claim & kIndexMask);
      if (task >= tasks_.load(std::memory_order_relaxed)) return;
      if (!next_.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel)) continue;
      body_(context_, task, worker);
      finished_.fetch_add(1, std::memory_order_release);
    }
  }

  void helper_loop(Helper& helper, int index) {
    uint64_t seen = 0;
    for (;;) {
      const uint64_t announced = wait_for_announcement(helper, seen);
      seen = announced;
      // A helper the call does not want has no scratch: it must not claim a task.
      if (index <= static_cast<int>(announced & kHelperMask)) drain(index, announced >> kHelperBits);
    }
  }

  // The next announcement after `seen`: spun for up to spin_nanos_, dozed for up to kDozeNanos,
  // slept lightly for up to kLightSleepNanos, then slept for.
  uint64_t wait_for_announcement(Helper& helper, uint64_t seen) {
    const int64_t give_up = now_ns() + spin_nanos_.load(std::memory_order_relaxed);
    for (int polls = 1;; ++polls) {
      const uint64_t announced = announced_.load(std::memory_order_acquire);
      if (announced != seen) return announced;
      if (polls % 256 == 0 && now_ns() > give_up) break;  // reading the clock costs a JS call
    }
    for (const auto& [nanos, poll] : {std::pair{kDozeNanos, kDozePollNanos}, std::pair{kLightSleepNanos, kLightSleepPollNanos}}) {
      for (const int64_t stop = now_ns() + nanos; now_ns() < stop;) {
        helper.doze(poll);
        const uint64_t announced = announced_.load(std::memory_order_acquire);
        if (announced != seen) return announced;
      }
    }
    for (;;) {
      helper.asleep.store(true);
      const uint64_t announced = announced_.load();
      if (announced != seen) {
        // Announced meanwhile: the caller may already have cleared `asleep` and posted.
        if (!helper.asleep.exchange(false)) sem_wait(&helper.wake);
        helper.woke_at.store(now_ns(), std::memory_order_relaxed);
        return announced;
      }
      while (sem_wait(&helper.wake) != 0) {
      }  // retried on EINTR
      helper.woke_at.store(now_ns(), std::memory_order_relaxed);
      const uint64_t now = announced_.load(std::memory_order_acquire);
      if (now != seen) return now;
    }
  }

  int max_threads_ = 1;
  std::vector<std::unique_ptr<Helper>> helpers_;
  ParallelBody body_ = nullptr;
  void* context_ = nullptr;
  std::atomic<int64_t> tasks_{0};  // atomic: a stale helper may read it while a call sets it
  std::atomic<uint64_t> announced_{0};  // generation << kHelperBits | helpers wanted
  std::atomic<uint64_t> next_{0};
  std::atomic<int64_t> finished_{0};
  std::atomic<int64_t> spin_nanos_{kMinSpinNanos};  // set by the caller, read by spinning helpers
  // Caller-only state: when the last call ended, and a moving average of how long a posted
  // helper took to run.
  int64_t last_end_ = 0;
  double wake_micros_ = 0;
};

}  // namespace

int max_threads() { return Pool::get().max_threads(); }
void set_max_threads(int n) { Pool::get().set_max_threads(n); }
PoolWakeState pool_wake_state() { return Pool::get().wake_state(); }
void parallel_for(int threads, int64_t tasks, ParallelBody body, void* context) {
  Pool::get().run(threads, tasks, body, context);
}

#endif

}  // namespace sdpa
