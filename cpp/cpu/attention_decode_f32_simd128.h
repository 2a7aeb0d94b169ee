// The decode kernel: attention of a few query rows against many keys (a generation step on a KV
// cache), at the speed of reading K and V once. See the .cpp header.
#pragma once

#include <cstdint>

#include "core/problem.h"

namespace sdpa {

// Keys per chunk: one chunk's scores for every row of a KV-head group, then its P·V, while the
// chunk's K and V rows (64 · (E + Ev) floats) are in L1/L2.
constexpr int kDecodeChunkKeys = 64;

// How the keys of each (batch, KV head) are split into independent tasks whose partial results
// are merged by their log-sum-exp (split-K). Chosen by dispatch/.
struct DecodeSplit {
  int64_t keys_per_split = 0;   // a multiple of kDecodeChunkKeys
  int64_t splits_per_head = 1;  // ceil(Lk / keys_per_split): every head has this many tasks
};

// Scratch bytes attention_decode_f32_simd128 needs: the partial results of every task plus one
// chunk of scores per thread.
uint64_t decode_workspace_bytes(const AttentionPlan& plan, const DecodeSplit& split, int threads);

// output [B, Hq, Lq, Ev]; lse [B, Hq, Lq] (may be null). Keys and values are in.key/in.value, or
// in.key_f16/in.value_f16 when plan.key_type is float16 (then both float16, with no Inf or NaN). No weights or score output: dispatch
// sends those calls to attention_f32_simd128. Runs on up to `threads` threads.
void attention_decode_f32_simd128(const AttentionPlan& plan, const AttentionInputs& in, const DecodeSplit& split,
                                  float* output, float* workspace, int threads, float* lse = nullptr);

}  // namespace sdpa
