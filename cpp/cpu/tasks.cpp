#include "cpu/tasks.h"

#include <algorithm>

namespace sdpa {

ForwardTasks::ForwardTasks(idx heads, idx blocks, int threads, bool causal)
    : heads_(heads), blocks_(blocks), reverse_(causal) {
  per_task_ = std::max<idx>(1, std::min<idx>(kBlocksPerTask, heads * blocks / (4 * threads)));
  groups_ = (blocks + per_task_ - 1) / per_task_;
  whole_heads_ = threads > 1 && heads >= 4 * threads ? heads - threads : 0;
  const idx split_groups = reverse_ || threads == 1 || per_task_ == 1 ? 0 : std::min<idx>(groups_, threads);
  grouped_tasks_ = (heads - whole_heads_) * groups_ - split_groups;
  first_split_block_ = (groups_ - split_groups) * per_task_;
  tasks_ = whole_heads_ + grouped_tasks_ + (split_groups > 0 ? blocks - first_split_block_ : 0);
}

}  // namespace sdpa
