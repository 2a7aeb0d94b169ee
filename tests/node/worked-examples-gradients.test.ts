// The worked examples about gradients, the attention module and score functions
// (web/examples/worked-examples.ts) through the gradient/module API. Expected values are float64
// computations here (the source text's formulas, or finite differences), never printed numbers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttention, createSelfAttention, type Attention, type ScoreOptions, type Tensor } from 'sdpa-web';
import { getExample, resolveMatrix, type Matrix } from '../../web/examples/worked-examples.js';
import { maxAbsDiff } from './support/tolerance.js';

const toTensor = (m: Matrix): Tensor => ({ data: new Float32Array(m.data), shape: m.shape });

/** [m, k] · [k, n] in float64. */
function mm(a: ArrayLike<number>, b: ArrayLike<number>, m: number, k: number, n: number): number[] {
  const out = new Array<number>(m * n).fill(0);
  for (let i = 0; i < m; i++) for (let t = 0; t < k; t++) for (let j = 0; j < n; j++) out[i * n + j]! += a[i * k + t]! * b[t * n + j]!;
  return out;
}
const transpose = (a: ArrayLike<number>, r: number, c: number): number[] => {
  const out = new Array<number>(r * c);
  for (let i = 0; i < r; i++) for (let j = 0; j < c; j++) out[j * r + i] = a[i * c + j]!;
  return out;
};

let attn: Attention;
let scalar: Attention;
beforeAll(async () => {
  attn = await createAttention({ backend: 'simd' });
  scalar = await createAttention({ backend: 'scalar' });
});
afterAll(() => {
  attn.dispose();
  scalar.dispose();
});

describe('ex-gradients: the source text’s backward formulas, on both backends', () => {
  it('∂L/∂V = Aᵀ·∂L/∂O, ∂L/∂A = ∂L/∂O·Vᵀ, softmax Jacobian, ∂L/∂Q and ∂L/∂K with 1/√d_k', () => {
    const e = getExample('ex-gradients');
    const [Q, K, V, dO] = [e.inputs.q!, e.inputs.k!, e.inputs.v!, e.inputs.dOutput!].map((m) => resolveMatrix(m, attn));
    const [lq, d] = Q!.shape as [number, number];
    const lk = K!.shape[0]!, dv = V!.shape[1]!;
    // float64, step by step as in §2.7 (1/√d_k rounded to float32, the scale the core uses)
    const scale = Math.fround(1 / Math.sqrt(d));
    const S = mm(Q!.data, transpose(K!.data, lk, d), lq, d, lk).map((x) => x * scale);
    const A: number[] = [];
    for (let i = 0; i < lq; i++) {
      const row = S.slice(i * lk, (i + 1) * lk);
      const m = Math.max(...row);
      const ex = row.map((x) => Math.exp(x - m));
      const sum = ex.reduce((a, b) => a + b, 0);
      A.push(...ex.map((x) => x / sum));
    }
    const dV = mm(transpose(A, lq, lk), dO!.data, lk, lq, dv); // Aᵀ·∂L/∂O
    const dA = mm(dO!.data, transpose(V!.data, lk, dv), lq, dv, lk); // ∂L/∂O·Vᵀ
    const dS = new Array<number>(lq * lk).fill(0); // Jacobian s_i(δ_ij − s_j)
    for (let r = 0; r < lq; r++) {
      for (let i = 0; i < lk; i++) {
        for (let j = 0; j < lk; j++) dS[r * lk + j]! += dA[r * lk + i]! * A[r * lk + i]! * ((i === j ? 1 : 0) - A[r * lk + j]!);
      }
    }
    const dQ = mm(dS, K!.data, lq, lk, d).map((x) => x * scale);
    const dK = mm(transpose(dS, lq, lk), Q!.data, lk, lq, d).map((x) => x * scale);
    for (const engine of [attn, scalar]) {
      const g = engine.scaledDotProductAttentionBackwardSync(toTensor(Q!), toTensor(K!), toTensor(V!), toTensor(dO!));
      expect(maxAbsDiff(g.dValue.data, dV), `${engine.backend} dV`).toBeLessThan(1e-6);
      expect(maxAbsDiff(g.dQuery.data, dQ), `${engine.backend} dQ`).toBeLessThan(1e-6);
      expect(maxAbsDiff(g.dKey.data, dK), `${engine.backend} dK`).toBeLessThan(1e-6);
    }
    const g64 = scalar.referenceAttentionBackward(toTensor(Q!), toTensor(K!), toTensor(V!), toTensor(dO!));
    expect(maxAbsDiff(g64.dQuery.data, dQ)).toBeLessThan(1e-12);
    expect(maxAbsDiff(g64.dKey.data, dK)).toBeLessThan(1e-12);
    expect(maxAbsDiff(g64.dValue.data, dV)).toBeLessThan(1e-12);
  });
});

