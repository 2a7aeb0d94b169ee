// softmax and matmul: the building blocks the texts teach, computed by the same core.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttention, type Attention } from 'sdpa-web';
import { randomTensor } from './support/tensors.js';

describe('softmax and matmul', () => {
  let attn: Attention;
  beforeAll(async () => {
    attn = await createAttention();
  });
  afterAll(() => attn.dispose());

  it('softmax is stable, honours temperature, and zeros a row of -Infinity', () => {
    const x = { data: new Float32Array([100, 200, 300, -Infinity, -Infinity, -Infinity]), shape: [2, 3] };
    const p = attn.softmax(x);
    expect(p.shape).toEqual([2, 3]);
    expect(p.data[2]).toBeCloseTo(1, 7);
    expect([...p.data.subarray(3)]).toEqual([0, 0, 0]);
    const flat = attn.softmax({ data: new Float32Array([1, 2, 3]), shape: [3] }, { temperature: 1e6 });
    for (const w of flat.data) expect(w).toBeCloseTo(1 / 3, 5);
  });

  it('matmul projects [..., M, K] by [K, N] and multiplies batched matrices', () => {
    const a = randomTensor([2, 3, 4], 1), w = randomTensor([4, 5], 2);
    const out = attn.matmul(a, w);
    expect(out.shape).toEqual([2, 3, 5]);
    let dot = 0;
    for (let t = 0; t < 4; t++) dot += a.data[3 * 4 + t]! * w.data[t * 5 + 2]!; // batch 1, row 0, col 2
    expect(out.data[15 + 2]).toBeCloseTo(dot, 5);
    expect(attn.matmul(a, randomTensor([2, 4, 6], 3)).shape).toEqual([2, 3, 6]);
  });

  it('rejects bad arguments with named errors', () => {
    expect(() => attn.softmax({ data: new Float32Array(3), shape: [3] }, { temperature: 0 })).toThrow(RangeError);
    expect(() => attn.softmax({ data: new Float32Array(3), shape: [3] }, { temperature: NaN })).toThrow(/temperature must be a finite number > 0/);
    expect(() => attn.softmax({ data: new Float32Array(3), shape: [3] }, { temperature: '2' as never })).toThrow(TypeError);
    expect(() => attn.softmax({ data: [1, 2] as never, shape: [2] })).toThrow(/x.data must be a Float32Array/);
    expect(() => attn.matmul(randomTensor([3, 4], 1), randomTensor([5, 2], 2))).toThrow(/b must have K = 4 rows/);
    expect(() => attn.matmul(randomTensor([2, 3, 4], 1), randomTensor([3, 4, 2], 2))).toThrow(RangeError);
    expect(() => attn.matmul(randomTensor([4], 1), randomTensor([4, 2], 2))).toThrow(/a must have shape \[\.\.\., M, K\]/);
  });
});
