// traceWebGpuOnlineSoftmax: one row's online softmax as the WebGPU flash kernels hold it (the
// tiled kernel and the per-row kernel), checked step by step against float64 sums over the keys
// seen so far, and ending at the same run's output.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttention, type Attention, type AttentionOptions } from 'sdpa-web';
import { randomTensor } from './support/tensors.js';
import { gpu } from './support/webgpu.js';

let webgpu: Attention;
let simd: Attention;
beforeAll(async () => {
  webgpu = await createAttention({ backend: 'webgpu', gpu });
  simd = await createAttention({ backend: 'simd', threads: 1 });
});
afterAll(() => {
  webgpu.dispose();
  simd.dispose();
});

describe('traceWebGpuOnlineSoftmax', () => {
  const [B, H, Lq, Lk] = [1, 2, 40, 200];
  // E = Ev = 16: the tiled kernel (4 lanes a row); E = 160: the per-row kernel.
  for (const [E, Ev, kernel] of [[16, 8, 'flash-tiled:'], [160, 8, 'flash:']] as const) {
    const q = randomTensor([B, H, Lq, E], 11, -2, 2), k = randomTensor([B, H, Lk, E], 12, -2, 2), v = randomTensor([B, H, Lk, Ev], 13);
    const cases: [string, AttentionOptions][] = [
      ['no options', {}],
      ['causal with a window and ALiBi', { isCausal: true, window: { left: 20, right: 0 }, alibi: true }],
    ];
    for (const [label, options] of cases) {
      it(`E = ${E} (${kernel}), ${label}: each tile's max, sum and accumulator are the float64 ones over the keys seen; the last is the output`, async () => {
        const [b, h, row] = [0, 1, 33];
        const trace = await webgpu.traceWebGpuOnlineSoftmax(q, k, v, { ...options, batch: b, head: h, row });
        expect(trace.kernel.startsWith(kernel)).toBe(true);
        expect(trace.steps.length).toBeGreaterThan(0);
        const call = await webgpu.scaledDotProductAttention(q, k, v, options);
        expect(trace.output.data).toEqual(call.output.data);
        const scores = simd.referenceAttention(q, k, v, { ...options, returnScores: 'masked' }).scores!.data;
        const s = scores.subarray(((b * H + h) * Lq + row) * Lk, ((b * H + h) * Lq + row + 1) * Lk);
        const vRows = v.data.subarray((b * H + h) * Lk * Ev, (b * H + h + 1) * Lk * Ev);
        for (const step of trace.steps) {
          expect(step.firstKey % trace.tileKeys).toBe(0);
          const end = Math.min(Lk, step.firstKey + trace.tileKeys);
          let max = -Infinity;
          for (let j = 0; j < end; j++) max = Math.max(max, s[j]!);
          expect(Math.abs(step.max - max)).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(max)));
          let sum = 0;
          const acc = new Float64Array(Ev);
          for (let j = 0; j < end; j++) {
            if (s[j] === -Infinity) continue;
            const w = Math.exp(s[j]! - step.max);
            sum += w;
            for (let c = 0; c < Ev; c++) acc[c] += w * vRows[j * Ev + c]!;
          }
          expect(Math.abs(step.sum - sum)).toBeLessThanOrEqual(1e-4 * Math.max(1, sum));
          step.accumulator.forEach((a, c) => expect(Math.abs(a - acc[c]!)).toBeLessThanOrEqual(1e-4 * Math.max(1, sum)));
        }
        const last = trace.steps[trace.steps.length - 1]!;
        const o = trace.output.data.subarray(((b * H + h) * Lq + row) * Ev, ((b * H + h) * Lq + row + 1) * Ev);
        last.accumulator.forEach((a, c) => expect(Math.abs(a / last.sum - o[c]!)).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(o[c]!))));
      });
    }
  }

  it('rejects a row out of range, unknown options and a CPU instance; the instance stays usable', async () => {
    const q = randomTensor([4, 16], 1), k = randomTensor([100, 16], 2), v = randomTensor([100, 4], 3);
    await expect(webgpu.traceWebGpuOnlineSoftmax(q, k, v, { row: 4 })).rejects.toThrow(/row must be an integer in \[0, 4\); got 4/);
    await expect(webgpu.traceWebGpuOnlineSoftmax(q, k, v, { row: 0, rwo: 1 } as never)).rejects.toThrow(TypeError);
    await expect(simd.traceWebGpuOnlineSoftmax(q, k, v, { row: 0 })).rejects.toThrow(/runs on 'webgpu' instances/);
    const trace = await webgpu.traceWebGpuOnlineSoftmax(q, k, v, { row: 3 });
    expect(trace.steps.map((st) => st.firstKey)).toEqual(Array.from({ length: Math.ceil(100 / trace.tileKeys) }, (_, t) => t * trace.tileKeys));
  });
});
