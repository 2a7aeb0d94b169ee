// cpu/thread_pool.h and the threaded SIMD kernel: every task runs exactly once, and the result on
// any number of threads is bit-identical to one thread (tasks are independent) and within the
// tolerance rule of the float64 reference.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "attention_test_support.h"
#include "cpu/thread_pool.h"

namespace sdpa::testing {
namespace {

TEST(ParallelFor, RunsEveryTaskOnceOnDenseWorkers) {
  set_max_threads(4);
  for (int threads : {1, 2, 3, 4}) {
    for (int64_t tasks : {0, 1, 2, 7, 100}) {
      std::vector<std::atomic<int>> runs(static_cast<size_t>(tasks));
      std::atomic<int> bad_worker{0};
      parallel_for(threads, tasks, [&](int64_t t, int worker) {
        if (worker < 0 || worker >= threads) bad_worker++;
        runs[static_cast<size_t>(t)]++;
      });
      for (auto& r : runs) EXPECT_EQ(r.load(), 1) << "threads=" << threads;
      EXPECT_EQ(bad_worker.load(), 0);
    }
  }
}

// Back-to-back calls with the thread count changing, some after a pause long enough for the
// helpers to stop spinning and doze (3 ms), sleep lightly (60 ms) or sleep (1.1 s), some on the
// threads dispatch leaves a call far shorter than a wake-up (sleepers left asleep): every task
// still runs exactly once.
TEST(ParallelFor, BackToBackAndAfterSleeping) {
  set_max_threads(4);
  const AttentionPlan tiny = plan_or_die(make_problem({1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 906).request);
  std::vector<std::atomic<int>> runs(64);
  for (int call = 0; call < 3000; ++call) {
    if (call % 500 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(3));
    if (call % 1000 == 250) std::this_thread::sleep_for(std::chrono::milliseconds(call == 1250 ? 1100 : 60));
    int threads = 1 + call % 4;
    if (call % 3 == 0) threads = threads_to_run(Backend::kSimd128, tiny, threads, pool_wake_state());
    const int64_t tasks = 1 + call % 64;
    parallel_for(threads, tasks, [&](int64_t t, int) { runs[static_cast<size_t>(t)]++; });
    for (int64_t t = 0; t < tasks; ++t) ASSERT_EQ(runs[static_cast<size_t>(t)].exchange(0), 1) << "call " << call;
  }
}

// An OverlappedWork runs once, on the calling thread, in the first parallel_for of its scope:
// with helpers, once they are announced; on one thread, before the first task. A later
// parallel_for and one outside the scope do not run it.
TEST(ParallelFor, OverlappedWorkRunsOnceOnTheCaller) {
  set_max_threads(2);
  struct Seen {
    int runs = 0;
    int tasks_before = -1;
    std::thread::id thread;
    const std::atomic<int>* tasks_run;
  };
  std::atomic<int> tasks_run{0};
  const auto record = [](void* context) {
    auto* s = static_cast<Seen*>(context);
    s->runs++;
    s->thread = std::this_thread::get_id();
    s->tasks_before = s->tasks_run->load();
  };
  const auto body = [&](int64_t, int) { tasks_run++; };
  for (int threads : {1, 2}) {
    Seen seen;
    seen.tasks_run = &tasks_run;
    tasks_run = 0;
    {
      OverlappedWork work(record, &seen);
      parallel_for(threads, 8, body);
      EXPECT_EQ(seen.runs, 1) << threads << " threads";
      EXPECT_EQ(seen.thread, std::this_thread::get_id());
      if (threads == 1) {
        EXPECT_EQ(seen.tasks_before, 0) << "one thread: before the first task";
      }
      parallel_for(threads, 8, body);
      EXPECT_EQ(seen.runs, 1) << "once per scope";
    }
    parallel_for(threads, 8, body);
    EXPECT_EQ(seen.runs, 1) << "outside the scope";
    EXPECT_EQ(tasks_run.load(), 24);
  }
  set_max_threads(4);
}

// The pool's generation counter wraps after 2^24 calls (it shares a word with the task index):
// calls past the wrap must not hang.
TEST(ParallelFor, SurvivesGenerationWrap) {
  set_max_threads(2);
  std::atomic<int64_t> runs{0};
  const int64_t calls = (int64_t{1} << 24) + 10;
  for (int64_t call = 0; call < calls; ++call) parallel_for(2, 2, [&](int64_t, int) { runs++; });
  EXPECT_EQ(runs.load(), 2 * calls);
  set_max_threads(4);
}

TEST(ParallelFor, ThreadsForClampsToMax) {
  set_max_threads(3);
  EXPECT_EQ(max_threads(), 3);
  // 1×512×64: 2^25 multiply-adds, work for 128 threads.
  const AttentionPlan plan = plan_or_die(make_problem({1, 512, 64}, {1, 512, 64}, {1, 512, 64}, 907).request);
  EXPECT_EQ(threads_for(Backend::kSimd128, Pass::kForward, plan, 0, max_threads()), 3);
  EXPECT_EQ(threads_for(Backend::kSimd128, Pass::kForward, plan, 2, max_threads()), 2);
  EXPECT_EQ(threads_for(Backend::kSimd128, Pass::kForward, plan, 8, max_threads()), 3);
  EXPECT_EQ(threads_for(Backend::kScalar, Pass::kForward, plan, 8, max_threads()), 1);
  EXPECT_EQ(threads_for(Backend::kSimd128, Pass::kBackward, plan, 8, max_threads()), 1);
  set_max_threads(4);
}

// Below about 2^18 multiply-adds a thread, fewer threads than allowed.
TEST(ParallelFor, ThreadsForLeavesSmallCallsFewerThreads) {
  const auto threads = [](int64_t Lq, int requested) {
    const AttentionPlan plan = plan_or_die(make_problem({1, Lq, 32}, {1, 64, 32}, {1, 64, 32}, 908).request);
    return threads_for(Backend::kSimd128, Pass::kForward, plan, requested, 16);
  };
  EXPECT_EQ(threads(16, 0), 1);    // 2^16 multiply-adds
  EXPECT_EQ(threads(128, 0), 2);   // 2^19
  EXPECT_EQ(threads(512, 0), 8);   // 2^21
  EXPECT_EQ(threads(512, 4), 4);
  EXPECT_EQ(threads(4096, 0), 16);
}

// The wake cut: a call shorter on one thread than a helper's wake-up runs on the helpers awake,
// unless it follows the previous call while they spin; never more threads than threads_for gave.
TEST(ParallelFor, ThreadsToRunLeavesSleepersAsleepForShortCalls) {
  // 1×64×64: 2^19 multiply-adds, about 26 µs on one thread (cost_model.h).
  const AttentionPlan plan = plan_or_die(make_problem({1, 64, 64}, {1, 64, 64}, {1, 64, 64}, 909).request);
  const auto run = [&](double wake_micros, bool follows, int awake, int threads = 4, Backend b = Backend::kSimd128) {
    PoolWakeState wake;
    wake.wake_micros = wake_micros;
    wake.follows_last_call = follows;
    wake.awake_helpers = awake;
    return threads_to_run(b, plan, threads, wake);
  };
  EXPECT_EQ(run(0, false, 0), 4) << "no wake-up measured yet";
  EXPECT_EQ(run(10, false, 0), 4) << "longer than a wake-up";
  EXPECT_EQ(run(100, false, 0), 1);
  EXPECT_EQ(run(100, false, 1), 2);
  EXPECT_EQ(run(100, false, 3), 4);
  EXPECT_EQ(run(100, false, 8), 4);
  EXPECT_EQ(run(100, false, 8, 2), 2) << "never above threads_for's count";
  EXPECT_EQ(run(100, true, 0), 4) << "follows the previous call: the helpers spin";
  EXPECT_EQ(run(100, false, 0, 1), 1);
  EXPECT_EQ(run(100, false, 0, 4, Backend::kScalar), 4) << "only the SIMD kernels run on the pool";
}

// The decode kernel's call is timed by its bytes of K/V, not its multiply-adds: 1×1×4096 keys,
// E = Ev = 64, about 26 multiply-add µs but about 1 ms of reading.
TEST(ParallelFor, ThreadsToRunTimesDecodeByItsBytes) {
  const AttentionPlan plan = plan_or_die(make_problem({1, 1, 64}, {1, 4096, 64}, {1, 4096, 64}, 910).request);
  ASSERT_TRUE(uses_decode_kernel(plan));
  PoolWakeState wake;
  wake.wake_micros = 500;
  EXPECT_EQ(threads_to_run(Backend::kSimd128, plan, 2, wake), 2);
  wake.wake_micros = 5000;
  EXPECT_EQ(threads_to_run(Backend::kSimd128, plan, 2, wake), 1);
}

void ExpectSameOnThreads(const Problem& p, const char* what) {
  set_max_threads(4);
  const Result one = run_backend(Backend::kSimd128, p, 1);
  const Result64 r64 = run_reference64(p);
  const Result r32 = run_backend(Backend::kScalar, p);
  EXPECT_LE(max_abs_diff(one.output, r64.output), tolerance(p, max_abs_diff(r32.output, r64.output)))
      << what;
  for (int threads : {2, 3, 4}) {
    const Result many = run_backend(Backend::kSimd128, p, threads);
    ASSERT_EQ(many.output.size(), one.output.size());
    EXPECT_EQ(0, std::memcmp(many.output.data(), one.output.data(), one.output.size() * sizeof(float)))
        << what << " threads=" << threads;
    ASSERT_EQ(many.weights.size(), one.weights.size());
    if (!one.weights.empty()) {
      EXPECT_EQ(0, std::memcmp(many.weights.data(), one.weights.data(), one.weights.size() * sizeof(float)))
          << what << " (weights) threads=" << threads;
    }
  }
}

TEST(SimdThreads, MatchesOneThread) {
  ExpectSameOnThreads(make_problem({2, 3, 200, 64}, {2, 3, 300, 64}, {2, 3, 300, 64}, 900), "plain");
  // One head of 32 query blocks: 4-block tasks, then the last groups split into 1-block tasks.
  ExpectSameOnThreads(make_problem({1, 1000, 32}, {1, 150, 32}, {1, 150, 16}, 904), "one long head");
  // Ev % 4 != 0: V rows are packed (padded) tile by tile, like Kᵀ, by whichever thread comes first.
  ExpectSameOnThreads(make_problem({2, 2, 100, 24}, {2, 2, 333, 24}, {2, 2, 333, 7}, 905), "padded values");
  Problem gqa = make_problem({1, 4, 97, 32}, {1, 2, 130, 32}, {1, 2, 130, 20}, 901);
  gqa.request.enable_gqa = true;
  ExpectSameOnThreads(gqa, "gqa");
  // 16 heads (at least 4 a thread): whole-head tasks, then the last heads by groups and blocks;
  // grouped keys/values shared by query heads that may run on different threads, V rows padded.
  Problem many_heads = make_problem({2, 8, 150, 20}, {2, 4, 90, 20}, {2, 4, 90, 6}, 906);
  many_heads.request.enable_gqa = true;
  ExpectSameOnThreads(many_heads, "many heads");
  many_heads.request.causal = CausalAlignment::kBottomRight;
  ExpectSameOnThreads(many_heads, "many heads, causal");
  Problem causal = make_problem({3, 260, 16}, {3, 260, 16}, {3, 260, 8}, 902);
  causal.request.causal = CausalAlignment::kTopLeft;
  causal.request.return_weights = true;
  ExpectSameOnThreads(causal, "causal + weights");
  Problem bottom = make_problem({2, 70, 16}, {2, 300, 16}, {2, 300, 12}, 903);
  bottom.request.causal = CausalAlignment::kBottomRight;
  ExpectSameOnThreads(bottom, "bottom-right");
}

// Streamed inputs give the same bits as inputs in place, on one thread and on several, in the
// tasks' every shape: causal blocks handed out last first, packed documents, a window, whole-head
// and grouped tasks, weights, a call small enough for one thread, the decode kernel.
TEST(SimdThreads, StreamedInputsMatchInputsInPlace) {
  set_max_threads(4);
  std::vector<std::pair<const char*, Problem>> cases;
  Problem causal = make_problem({1, 1, 700, 32}, {1, 1, 700, 32}, {1, 1, 700, 24}, 910);
  causal.request.causal = CausalAlignment::kTopLeft;
  cases.emplace_back("causal", causal);
  Problem documents = causal;
  documents.request.has_documents = true;
  documents.request.query_documents_shape = {1, 700};
  documents.request.key_documents_shape = {1, 700};
  for (int i = 0; i < 700; ++i) documents.query_documents.push_back(i / 100);
  documents.key_documents = documents.query_documents;
  cases.emplace_back("documents", documents);
  Problem window = causal;
  window.request.has_window_left = true;
  window.request.window_left = 90;
  window.request.return_weights = true;
  cases.emplace_back("window + weights", window);
  Problem gqa = make_problem({2, 4, 150, 20}, {2, 2, 260, 20}, {2, 2, 260, 7}, 911);
  gqa.request.enable_gqa = true;
  cases.emplace_back("gqa", gqa);
  Problem many_heads = make_problem({2, 8, 150, 20}, {2, 8, 90, 20}, {2, 8, 90, 16}, 912);
  many_heads.request.causal = CausalAlignment::kBottomRight;
  cases.emplace_back("many heads, causal", many_heads);
  cases.emplace_back("small", make_problem({1, 1, 8, 8}, {1, 1, 8, 8}, {1, 1, 8, 8}, 913));
  cases.emplace_back("decode", make_problem({1, 2, 1, 64}, {1, 2, 3000, 64}, {1, 2, 3000, 64}, 914));
  for (const auto& [what, p] : cases) {
    const Result in_place = run_backend(Backend::kSimd128, p, 1);
    for (int threads : {1, 2, 4}) {
      for (int32_t chunks : {1, 3, 16}) {
        const Result streamed = run_streamed(p, threads, chunks, std::chrono::microseconds(300));
        EXPECT_TRUE(same_bits(streamed.output, in_place.output)) << what << " threads=" << threads << " chunks=" << chunks;
        EXPECT_TRUE(same_bits(streamed.weights, in_place.weights))
            << what << " (weights) threads=" << threads << " chunks=" << chunks;
      }
    }
  }
}

}  // namespace
}  // namespace sdpa::testing
