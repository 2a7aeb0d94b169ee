// How the SIMD forward kernel (attention_f32_simd128) hands its work to the thread pool: the
// task shape (which query blocks of which head one task attends) and the protocol by which the
// tasks share the packing of K/V tiles. What a task computes stays in the kernel.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <thread>

#include "cpu/thread_pool.h"

namespace sdpa {

// Query blocks of one task that take turns on each K/V tile while it is in L2.
constexpr int kBlocksPerTask = 4;

// Tasks of one forward call over `heads` (batch·query head) heads of `blocks` query blocks:
// groups of up to kBlocksPerTask blocks of one head, head-major; a group's blocks take turns on
// each K/V tile, which is read from L3/memory once per group and then hit in L2. Causal: the
// groups with the most tiles (the last) first.
//  - Fewer blocks per group when that would leave a thread with less than 4 tasks to balance.
//  - With at least 4 heads per thread, all heads but the last `threads` are one task each (its
//    groups one after another on one thread), so each of those heads' Kᵀ tiles are packed and
//    read on one core rather than passed between cores.
//  - Unmasked by causality, the last head's last `threads` groups are split into one-block tasks,
//    so the threads finish within about a block of each other.
class ForwardTasks {
 public:
  using idx = std::ptrdiff_t;

  ForwardTasks(idx heads, idx blocks, int threads, bool causal);

  // Runs every task on `threads` threads (cpu/thread_pool.h), calling
  // attend_blocks(head, first_block, block_count, worker) for each group of blocks.
  template <typename AttendBlocks>
  void run(int threads, AttendBlocks&& attend_blocks) const {
    auto attend_group = [&](idx head, idx group, int worker) {
      const idx first_block = group * per_task_;
      attend_blocks(head, first_block, std::min<idx>(per_task_, blocks_ - first_block), worker);
    };
    parallel_for(threads, static_cast<int64_t>(tasks_), [&](int64_t task_index, int worker) {
      idx task = static_cast<idx>(task_index);
      if (task < whole_heads_) {
        for (idx group = 0; group < groups_; ++group) attend_group(task, group, worker);
        return;
      }
      task -= whole_heads_;
      if (task < grouped_tasks_) {
        const idx group = task % groups_;
        attend_group(whole_heads_ + task / groups_, reverse_ ? groups_ - 1 - group : group, worker);
      } else {
        attend_blocks(heads_ - 1, first_split_block_ + (task - grouped_tasks_), 1, worker);
      }
    });
  }

 private:
  idx heads_, blocks_;
  bool reverse_;
  idx per_task_, groups_, whole_heads_, grouped_tasks_, first_split_block_, tasks_;
};

// The packing of each (key/value head, key tile) by the first task that needs it: one parallel
// region per call, each tile packed just before its first use. A state word per tile: 0 not
// packed, 1 being packed, 2 packed.
class TilePacking {
 public:
  using idx = std::ptrdiff_t;

  // `storage`: tile_count words of the caller's workspace (one float slot per state).
  TilePacking(float* storage, idx tiles_per_head, idx tile_count)
      : states_(reinterpret_cast<std::atomic<int32_t>*>(storage)), tiles_per_head_(tiles_per_head) {
    static_assert(sizeof(std::atomic<int32_t>) == sizeof(float), "one float slot per tile state");
    for (idx i = 0; i < tile_count; ++i) new (&states_[i]) std::atomic<int32_t>(0);
  }

  // Tile t of head kv packed (by pack(kv, t)), by this thread or another. While another thread
  // packs it, this one packs the task's later tiles (before `needed`) rather than wait: threads
  // that start on one head together share its packing.
  template <typename Pack>
  void ensure_packed(idx kv, idx t, idx needed, Pack&& pack) const {
    const std::atomic<int32_t>& state = states_[kv * tiles_per_head_ + t];
    if (state.load(std::memory_order_acquire) == 2 || try_pack(kv, t, pack)) return;
    for (idx u = t + 1; u < needed && state.load(std::memory_order_acquire) != 2; ++u) try_pack(kv, u, pack);
    while (state.load(std::memory_order_acquire) != 2) std::this_thread::yield();
  }

 private:
  // Packs tile t of head kv unless another thread has claimed it (then returns false).
  template <typename Pack>
  bool try_pack(idx kv, idx t, Pack& pack) const {
    std::atomic<int32_t>& state = states_[kv * tiles_per_head_ + t];
    int32_t expected = 0;
    if (state.load(std::memory_order_relaxed) != 0 ||
        !state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      return false;
    }
    pack(kv, t);
    state.store(2, std::memory_order_release);
    return true;
  }

  std::atomic<int32_t>* states_;
  idx tiles_per_head_;
};

}  // namespace sdpa
