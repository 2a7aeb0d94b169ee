// The bench's cases (shapes), their inputs, and the check every engine passes before it is timed.
import { fromFloat16, maxAbsDiff, toFloat16, toleranceBound } from '../../dist/index.js';

/**
 * A case is written H×L×E (B = 1, Lq = Lk = L, Ev = E), B×H×L×E, or B×H×Lq×Lk×E×Ev; tensors are
 * [B, H, Lq|Lk, E|Ev] (H = Hq = Hkv).
 */
export function parseCase(text) {
  const n = text.trim().split('x').map(Number);
  if (n.some((x) => !Number.isInteger(x) || x < 1) || ![3, 4, 6].includes(n.length)) {
    throw new Error(`bad case ${text}: want HxLxE, BxHxLxE or BxHxLqxLkxExEv`);
  }
  const [B, H, Lq, Lk, E, Ev] = n.length === 3 ? [1, n[0], n[1], n[1], n[2], n[2]] : n.length === 4 ? [n[0], n[1], n[2], n[2], n[3], n[3]] : n;
  const name = B === 1 && Lq === Lk && E === Ev ? `${H}x${Lq}x${E}` : `${B}x${H}x${Lq}x${Lk}x${E}x${Ev}`;
  return { name, B, H, Lq, Lk, E, Ev };
}

/** Forward flops, 2·B·H·Lq·Lk·(E + Ev) (half with a causal mask); the backward counts 2.5× that. */
export function flops({ B, H, Lq, Lk, E, Ev }, { causal, backward }) {
  return 2 * B * H * Lq * Lk * (E + Ev) * (causal ? 0.5 : 1) * (backward ? 2.5 : 1);
}

/**
 * The case's tensors q, k, v and dOut (for the backward), U(−1, 1) from the package's seeded
 * generator, one seed per tensor, rounded to float16 values (so that the float16 engines compute
 * on the same numbers and one reference checks every engine).
 */
export function makeInputs(attn, { B, H, Lq, Lk, E, Ev }) {
  const tensor = (seed, L, D) => {
    const t = attn.randomUniform([B, H, L, D], seed);
    return { data: fromFloat16(toFloat16(t.data)), shape: t.shape };
  };
  return { q: tensor(1, Lq, E), k: tensor(2, Lk, E), v: tensor(3, Lk, Ev), dOut: tensor(4, Lq, Ev) };
}

/** The first `rows` rows of the first and the last head (of B·H) of `t`, as [1, heads, rows, D]. */
function sampleHeads(t, rows) {
  const [B, H, L, D] = t.shape;
  const heads = [...new Set([0, B * H - 1])];
  const data = new Float32Array(heads.length * rows * D);
  heads.forEach((h, i) => data.set(t.data.subarray(h * L * D, h * L * D + rows * D), i * rows * D));
  return { data, shape: [1, heads.length, rows, D] };
}

/**
 * The check, the tests' rule: max|o − o64| ≤ f·e_ref + 1e-5·max(1, |V|max) per output (for the
 * backward, per gradient against max|g64|), o64 the package's float64 reference and e_ref the
 * 'scalar' backend's float32 error on the same inputs; f = 4 for WebGPU, 2 for CPU engines. It
 * runs on the first and last head (heads are independent), forward on their first `rows` query
 * rows (top-left causal keeps its meaning), backward on every row. Returns check(outputs, factor)
 * -> { error, bound, ok }, outputs the engine's full [output] or [dQuery, dKey, dValue].
 */
export function makeCheck(scalar, inputs, { causal, backward, rows = 256 }) {
  const keep = backward ? inputs.q.shape[2] : Math.min(rows, inputs.q.shape[2]);
  const q = sampleHeads(inputs.q, keep), dOut = sampleHeads(inputs.dOut, keep);
  const k = sampleHeads(inputs.k, inputs.k.shape[2]), v = sampleHeads(inputs.v, inputs.v.shape[2]);
  const options = { isCausal: causal };
  const pick = (r) => (backward ? [r.dQuery, r.dKey, r.dValue] : [r.output]).map((t) => t.data);
  const reference = pick(backward ? scalar.referenceAttentionBackward(q, k, v, dOut, options) : scalar.referenceAttention(q, k, v, options));
  const plain = pick(backward ? scalar.scaledDotProductAttentionBackwardSync(q, k, v, dOut, options) : scalar.scaledDotProductAttentionSync(q, k, v, options));
  const eRef = plain.map((p, i) => maxAbsDiff(p, reference[i]));
  // each output's full shape, and the rows of each head that the reference covers
  const outputs = backward ? [[inputs.q, keep], [inputs.k, k.shape[2]], [inputs.v, v.shape[2]]] : [[inputs.dOut, keep]];
  // a failing output, else the one nearest its bound, is reported
  return (results, factor) => {
    const checks = results.map((data, i) => {
      const [like, rowCount] = outputs[i];
      const error = maxAbsDiff(sampleHeads({ data, shape: like.shape }, rowCount).data, reference[i]);
      const bound = toleranceBound(eRef[i], factor, backward ? reference[i] : v.data);
      return { error, bound, ok: error <= bound };
    });
    return checks.find((c) => !c.ok) ?? checks.reduce((a, c) => (c.error / c.bound > a.error / a.bound ? c : a));
  };
}
