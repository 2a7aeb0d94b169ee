// attention_decode_merge.wgsl: flash-decoding, step 2 of 2: a query row's output from the
// partial states of its key splits (attention_decode_partial.wgsl, read from `stats`).
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
// Algorithm: one invocation per query row, reading its splits' records twice (M and L, then the
// weighted sum column by column).
//
// Chosen with attention_decode_partial.wgsl (cpp/webgpu/plan.cpp, webgpu_decode_splits).

//! include attention_common.wgsl.inc
//! include attention_flash_common.wgsl.inc

const DECODE_STRIDE: u32 = 5u + EV_PAD;

@compute @workgroup_size(DECODE_INVOCATIONS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let r = (wg.x + p.x_base) * DECODE_INVOCATIONS + t;
  if (r >= p.nbh * p.rows) { return; }
  let row = query_row(0u, r / p.rows, r % p.rows);
  let first = r * p.splits * DECODE_STRIDE;

  var m = 0.0;
  var count = 0u;
  var single_key = 0u;
  var nan_row = false;
  for (var s = 0u; s < p.splits; s++) {
    let base = first + s * DECODE_STRIDE;
    nan_row = nan_row || stats[base + 4u] != 0.0;
    let c = u32(stats[base + 2u]);
    if (c > 0u) {
      m = select(stats[base], max(m, stats[base]), count > 0u);
      count += c;
      single_key = u32(stats[base + 3u]);
    }
  }
  var l = 0.0;
  for (var s = 0u; s < p.splits; s++) {
    let base = first + s * DECODE_STRIDE;
    if (stats[base + 2u] > 0.0) { l += exp(stats[base] - m) * stats[base + 1u]; }
  }
  let seen = count > 0u;
  let sink = fold_sink(row.h, m, l, seen && !nan_row);
  var visible_count = count;
  if (sink.applied) { visible_count = 0u; }  // the weights no longer sum to 1: no single-key copy
  for (var c = 0u; c < p.Ev; c++) {
    var o = 0.0;
    if (seen) {
      for (var s = 0u; s < p.splits; s++) {
        let base = first + s * DECODE_STRIDE;
        if (stats[base + 2u] > 0.0) { o += (exp(stats[base] - sink.m) * stats[base + 1u] / sink.l) * stats[base + 5u + c]; }
      }
    }
    output[row.out_row * p.Ev + c] = output_value(row, o, visible_count, single_key, seen, nan_row, c);
  }
  if (WRITE_LSE) { write_row_lse(row, sink, seen, nan_row); }
}