describe('ex-module-8x32 through createSelfAttention', () => {
  const e = getExample('ex-module-8x32');
  let x: Matrix, wq: Matrix, wk: Matrix, wv: Matrix;
  beforeAll(() => {
    x = resolveMatrix(e.inputs.x!, attn);
    [wq, wk, wv] = (['wq', 'wk', 'wv'] as const).map((n) => resolveMatrix(e.inputs[n]!, attn)) as [Matrix, Matrix, Matrix];
  });

  it('the library’s Xavier init reproduces the example’s weights, drawn as U(−a, a) from the same stream', () => {
    // The example draws W as U(0, 1) draws mapped by (2u − 1)·√(6/(fanIn+fanOut)); only the order of
    // rounding differs from xavierUniform's, so they agree to float32 rounding.
    for (const [w, seed] of [[wq, 101], [wk, 102], [wv, 103]] as const) {
      expect(maxAbsDiff(attn.xavierUniform([32, 16], seed).data, w.data)).toBeLessThan(2 ** -24);
    }
  });

  it('runs with the example’s weights: output [8, 16], weights [8, 8] with rows summing to 1, as float64', async () => {
    const sa = await createSelfAttention({ dModel: 32, dK: 16, weights: { wQ: toTensor(wq!), wK: toTensor(wk!), wV: toTensor(wv!) } });
    const { output, weights } = sa.forward(toTensor(x));
    expect(output.shape).toEqual([8, 16]);
    expect(weights.shape).toEqual([8, 8]);
    const xf = Array.from(new Float32Array(x.data)); // the module sees float32 inputs
    const f32 = (m: Matrix) => Array.from(new Float32Array(m.data));
    const q = mm(xf, f32(wq!), 8, 32, 16), k = mm(xf, f32(wk!), 8, 32, 16), v = mm(xf, f32(wv!), 8, 32, 16);
    const ref = scalar.referenceAttention(toTensor({ shape: [8, 16], data: q }), toTensor({ shape: [8, 16], data: k }), toTensor({ shape: [8, 16], data: v }));
    expect(maxAbsDiff(output.data, ref.output.data)).toBeLessThan(2e-5);
    expect(maxAbsDiff(weights.data, ref.weights.data)).toBeLessThan(2e-5);
    for (let i = 0; i < 8; i++) expect(Math.abs(weights.data.subarray(i * 8, i * 8 + 8).reduce((a, b) => a + b, 0) - 1)).toBeLessThan(1e-6);
    sa.dispose();
    await expect(createSelfAttention({ dModel: 32, dK: 16, weights: { wQ: toTensor(wq!), wK: toTensor(wk!), wV: toTensor(x) } })).rejects.toThrow(
      /weights.wV must have shape \[32, 16\]/,
    );
  });

  it('runs with seeded weights too', async () => {
    const sa = await createSelfAttention({ dModel: 32, dK: 16, seed: 2024 });
    const { output, weights } = sa.forward(toTensor(x));
    expect(output.shape).toEqual([8, 16]);
    expect(weights.shape).toEqual([8, 8]);
    sa.dispose();
  });
});

describe('ex-score-functions through attentionScores', () => {
  it('additive, multiplicative and scaled dot product scores and weights match float64', () => {
    const e = getExample('ex-score-functions');
    const q = resolveMatrix(e.inputs.q!, attn), k = resolveMatrix(e.inputs.k!, attn);
    const { w, w1, w2, va } = e.inputs.scoreFunctions!;
    const [lq, d] = q.shape as [number, number];
    const lk = k.shape[0]!, h = va.length;
    const expected = (f: (i: number, j: number) => number) => Array.from({ length: lq * lk }, (_, x) => f(Math.floor(x / lk), x % lk));
    const dot = (i: number, j: number) => q.data.slice(i * d, i * d + d).reduce((s, a, t) => s + a * k.data[j * d + t]!, 0);
    const cases: [ScoreOptions, number[]][] = [
      [{ kind: 'scaled-dot' }, expected((i, j) => dot(i, j) * Math.fround(1 / Math.sqrt(d)))],
      [{ kind: 'multiplicative', w: toTensor(w) }, expected((i, j) => {
        let s = 0;
        for (let a = 0; a < d; a++) for (let c = 0; c < d; c++) s += q.data[i * d + a]! * w.data[a * d + c]! * k.data[j * d + c]!;
        return s;
      })],
      [{ kind: 'additive', w1: toTensor(w1), w2: toTensor(w2), v: { data: new Float32Array(va), shape: [h] } }, expected((i, j) => {
        let s = 0;
        for (let u = 0; u < h; u++) {
          let z = 0;
          for (let t = 0; t < d; t++) z += w1.data[u * d + t]! * q.data[i * d + t]! + w2.data[u * d + t]! * k.data[j * d + t]!;
          s += va[u]! * Math.tanh(z);
        }
        return s;
      })],
    ];
    const results = cases.map(([options, want]) => {
      const r = attn.attentionScores(toTensor(q), toTensor(k), options);
      expect(maxAbsDiff(r.scores.data, want), options.kind).toBeLessThan(1e-6);
      return r.weights.data;
    });
    // The three functions give different weights for the same q, k (the example's point).
    expect(maxAbsDiff(results[0]!, results[1]!)).toBeGreaterThan(1e-3);
    expect(maxAbsDiff(results[0]!, results[2]!)).toBeGreaterThan(1e-3);
  });
});
