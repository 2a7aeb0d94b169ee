// attention_flash_common.wgsl: what both flash kernels (attention_flash.wgsl and
// attention_flash_tiled.wgsl) share: their bindings, a query row's setup, the value loader, the
// recompute of an output whose accumulator overflowed, and how a finished row is written. Prepended by the C++ glue after attention_common.wgsl.

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> query: array<f32>;
@group(0) @binding(2) var<storage, read> key: array<f32>;
@group(0) @binding(3) var<storage, read> value: array<f32>;
@group(0) @binding(4) var<storage, read> mask: array<u32>;
@group(0) @binding(5) var<storage, read_write> output: array<f32>;
@group(0) @binding(6) var<storage, read_write> stats: array<f32>;

const ROWS: u32 = 64u;         // query rows per workgroup
const E4: u32 = E_PAD / 4u;    // vec4s per padded key/query row
const EV4: u32 = EV_PAD / 4u;  // vec4s per padded value/output row

// Query row r (0…63) of workgroup tile `tile` of chunk head `head`: where it lives and which
// keys it may see.
struct QueryRow {
  in_range: bool,  // a row of the chunk (the last tile may run past it)
  i: u32,          // its query row in [0, Lq)
  b: u32,
  h: u32,
  kv: u32,         // its key/value head in the chunk (GQA: query head h reads h / (Hq/Hkv))
  out_row: u32,    // its row in the chunk's query, output and stats buffers
  mask_row: u32,   // the mask element of (b, h, i, key 0)
  last: i32,       // the last key it may see (-1: none, for rows past the chunk)
}
fn query_row(tile: u32, head: u32, r: u32) -> QueryRow {
  var q: QueryRow;
  let row_local = tile * ROWS + r;
  q.in_range = row_local < p.rows;
  q.i = p.row0 + row_local;
  let bh = p.bh0 + head;
  q.b = bh / p.Hq;
  q.h = bh % p.Hq;
  q.kv = q.b * p.Hkv + q.h / p.group - p.kv0;
  q.out_row = head * p.rows + row_local;
  q.mask_row = q.b * p.mask_sb + q.h * p.mask_sh + q.i * p.mask_sq;
  q.last = i32(p.Lk) - 1;
  if (CAUSAL) { q.last = min(i32(q.i) + p.causal_offset, q.last); }
  if (!q.in_range) { q.last = -1; }
  return q;
}

// The last key any row of workgroup tile `tile` may see. Kept apart from query_row: it bounds
// the loops around workgroupBarrier(), which must see a workgroup-uniform value.
fn tile_last_key(tile: u32) -> i32 {
  if (!CAUSAL) { return i32(p.Lk) - 1; }
  let tile_rows_end = min(tile * ROWS + ROWS, p.rows);
  return min(i32(p.row0 + tile_rows_end) - 1 + p.causal_offset, i32(p.Lk) - 1);
}

// The row's query, zero-padded to E_PAD (zeros for rows past the chunk).
fn query_vec4s(q: QueryRow) -> array<vec4<f32>, E4> {
  var v: array<vec4<f32>, E4>;
  if (q.in_range) {
    for (var e4 = 0u; e4 < E4; e4++) { v[e4] = query4(q.out_row * p.E, 4u * e4, p.E); }
  }
  return v;
}

fn value4(base: u32, c: u32, n: u32) -> vec4<f32> {
  var r = vec4<f32>(0.0);
  for (var d = 0u; d < 4u; d++) { if (c + d < n) { r[d] = value[base + c + d]; } }
  return r;
}

// Output columns 4·c4 … 4·c4 + 3 of `row` as Σ_j (e^(s_j − m)/l)·V_j over its visible keys,
// reading K and V from the buffers. A kernel's accumulator holds l·output, which overflows where
// the output is within a factor l of FLT_MAX (V near FLT_MAX): only such rows take this path
// (rare; as the SIMD kernel does).
fn normalized_output4(row: QueryRow, q_row: array<vec4<f32>, E4>, m: f32, l: f32, c4: u32) -> vec4<f32> {
  var o = vec4<f32>(0.0);
  for (var j = 0u; i32(j) <= row.last; j++) {
    if (MASK_KIND == 1u && !mask_bool(row.mask_row + j * p.mask_sk)) { continue; }
    var qk = 0.0;
    for (var e4 = 0u; e4 < E4; e4++) { qk += dot(q_row[e4], key4((row.kv * p.Lk + j) * p.E, 4u * e4, p.E)); }
    let scored = scaled_masked_score(qk, row.mask_row + j * p.mask_sk);
    if (scored.hidden) { continue; }
    o += (exp(scored.s - m) / l) * value4((row.kv * p.Lk + j) * p.Ev, 4u * c4, p.Ev);
  }
  return o;
}

// Output element `col` of a finished row whose accumulator gives `scaled` (acc·1/l). A row with
// exactly one visible key gets that key's value, copied: its weight is exactly 1, and a product
// could flush a subnormal value to zero (WGSL allows it). A row that saw no key is zeros; a row
// with a NaN score is NaN.
fn output_value(row: QueryRow, scaled: f32, visible_count: u32, single_key: u32, seen: bool, nan_row: bool, col: u32) -> f32 {
  var o = scaled;
  if (visible_count == 1u) { o = value[(row.kv * p.Lk + single_key) * p.Ev + col]; }
  if (!seen) { o = 0.0; }
  if (nan_row) { o = bitcast<f32>(p.nan_bits); }
  return o;
}

// The row's softmax statistics for attention_weights.wgsl: (max, denominator), (0, 0) for a row
// that saw no key, (NaN, l) for a row with a NaN score.
fn write_row_stats(row: QueryRow, m: f32, l: f32, seen: bool, nan_row: bool) {
  stats[2u * row.out_row] = select(select(0.0, m, seen), bitcast<f32>(p.nan_bits), nan_row);
  stats[2u * row.out_row + 1u] = select(0.0, l, seen);
}
