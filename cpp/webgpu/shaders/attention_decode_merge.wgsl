// attention_decode_merge.wgsl: flash-decoding, step 2 of 2: a query row's output from the
// partial states of its key splits (attention_decode_partial.wgsl, or the flash kernels in their
// SPLIT mode for a prefill whose keys are split; read from `stats`).
//
// Computes, with M = max_s m_s over the splits that saw a key and L = Σ_s e^(m_s − M)·l_s (the
// sink, when there is one, joining M and L as in the flash kernels), the output
//   o = Σ_s (e^(m_s − M)·l_s / L) · o_s,
// i.e. the softmax over every visible key, merged by log-sum-exp; weights at most 1, so nothing
// overflows where the output does not. Semantics as the flash kernels (output_value): a row that
// sees no key writes zeros, a NaN score makes the row NaN, a row with exactly one visible key
// (and no sink) copies that key's value row. With WRITE_LSE, also the row's log-sum-exp
// M + log L (write_row_lse).
//
// Algorithm: one workgroup of DECODE_INVOCATIONS lanes per query row. Lane t takes the splits
// s ≡ t (mod lanes) for M, the key count and the NaN flag, and then for L; every lane combines
// the lanes' parts in the same order (workgroup memory), so all hold the same M, L and sink.
// The weighted sum runs over chunks of `lanes` splits: each lane computes one split's weight into
// workgroup memory, then adds the chunk's weighted partial outputs to the columns it owns
// (c ≡ t mod lanes: adjacent lanes read adjacent words of a record).
//
// Chosen with attention_decode_partial.wgsl (cpp/webgpu/plan.cpp, webgpu_decode_splits) and with
// the flash kernels' key split (webgpu_flash_key_splits).

//! include attention_common.wgsl.inc
//! include attention_flash_common.wgsl.inc

const DECODE_STRIDE: u32 = 5u + EV_PAD;
const LANES: u32 = DECODE_INVOCATIONS;
const COLUMNS_PER_LANE: u32 = (EV_PAD + LANES - 1u) / LANES;

var<workgroup> lane_m: array<f32, LANES>;
var<workgroup> lane_count: array<u32, LANES>;
var<workgroup> lane_key: array<u32, LANES>;
var<workgroup> lane_nan: array<u32, LANES>;
var<workgroup> lane_l: array<f32, LANES>;
var<workgroup> chunk_weight: array<f32, LANES>;
var<workgroup> chunk_used: array<u32, LANES>;

@compute @workgroup_size(DECODE_INVOCATIONS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let r = wg.x + p.x_base;
  if (r >= p.nbh * p.rows) { return; }
  let row = query_row(0u, r / p.rows, r % p.rows);
  let first = r * p.splits * DECODE_STRIDE;

  var m = 0.0;
  var count = 0u;
  var key = 0u;
  var nan_lane = false;
  for (var s = t; s < p.splits; s += LANES) {
    let base = first + s * DECODE_STRIDE;
    nan_lane = nan_lane || stats[base + 4u] != 0.0;
    let c = u32(stats[base + 2u]);
    if (c > 0u) {
      m = select(stats[base], max(m, stats[base]), count > 0u);
      count += c;
      key = u32(stats[base + 3u]);
    }
  }
  lane_m[t] = m;
  lane_count[t] = count;
  lane_key[t] = key;
  lane_nan[t] = u32(nan_lane);
  workgroupBarrier();
  // With exactly one visible key, exactly one split (and lane) saw it: its last key is that key.
  var row_m = 0.0;
  var row_count = 0u;
  var single_key = 0u;
  var nan_row = false;
  for (var i = 0u; i < LANES; i++) {
    nan_row = nan_row || lane_nan[i] != 0u;
    if (lane_count[i] > 0u) {
      row_m = select(lane_m[i], max(row_m, lane_m[i]), row_count > 0u);
      row_count += lane_count[i];
      single_key = lane_key[i];
    }
  }
  var l = 0.0;
  for (var s = t; s < p.splits; s += LANES) {
    let base = first + s * DECODE_STRIDE;
    if (stats[base + 2u] > 0.0) { l += exp(stats[base] - row_m) * stats[base + 1u]; }
  }
  lane_l[t] = l;
  workgroupBarrier();
  var row_l = 0.0;
  for (var i = 0u; i < LANES; i++) { row_l += lane_l[i]; }
  let seen = row_count > 0u;
  let sink = fold_sink(row.h, row_m, row_l, seen && !nan_row);
  var visible_count = row_count;
  if (sink.applied) { visible_count = 0u; }  // the weights no longer sum to 1: no single-key copy

  var o: array<f32, COLUMNS_PER_LANE>;
  for (var chunk = 0u; chunk < p.splits; chunk += LANES) {
    let s = chunk + t;
    var w = 0.0;
    var used = 0u;
    if (s < p.splits) {
      let base = first + s * DECODE_STRIDE;
      if (stats[base + 2u] > 0.0) {
        used = 1u;
        w = exp(stats[base] - sink.m) * stats[base + 1u] / sink.l;
      }
    }
    chunk_weight[t] = w;
    chunk_used[t] = used;
    workgroupBarrier();
    let n = min(LANES, p.splits - chunk);
    for (var i = 0u; i < n; i++) {
      if (chunk_used[i] == 0u) { continue; }
      let base = first + (chunk + i) * DECODE_STRIDE + 5u;
      for (var j = 0u; j < COLUMNS_PER_LANE; j++) {
        let c = t + j * LANES;
        if (c < p.Ev) { o[j] += chunk_weight[i] * stats[base + c]; }
      }
    }
    workgroupBarrier();
  }
  for (var j = 0u; j < COLUMNS_PER_LANE; j++) {
    let c = t + j * LANES;
    if (c < p.Ev) { output[row.out_row * p.Ev + c] = output_value(row, select(0.0, o[j], seen), visible_count, single_key, seen, nan_row, c); }
  }
  if (WRITE_LSE && t == 0u) { write_row_lse(row, sink, seen, nan_row); }
}
