// Every worked example of the texts (web/examples/worked-examples.ts) runs through the public API.
// Expected values come from float64 computations (attn.referenceAttention, or float64 loops here
// for the plain softmax/matmul examples), never from the numbers the texts print.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttention, type Attention, type AttentionOptions, type MaskTensor, type Tensor } from 'sdpa-web';
import { resolveMatrix, workedExamples, type Matrix, type MaskSpec, type UniformSource, type WorkedExample } from '../../web/examples/worked-examples.js';
import { expectMatchesReference, maxAbsDiff } from './support/tolerance.js';

const toTensor = (m: Matrix): Tensor => ({ data: new Float32Array(m.data), shape: m.shape });
const input = (e: WorkedExample, name: 'q' | 'k' | 'v' | 'x' | 'wq' | 'wk' | 'wv', source: UniformSource): Tensor => {
  const m = e.inputs[name];
  if (!m) throw new Error(`${e.id} has no input ${name}`);
  return toTensor(resolveMatrix(m, source));
};

function maskOptions(mask: MaskSpec | undefined, lq: number, lk: number): AttentionOptions {
  if (!mask) return {};
  if (mask.kind === 'causal') return { isCausal: mask.align };
  if (mask.kind === 'padding') {
    const data = new Uint8Array(lk).map((_, j) => (j < mask.validKeys ? 1 : 0));
    return { attnMask: { data, shape: [lk] } satisfies MaskTensor };
  }
  expect(mask.mask.shape).toEqual([lq, lk]);
  return { attnMask: { data: new Uint8Array(mask.mask.data), shape: mask.mask.shape } };
}

