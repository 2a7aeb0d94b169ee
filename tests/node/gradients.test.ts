// The backward pass through the npm API on both CPU backends (SIMD in both builds): the shared body
// (support/backward-suite.ts, f = 2), the synchronous form, and a float64 finite-difference check
// of the float64 analytic gradient.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttention, type Attention, type BackendName } from 'sdpa-web';
import { defineBackwardSuite, GRADCHECK_CASES, gradcheckInputs } from './support/backward-suite.js';
import { centralDifference, elements, randomTensor } from './support/tensors.js';

let oracle: Attention;
beforeAll(async () => {
  oracle = await createAttention({ backend: 'scalar' });
});
afterAll(() => oracle.dispose());

// The SIMD backward runs in both builds: relaxed SIMD (fused multiply-add) and SIMD128.
const CONFIGS: { backend: BackendName; relaxedSimd?: boolean; label: string }[] = [
  { backend: 'simd', relaxedSimd: true, label: "the 'simd' backend (relaxed SIMD)" },
  { backend: 'simd', relaxedSimd: false, label: "the 'simd' backend (SIMD128)" },
  { backend: 'scalar', label: "the 'scalar' backend" },
];

for (const { backend, relaxedSimd, label } of CONFIGS) {
  defineBackwardSuite({
    label,
    factor: 2,
    create: async () => {
      const attn = await createAttention({ backend, relaxedSimd });
      if (relaxedSimd !== undefined) expect(attn.relaxedSimd).toBe(relaxedSimd);
      return attn;
    },
  });
}

describe('scaledDotProductAttentionBackwardSync', () => {
  it('is the backward, synchronously, on the CPU backends', async () => {
    const attn = await createAttention({ backend: 'simd' });
    const q = randomTensor([2, 9, 8], 1), k = randomTensor([2, 13, 8], 2), v = randomTensor([2, 13, 4], 3), dOut = randomTensor([2, 9, 4], 4);
    const options = { isCausal: true, sinks: new Float32Array([0.5]) };
    const sync = attn.scaledDotProductAttentionBackwardSync(q, k, v, dOut, options);
    const promised = await attn.scaledDotProductAttentionBackward(q, k, v, dOut, options);
    for (const name of ['dQuery', 'dKey', 'dValue', 'dSinks'] as const) expect(sync[name]!.data).toEqual(promised[name]!.data);
    expect(() => attn.scaledDotProductAttentionBackwardSync(q, k, v, dOut, { outputLocation: 'gpu' })).toThrow(/outputLocation 'gpu' needs backend 'webgpu'/);
    attn.dispose();
  });
});

describe('float64 gradcheck through the API', () => {
  // Central differences of L = Σ dO ⊙ O(x) with the float64 forward against the float64 analytic gradient.
  for (const [label, options, qs, ks, vs] of GRADCHECK_CASES) {
    it(label, () => {
      const inputs = gradcheckInputs(qs, ks, vs);
      const run = () => oracle.referenceAttention(inputs.q, inputs.k, inputs.v, options).output.data;
      const out = run();
      const dOut = randomTensor([...oracle.referenceAttention(inputs.q, inputs.k, inputs.v, options).output.shape], 4);
      const loss = () => run().reduce((s, x, i) => s + x * dOut.data[i]!, 0);
      const g = oracle.referenceAttentionBackward(inputs.q, inputs.k, inputs.v, dOut, options);
      expect(out.length).toBe(elements(dOut.shape));
      for (const [name, x] of [['dQuery', inputs.q], ['dKey', inputs.k], ['dValue', inputs.v]] as const) {
        for (let i = 0; i < x.data.length; i++) {
          const numeric = centralDifference(x, i, loss);
          expect(Math.abs(g[name].data[i]! - numeric), `${label} ${name}[${i}]`).toBeLessThanOrEqual(1e-6 + 1e-4 * Math.abs(numeric));
        }
      }
      if (options.sinks) {
        expect(g.dSinks!.shape).toEqual([options.sinks.length]);
        for (let h = 0; h < options.sinks.length; h++) {
          const numeric = centralDifference({ data: options.sinks }, h, loss);
          expect(Math.abs(g.dSinks!.data[h]! - numeric), `${label} dSinks[${h}]`).toBeLessThanOrEqual(1e-6 + 1e-4 * Math.abs(numeric));
        }
      }
    });
  }
});
