// attention_decode_partial.wgsl: flash-decoding, step 1 of 2: one query row over one split of
// its keys.
//
// Computes, for query row r of the chunk and key split s (keys [s·split_keys, (s + 1)·split_keys)
// within the row's visible range), the split's softmax state: m_s (its max score),
// l_s = Σ_j e^(s_j − m_s) and the normalized partial output o_s = Σ_j e^(s_j − m_s)·v_j / l_s
// (normalized, so that it overflows only where the output itself would), the number of visible
// keys, the last one, and whether a visible score was NaN. attention_decode_merge.wgsl combines
// a row's splits by their log-sum-exp.
//
// Algorithm: one invocation per (row, split), streaming its keys from the storage buffers with
// an online softmax key by key (with a few query rows no K/V tile would be shared, so no
// workgroup memory). Scores, masks, causal/window/key-length ranges, softcap, ALiBi and
// documents use the flash kernels' helpers (attention_common.wgsl.inc,
// attention_flash_common.wgsl.inc); the sink joins in the merge.
//
// Chosen by cpp/webgpu/plan.cpp (webgpu_decode_splits, the rule is there): few query rows per
// head and many keys, no weights or scores: the flash kernels would run one workgroup per head
// and leave most of the GPU idle.
//
// Writes `stats` (the partials): DECODE_STRIDE floats per (row, split), split-minor:
// m_s, l_s, visible count, last visible key, NaN flag (1.0 / 0.0), o_s [EV_PAD].

//! include attention_common.wgsl.inc
//! include attention_flash_common.wgsl.inc

const DECODE_STRIDE: u32 = 5u + EV_PAD;

@compute @workgroup_size(DECODE_INVOCATIONS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let g = (wg.x + p.x_base) * DECODE_INVOCATIONS + t;
  if (g >= p.nbh * p.rows * p.splits) { return; }
  let r = g / p.splits;
  let split = g % p.splits;
  var row = query_row(0u, r / p.rows, r % p.rows);
  var q_row = query_vec4s(row);
  row.first = max(row.first, i32(split * p.split_keys));
  row.last = min(row.last, i32(min((split + 1u) * p.split_keys, p.Lk)) - 1);

  var m = 0.0;
  var l = 0.0;
  var count = 0u;
  var last_key = 0u;
  var nan_row = false;
  var acc: array<vec4<f32>, EV4>;
  for (var j = u32(row.first); i32(j) <= row.last; j++) {
    if (!key_visible(row, j)) { continue; }
    var qk = 0.0;
    for (var e4 = 0u; e4 < E4; e4++) { qk += dot(q_row[e4], key4(row.kv * p.key_stride + j * p.E, 4u * e4, p.E)); }
    let scored = scaled_masked_score(qk, row.mask_row + j * p.mask_sk, alibi_bias(row.b, row.h, row.i, j));
    if (scored.hidden) { continue; }
    if (is_nan(scored.s)) {
      nan_row = true;
      continue;
    }
    let m_new = select(scored.s, max(m, scored.s), count > 0u);
    let alpha = select(1.0, exp(m - m_new), count > 0u);  // l and acc are 0 before the first key
    let w = exp(scored.s - m_new);
    l = l * alpha + w;
    for (var c4 = 0u; c4 < EV4; c4++) {
      acc[c4] = acc[c4] * alpha + w * value4(row.kv * p.value_stride + j * p.Ev, 4u * c4, p.Ev);
    }
    m = m_new;
    count += 1u;
    last_key = j;
  }

  // acc holds l·o_s; where it overflowed, o_s is recomputed with normalized weights.
  var overflowed = false;
  for (var c4 = 0u; c4 < EV4; c4++) { overflowed = overflowed || !all_finite4(acc[c4]); }
  let inv_l = select(0.0, 1.0 / l, count > 0u);
  let base = g * DECODE_STRIDE;
  for (var c4 = 0u; c4 < EV4; c4++) {
    var o = acc[c4] * inv_l;
    if (overflowed && count > 1u && !nan_row) { o = normalized_output4(row, q_row, m, l, c4); }
    for (var d = 0u; d < 4u; d++) { stats[base + 5u + 4u * c4 + d] = o[d]; }
  }
  stats[base] = m;
  stats[base + 1u] = l;
  stats[base + 2u] = f32(count);
  stats[base + 3u] = f32(last_key);
  stats[base + 4u] = select(0.0, 1.0, nan_row);
}
