// parallel_for: the core's only threading primitive, a small persistent pool of std::threads.
// Built with SDPA_THREADS=0 (the single-thread wasm module) it runs everything on the caller.
// Under Emscripten -pthread the std::threads are web workers: the JS side must have preloaded
// enough of them (PTHREAD_POOL_SIZE) before the first call, since a worker cannot start while
// the main thread blocks. How many threads a call gets is decided in dispatch/ (threads_for and
// threads_to_run, dispatch/dispatch.h), from the call's cost and the pool's wake state
// (pool_wake_state below); the pool runs the count it is given.
#pragma once

#include <cstdint>
#include <type_traits>

namespace sdpa {

// Upper bound on the `threads` argument of parallel_for in this build: 1 without thread support,
// else set_max_threads() (default: std::thread::hardware_concurrency(), at least 1).
int max_threads();
// Caps max_threads() (the JS layer sets it to the number of preloaded workers + 1).
void set_max_threads(int n);

// What waking the pool's helpers would cost a call starting now.
struct PoolWakeState {
  // How long a sleeping helper has recently taken to start on a call, in µs (a moving average;
  // 0 until one has been woken).
  double wake_micros = 0;
  // Whether this call follows the previous one while its helpers still spin: none needs waking.
  bool follows_last_call = false;
  // How many helpers, in the order a call of n threads announces helpers 1 … n − 1, can join
  // without being woken (they spin or doze).
  int awake_helpers = 0;
};
// The pool's wake state now (all zero in a build without threads).
PoolWakeState pool_wake_state();

// Calls body(context, task, worker) once for every task in [0, tasks), on min(threads, tasks)
// threads (threads above max_threads() are a caller's bug and are cut to it), the caller being
// worker 0 (workers are numbered densely from 0). Sleeping helpers among them are woken. Tasks
// are handed out in increasing order from a shared counter, so put the longest first. Returns
// when every task has finished. Not reentrant.
using ParallelBody = void (*)(void* context, int64_t task, int worker);
void parallel_for(int threads, int64_t tasks, ParallelBody body, void* context);

// Work the calling thread does while helpers run: within an OverlappedWork's scope, the first
// parallel_for calls `work` on the caller once, after announcing the helpers and before the
// caller claims tasks, so the two overlap; on one thread, before the first task. The JS side
// copies a call's inputs this way as the helpers start on the rows already copied
// (core/input_arrival.h), then allocates the result arrays and touches their fresh pages (page
// faults: about 1 ms for 2 MiB). Scopes do not nest; `work` must not throw.
class OverlappedWork {
 public:
  OverlappedWork(void (*work)(void* context), void* context);
  ~OverlappedWork();
  OverlappedWork(const OverlappedWork&) = delete;
  OverlappedWork& operator=(const OverlappedWork&) = delete;

 private:
  friend void run_overlapped_work();
  void (*work_)(void*);
  void* context_;
  bool ran_ = false;
};

// Calls the pending OverlappedWork on the caller now unless it has run: parallel_for's hook, and
// what dispatch calls before a kernel that does not wait for streamed inputs.
void run_overlapped_work();

// Convenience wrapper for a lambda (a temporary or a named one).
template <typename F>
void parallel_for(int threads, int64_t tasks, F&& body) {
  using Body = std::remove_reference_t<F>;
  parallel_for(
      threads, tasks,
      [](void* c, int64_t task, int worker) { (*static_cast<Body*>(c))(task, worker); },
      const_cast<void*>(static_cast<const void*>(&body)));
}

}  // namespace sdpa