function softmax64(row: number[]): number[] {
  const m = Math.max(...row);
  const e = row.map((x) => Math.exp(x - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / s);
}

function matmul64(a: Matrix, b: Matrix): number[] {
  const [m, k] = a.shape as [number, number];
  const n = b.shape[1]!;
  const out: number[] = [];
  for (let i = 0; i < m; i++) for (let j = 0; j < n; j++) {
    let s = 0;
    for (let t = 0; t < k; t++) s += a.data[i * k + t]! * b.data[t * n + j]!;
    out.push(s);
  }
  return out;
}

describe('worked examples through the API', () => {
  let attn: Attention;
  let oracle: Attention;
  beforeAll(async () => {
    attn = await createAttention({ backend: 'simd' });
    oracle = await createAttention({ backend: 'scalar' });
  });
  afterAll(() => {
    attn.dispose();
    oracle.dispose();
  });

  // Attention on Q, K, V (projected from X first where the example gives X and W), plus every
  // stage of explain() consistent with it.
  async function checkAttention(e: WorkedExample, q: Tensor, k: Tensor, v: Tensor, options: AttentionOptions) {
    await expectMatchesReference(attn, oracle, q, k, v, { ...options, returnWeights: true }, { factor: 2 }, e.id);
    const stages = await attn.explain(q, k, v, options);
    const ref = oracle.referenceAttention(q, k, v, options);
    expect(maxAbsDiff(stages.weights.data, ref.weights.data)).toBeLessThan(1e-6);
    expect(maxAbsDiff(stages.output.data, ref.output.data)).toBeLessThan(1e-5);
    const lk = k.shape.at(-2)!;
    for (let r = 0; r < stages.weights.data.length / lk; r++) {
      const sum = stages.weights.data.subarray(r * lk, (r + 1) * lk).reduce((a, b) => a + b, 0);
      expect([0, 1].some((t) => Math.abs(sum - t) < 1e-6), `${e.id} row ${r} sums to ${sum}`).toBe(true);
    }
    return stages;
  }

  async function runExample(e: WorkedExample): Promise<void> {
    const { inputs } = e;
    switch (e.compute) {
      case 'attention':
      case 'gradients': {
        const q = input(e, 'q', attn), k = input(e, 'k', attn), v = input(e, 'v', attn);
        await checkAttention(e, q, k, v, { ...maskOptions(inputs.mask, q.shape.at(-2)!, k.shape.at(-2)!), scale: inputs.scale });
        return;
      }
      case 'scores': {
        const q = input(e, 'q', attn), k = input(e, 'k', attn);
        const stages = await attn.explain(q, k, k);
        const kt: Matrix = { shape: [k.shape[1]!, k.shape[0]!], data: [] };
        for (let c = 0; c < k.shape[1]!; c++) for (let r = 0; r < k.shape[0]!; r++) kt.data.push(k.data[r * k.shape[1]! + c]!);
        expect(maxAbsDiff(stages.scores.data, matmul64(resolveMatrix(inputs.q!, attn), kt))).toBeLessThan(1e-5);
        return;
      }
      case 'projection-attention':
      case 'score-functions': {
        const hasX = inputs.x !== undefined;
        const [q, k, v] = hasX
          ? (['wq', 'wk', 'wv'] as const).map((w) => {
              const projected = attn.matmul(input(e, 'x', attn), input(e, w, attn));
              const expected = matmul64(resolveMatrix(inputs.x!, attn), resolveMatrix(inputs[w]!, attn));
              expect(maxAbsDiff(projected.data, expected), `${e.id} X·${w}`).toBeLessThan(1e-4);
              return projected;
            })
          : [input(e, 'q', attn), input(e, 'k', attn), inputs.v ? input(e, 'v', attn) : input(e, 'k', attn)];
        const lq = q!.shape.at(-2)!, lk = k!.shape.at(-2)!;
        for (const mask of [inputs.mask, ...(inputs.maskVariants ?? []).map((m) => m.mask)]) {
          await checkAttention(e, q!, k!, v!, { ...maskOptions(mask, lq, lk), scale: inputs.scale });
        }
        return;
      }
      case 'batched': {
        const q = input(e, 'q', attn), k = input(e, 'k', attn), v = input(e, 'v', attn);
        await checkAttention(e, q, k, v, {});
        // One batched call equals one call per sequence.
        const batched = await attn.scaledDotProductAttention(q, k, v);
        const [b, lq, d] = q.shape as [number, number, number];
        const [, lk, ev] = v.shape as [number, number, number];
        for (let s = 0; s < b; s++) {
          const one = await attn.scaledDotProductAttention(
            { data: q.data.subarray(s * lq * d, (s + 1) * lq * d), shape: [lq, d] },
            { data: k.data.subarray(s * lk * d, (s + 1) * lk * d), shape: [lk, d] },
            { data: v.data.subarray(s * lk * ev, (s + 1) * lk * ev), shape: [lk, ev] },
          );
          expect(one.output.data).toEqual(batched.output.data.subarray(s * lq * ev, (s + 1) * lq * ev));
        }
        return;
      }
      case 'softmax':
      case 'temperature': {
        const scores = inputs.scores!;
        for (const temperature of inputs.temperatures ?? [1]) {
          const scale = inputs.scale ?? 1;
          const x = { data: new Float32Array(scores.data.map((s) => s * scale)), shape: scores.shape };
          const got = attn.softmax(x, { temperature });
          const cols = scores.shape.at(-1)!;
          const expected = [];
          for (let r = 0; r < scores.data.length / cols; r++) {
            expected.push(...softmax64(Array.from(x.data.subarray(r * cols, (r + 1) * cols), (s) => s / temperature)));
          }
          expect(maxAbsDiff(got.data, expected), `${e.id} T=${temperature}`).toBeLessThan(1e-6);
          expect(got.data.every(Number.isFinite)).toBe(true); // [100, 200, 300] must not overflow
        }
        return;
      }
      case 'softmax-values':
      case 'weights-values': {
        const v = input(e, 'v', attn);
        const weights = e.compute === 'weights-values'
          ? toTensor(inputs.weights!)
          : attn.softmax(toTensor({ shape: inputs.scores!.shape, data: inputs.scores!.data.map((s) => s * (inputs.scale ?? 1)) }));
        const got = attn.matmul(weights, v);
        const w64: Matrix = { shape: weights.shape as number[], data: Array.from(weights.data) };
        expect(maxAbsDiff(got.data, matmul64(w64, resolveMatrix(inputs.v!, attn)))).toBeLessThan(1e-5);
        return;
      }
      case 'score-stats': {
        // q, k ~ N(0, 1): unscaled scores have std ≈ √d_k, scaled ones ≈ 1.
        for (const dk of inputs.dks!) {
          const n = Math.min(inputs.samples ?? 200, 200);
          const q = toTensor(resolveMatrix({ random: true, shape: [n, dk], seed: inputs.seed ?? 1, dist: 'normal' }, attn));
          const k = toTensor(resolveMatrix({ random: true, shape: [n, dk], seed: (inputs.seed ?? 1) + 1, dist: 'normal' }, attn));
          const stages = await attn.explain(q, k, k);
          const std = (d: Float32Array) => {
            const mean = d.reduce((a, b) => a + b, 0) / d.length;
            return Math.sqrt(d.reduce((a, b) => a + (b - mean) ** 2, 0) / d.length);
          };
          expect(std(stages.scores.data) / Math.sqrt(dk)).toBeGreaterThan(0.9);
          expect(std(stages.scores.data) / Math.sqrt(dk)).toBeLessThan(1.1);
          expect(Math.abs(std(stages.scaledScores.data) - 1)).toBeLessThan(0.1);
        }
        return;
      }
      case 'memory': {
        const { n } = inputs.memory!;
        const x = toTensor(resolveMatrix({ random: true, shape: [n, 8], seed: 5, dist: 'normal' }, attn));
        const { weights } = await attn.scaledDotProductAttention(x, x, x, { returnWeights: true });
        expect(weights!.data.byteLength).toBe(n * n * inputs.memory!.bytesPerElement);
        return;
      }
    }
    throw new Error(`no runner for compute kind ${String(e.compute)}`);
  }

  for (const example of workedExamples) {
    it(`${example.id} (${example.source.seed})`, () => runExample(example));
  }
});
