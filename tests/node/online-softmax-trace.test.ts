// traceOnlineSoftmax: one row's online softmax as the SIMD kernel holds it, checked step by step
// against float64 sums over the keys seen so far (from the float64 reference's masked scores),
// and ending at exactly the library's output.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttention, type Attention, type AttentionOptions } from 'sdpa-web';
import { randomTensor } from './support/tensors.js';

let simd: Attention;
beforeAll(async () => {
  simd = await createAttention({ backend: 'simd', threads: 1 });
});
afterAll(() => simd.dispose());

describe('traceOnlineSoftmax', () => {
  const [B, H, Lq, Lk, E, Ev] = [2, 3, 70, 200, 16, 8];
  const q = randomTensor([B, H, Lq, E], 1, -2, 2), k = randomTensor([B, H, Lk, E], 2, -2, 2), v = randomTensor([B, H, Lk, Ev], 3);
  const cases: [string, AttentionOptions][] = [
    ['no options', {}],
    ['causal bottom-right with a sink', { isCausal: 'bottom-right', sinks: new Float32Array([0.5, 1, 2]) }],
    ['a window and ALiBi', { window: { left: 70, right: 3 }, alibi: true }],
  ];
  for (const [label, options] of cases) {
    it(`${label}: each step's max, sum and accumulator are the float64 ones over the keys seen so far; the last is the output`, () => {
      const [b, h, row] = [1, 2, 45];
      const trace = simd.traceOnlineSoftmax(q, k, v, { ...options, batch: b, head: h, row });
      expect(trace.tileKeys).toBe(64);
      expect(trace.steps.length).toBeGreaterThan(0);
      // the same kernel run gives the call's output
      const output = simd.scaledDotProductAttentionSync(q, k, v, options).output;
      expect(trace.output.data).toEqual(output.data);
      // float64 masked scores of the row
      const scores = simd.referenceAttention(q, k, v, { ...options, returnScores: 'masked' }).scores!.data;
      const s = scores.subarray(((b * H + h) * Lq + row) * Lk, ((b * H + h) * Lq + row + 1) * Lk);
      const sink = options.sinks ? options.sinks[h]! : -Infinity;
      const vRows = v.data.subarray((b * H + h) * Lk * Ev, (b * H + h + 1) * Lk * Ev);
      for (const step of trace.steps) {
        const end = Math.min(Lk, step.firstKey + trace.tileKeys);
        let max = sink;
        for (let j = 0; j < end; j++) max = Math.max(max, s[j]!);
        expect(Math.abs(step.max - max)).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(max)));
        let sum = sink === -Infinity ? 0 : Math.exp(sink - step.max);
        const acc = new Float64Array(Ev);
        for (let j = 0; j < end; j++) {
          if (s[j] === -Infinity) continue;
          const p = Math.exp(s[j]! - step.max);
          sum += p;
          for (let c = 0; c < Ev; c++) acc[c]! += p * vRows[j * Ev + c]!;
        }
        expect(Math.abs(step.sum - sum)).toBeLessThanOrEqual(1e-5 * Math.max(1, sum));
        for (let c = 0; c < Ev; c++) expect(Math.abs(step.accumulator[c]! - acc[c]!)).toBeLessThanOrEqual(1e-5 * Math.max(1, sum));
      }
      const last = trace.steps.at(-1)!;
      const out = output.data.subarray(((b * H + h) * Lq + row) * Ev, ((b * H + h) * Lq + row + 1) * Ev);
      for (let c = 0; c < Ev; c++) expect(Math.abs(last.accumulator[c]! / last.sum - out[c]!)).toBeLessThanOrEqual(1e-6);
    });
  }

  it('shapes a plain call sends to the decode kernel (8 query rows) are traced in the tile kernel, in its own workspace', () => {
    const q8 = randomTensor([8, 16], 4), k8 = randomTensor([320, 16], 5), v8 = randomTensor([320, 4], 6);
    const before = simd.memoryStats().heapBytesInUse;
    for (const row of [0, 7]) {
      const trace = simd.traceOnlineSoftmax(q8, k8, v8, { row });
      expect(trace.steps.map((st) => st.firstKey)).toEqual([0, 64, 128, 192, 256]);
      const o64 = simd.referenceAttention(q8, k8, v8).output.data;
      const last = trace.steps[4]!;
      last.accumulator.forEach((a, c) => expect(Math.abs(a / last.sum - o64[row * 4 + c]!)).toBeLessThan(1e-5));
    }
    expect(simd.memoryStats().heapBytesInUse).toBe(before);
  });

  it('the tile map: a block reads exactly the key tiles its rows may see (causal window; packed documents)', () => {
    const [L, window] = [300, 64];
    const x = randomTensor([1, 1, L, 8], 5), y = randomTensor([1, 1, L, 8], 6), z = randomTensor([1, 1, L, 4], 7);
    const ids = (n: number) => Int32Array.from({ length: L }, (_, i) => Math.floor(i / n));
    const cases: [string, AttentionOptions, (i: number, j: number) => boolean][] = [
      ['causal window', { isCausal: true, window: { left: window } }, (i, j) => j <= i && j >= i - window],
      ['documents of 100, causal', { isCausal: true, queryDocuments: { data: ids(100), shape: [1, L] }, keyDocuments: { data: ids(100), shape: [1, L] } }, (i, j) => j <= i && Math.floor(i / 100) === Math.floor(j / 100)],
    ];
    for (const [label, options, sees] of cases) {
      const { tileMap } = simd.traceOnlineSoftmax(x, y, z, { ...options, row: 0 });
      const [blocks, tiles] = tileMap.shape;
      expect([blocks, tiles, tileMap.blockRows, tileMap.tileKeys]).toEqual([Math.ceil(L / 32), Math.ceil(L / 64), 32, 64]);
      for (let b = 0; b < blocks; b++) {
        for (let t = 0; t < tiles; t++) {
          let any = false;
          for (let i = b * 32; i < Math.min(L, b * 32 + 32) && !any; i++) for (let j = t * 64; j < Math.min(L, t * 64 + 64) && !any; j++) any = sees(i, j);
          expect(tileMap.visited[b * tiles + t], `${label}: block ${b}, tile ${t}`).toBe(any ? 1 : 0);
        }
      }
    }
  });

  it('rejects a row, head or batch out of range and unknown option names; nothing leaks', () => {
    const before = simd.memoryStats().heapBytesInUse;
    expect(() => simd.traceOnlineSoftmax(q, k, v, { row: Lq })).toThrow(/^row must be an integer in \[0, 70\); got 70$/);
    expect(() => simd.traceOnlineSoftmax(q, k, v, { row: 0, head: 3 })).toThrow(RangeError);
    expect(() => simd.traceOnlineSoftmax(q, k, v, { row: 0, batch: -1 })).toThrow(/batch/);
    expect(() => simd.traceOnlineSoftmax(q, k, v, { rows: 1 } as never)).toThrow(/unknown option 'rows' of traceOnlineSoftmax; did you mean 'row'/);
    expect(() => simd.traceOnlineSoftmax(q, k, v, { row: '1' } as never)).toThrow(TypeError);
    expect(simd.memoryStats().heapBytesInUse).toBe(before);
  });
});
