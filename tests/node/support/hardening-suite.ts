// The reliability checklist (odd shapes, tile edges, hidden non-finite values, overflow, repeats,
// memory growth, leaks, calls in flight), as one test body run on every backend
// (tests/node/hardening-<backend>.test.ts). Expected values come from the float64 reference.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttention, fromFloat16, type Attention, type AttentionOptions, type BackendName, type Float16Tensor, type Tensor } from 'sdpa-web';
import { expectFloat16ResultOf, randomHalf, widenHalf as widen } from './float16-suite.js';
import { concatLengths, elements, randomMasks, randomTensor } from './tensors.js';
import { expectMatchesReference } from './tolerance.js';
import type { SuiteOptions } from './attention-suite.js';

const TILES = [4, 8, 16, 32, 64, 128, 256];

export function defineHardeningSuite(backend: BackendName, { factor, create }: SuiteOptions): void {
  const make = () => (create ? create() : createAttention({ backend }));

  describe(`hardening checklist on the '${backend}' backend`, () => {
    let attn: Attention;
    let oracle: Attention;
    const check = (q: Tensor, k: Tensor, v: Tensor, options: AttentionOptions = {}, label = '') =>
      expectMatchesReference(attn, oracle, q, k, v, options, { factor }, label);
    const run = (q: Tensor, k: Tensor, v: Tensor, options: AttentionOptions = {}) => attn.scaledDotProductAttention(q, k, v, options);

    beforeAll(async () => {
      attn = await make();
      oracle = await createAttention({ backend: 'scalar' });
    });
    afterAll(() => {
      attn.dispose();
      oracle.dispose();
    });

    it('1. odd shapes and head dims 1, 59, 111, 128, 256 with Ev ≠ E', async () => {
      const cases = [[1, 239, 59, 111], [239, 1, 128, 256], [3, 799, 256, 1], [127, 513, 111, 59], [1023, 1025, 128, 64], [40, 70, 1, 59]];
      for (const [lq, lk, e, ev] of cases as [number, number, number, number][]) {
        const q = randomTensor([lq, e], lq + e), k = randomTensor([lk, e], lk + 1), v = randomTensor([lk, ev], ev + 2);
        await check(q, k, v, { returnWeights: lq * lk < 200_000 }, `${lq}x${lk} E=${e} Ev=${ev}`);
      }
    });

    it('2. every length at tile−1, tile and tile+1 for tiles 4…256', async () => {
      for (const tile of TILES) {
        for (const n of [tile - 1, tile, tile + 1]) {
          await check(randomTensor([n, 8], n), randomTensor([n + 3, 8], n + 1), randomTensor([n + 3, 5], n + 2), { returnWeights: true }, `Lq=${n}`);
          await check(randomTensor([5, 8], n), randomTensor([n, 8], n + 1), randomTensor([n, 5], n + 2), { isCausal: 'bottom-right' }, `Lk=${n}`);
        }
      }
    });

    it('3. every broadcast mask equals its expanded copy bit for bit (bool and additive)', async () => {
      const [B, H, Lq, Lk] = [2, 2, 7, 9];
      const q = randomTensor([B, H, Lq, 4], 1), k = randomTensor([B, H, Lk, 4], 2), v = randomTensor([B, H, Lk, 3], 3);
      for (let bits = 0; bits < 16; bits++) {
        const shape = [bits & 8 ? B : 1, bits & 4 ? H : 1, bits & 2 ? Lq : 1, bits & 1 ? Lk : 1];
        for (const mask of Object.values(randomMasks(shape, bits))) {
          const expanded = new (mask.data.constructor as Uint8ArrayConstructor | Float32ArrayConstructor)(B * H * Lq * Lk);
          for (let b = 0; b < B; b++) for (let h = 0; h < H; h++) for (let i = 0; i < Lq; i++) for (let j = 0; j < Lk; j++) {
            const src = (((bits & 8 ? b : 0) * shape[1]! + (bits & 4 ? h : 0)) * shape[2]! + (bits & 2 ? i : 0)) * shape[3]! + (bits & 1 ? j : 0);
            expanded[((b * H + h) * Lq + i) * Lk + j] = mask.data[src]!;
          }
          const a = await run(q, k, v, { attnMask: mask, returnWeights: true });
          const e = await run(q, k, v, { attnMask: { data: expanded, shape: [B, H, Lq, Lk] }, returnWeights: true });
          expect(a.output.data, `mask [${shape}]`).toEqual(e.output.data);
          expect(a.weights!.data).toEqual(e.weights!.data);
        }
      }
    });

    it('4. fully masked rows are zeros; other rows unchanged; huge negative additive masks give no NaN', async () => {
      const q = randomTensor([6, 8], 1), k = randomTensor([10, 8], 2), v = randomTensor([10, 3], 3);
      const plain = await run(q, k, v);
      // Padding (keys 6..9 hidden) + causal in one bool mask: row i sees keys j ≤ i, j < 6.
      const paddedCausal = new Uint8Array(60).map((_, x) => (x % 10 <= Math.floor(x / 10) && x % 10 < 6 ? 1 : 0));
      const r = await run(q, k, v, { attnMask: { data: paddedCausal, shape: [6, 10] }, returnWeights: true });
      await check(q, k, v, { attnMask: { data: paddedCausal, shape: [6, 10] } }, 'padding + causal');
      const rowMask = new Uint8Array(60).fill(1).fill(0, 20, 30); // row 2 sees nothing
      const hidden = await run(q, k, v, { attnMask: { data: rowMask, shape: [6, 10] }, returnWeights: true });
      expect([...hidden.output.data.subarray(6, 9)]).toEqual([0, 0, 0]);
      expect(hidden.weights!.data.subarray(20, 30).every((w) => w === 0)).toBe(true);
      expect(hidden.output.data.subarray(9)).toEqual(plain.output.data.subarray(9));
      expect(hidden.output.data.subarray(0, 6)).toEqual(plain.output.data.subarray(0, 6));
      expect(r.output.data.every(Number.isFinite)).toBe(true);
      for (const big of [-3.4e38, -1e4]) {
        const additive = new Float32Array(60).fill(0).fill(big, 20, 30).fill(big, 3, 5);
        const out = await run(q, k, v, { attnMask: { data: additive, shape: [6, 10] }, returnWeights: true });
        expect(out.output.data.every(Number.isFinite), `additive ${big}`).toBe(true);
        await check(q, k, v, { attnMask: { data: additive, shape: [6, 10] }, returnWeights: true }, `additive ${big}`);
      }
      const br = await run(randomTensor([9, 8], 4), randomTensor([4, 8], 5), randomTensor([4, 3], 6), { isCausal: 'bottom-right', returnWeights: true });
      expect(br.output.data.subarray(0, 15).every((x) => x === 0)).toBe(true); // rows 0..4 see no key
      expect(br.weights!.data.subarray(0, 20).every((x) => x === 0)).toBe(true);
    });

    it('5. hidden keys holding 1e10 or NaN in K or V do not change the output', async () => {
      const q = randomTensor([2, 5, 8], 1), k = randomTensor([2, 70, 8], 2), v = randomTensor([2, 70, 4], 3);
      const mask = new Uint8Array(70).map((_, j) => (j % 7 === 3 ? 0 : 1));
      const clean = await run(q, k, v, { attnMask: { data: mask, shape: [70] } });
      for (const garbage of [1e10, NaN, Infinity]) {
        const k2 = { data: k.data.slice(), shape: k.shape }, v2 = { data: v.data.slice(), shape: v.shape };
        for (let b = 0; b < 2; b++) for (let j = 3; j < 70; j += 7) {
          k2.data.fill(garbage, (b * 70 + j) * 8, (b * 70 + j + 1) * 8);
          v2.data.fill(garbage, (b * 70 + j) * 4, (b * 70 + j + 1) * 4);
        }
        for (const attnMask of [{ data: mask, shape: [70] }, { data: Float32Array.from(mask, (m) => (m ? 0 : -Infinity)), shape: [70] }]) {
          const dirty = await run(q, k2, v2, { attnMask });
          expect(dirty.output.data, `garbage ${garbage}`).toEqual(clean.output.data);
        }
      }
      // Causal: keys after the diagonal hold garbage.
      const kc = { data: k.data.slice(0, 5 * 8), shape: [5, 8] }, vc = { data: v.data.slice(0, 5 * 4), shape: [5, 4] };
      const qc = { data: q.data.slice(0, 5 * 8), shape: [5, 8] };
      const cleanCausal = await run(qc, kc, vc, { isCausal: true });
      const vNaN = { data: vc.data.slice(), shape: vc.shape };
      vNaN.data.fill(NaN, 4 * 4); // key 4: visible only to the last row
      const dirtyCausal = await run(qc, kc, vNaN, { isCausal: true });
      expect(dirtyCausal.output.data.subarray(0, 16)).toEqual(cleanCausal.output.data.subarray(0, 16));
      expect(dirtyCausal.output.data.subarray(16).every(Number.isNaN)).toBe(true);
    });

    it('6. NaN in a visible input makes exactly the affected rows NaN', async () => {
      const q = randomTensor([4, 8], 1), k = randomTensor([9, 8], 2), v = randomTensor([9, 3], 3);
      q.data[2 * 8 + 5] = NaN; // query row 2
      const r = await run(q, k, v, { returnWeights: true });
      for (let i = 0; i < 4; i++) {
        const row = r.output.data.subarray(i * 3, i * 3 + 3);
        expect(row.every(i === 2 ? Number.isNaN : Number.isFinite), `row ${i}`).toBe(true);
      }
      const v2 = { data: v.data.slice(), shape: v.shape };
      v2.data[4 * 3 + 1] = NaN; // value of key 4, column 1: every row, column 1 only
      const r2 = await run(randomTensor([4, 8], 4), k, v2);
      for (let i = 0; i < 4; i++) {
        expect(Number.isNaN(r2.output.data[i * 3 + 1]!)).toBe(true);
        expect(Number.isFinite(r2.output.data[i * 3]!) && Number.isFinite(r2.output.data[i * 3 + 2]!)).toBe(true);
      }
    });

    it('7. large logits stay finite; an overflowing score makes its row NaN; equal scores average V; V near FLT_MAX gives no Inf; Lk = 1 is exact', async () => {
      const q = randomTensor([8, 16], 1, -1e3, 1e3), k = randomTensor([30, 16], 2, -1e3, 1e3), v = randomTensor([30, 4], 3);
      const r = await run(q, k, v, { returnWeights: true });
      expect(r.output.data.every(Number.isFinite)).toBe(true);
      await check(q, k, v, { returnWeights: true }, '|q|,|k| ~ 1e3');
      // Score overflow: q·k·scale = +Inf in row 0 (documented: that row is NaN, as in PyTorch).
      const qInf = { data: new Float32Array([3e38, 1, 1, 1]), shape: [2, 2] };
      const kInf = { data: new Float32Array([3e38, 0, 0, 1]), shape: [2, 2] };
      const overflow = await run(qInf, kInf, randomTensor([2, 2], 4), { scale: 1 });
      expect(overflow.output.data.subarray(0, 2).every(Number.isNaN)).toBe(true);
      expect(overflow.output.data.subarray(2).every(Number.isFinite)).toBe(true);
      // All-equal scores (identical keys) → mean of V.
      const same = { data: new Float32Array(40 * 4).fill(0.5), shape: [40, 4] };
      const v2 = randomTensor([40, 3], 5);
      const mean = await run(randomTensor([3, 4], 6), same, v2);
      for (let c = 0; c < 3; c++) {
        let m = 0;
        for (let j = 0; j < 40; j++) m += v2.data[j * 3 + c]! / 40;
        for (let i = 0; i < 3; i++) expect(mean.output.data[i * 3 + c]).toBeCloseTo(m, 6);
      }
      // V near FLT_MAX: the output (a weighted mean of V) stays finite, although l·output, what a
      // streaming kernel accumulates, overflows.
      const huge = { data: new Float32Array(300 * 3).map((_, i) => (i % 3 === 2 ? -3.3e38 : 3.3e38 - i * 1e34)), shape: [300, 3] };
      const hugeQuery = randomTensor([4, 4], 9);
      const flat = await run(hugeQuery, { data: new Float32Array(300 * 4).fill(0.25), shape: [300, 4] }, huge);
      expect(flat.output.data.every(Number.isFinite)).toBe(true);
      await check(hugeQuery, randomTensor([300, 4], 10, -0.1, 0.1), huge, {}, 'V near FLT_MAX');
      const one = await run(randomTensor([5, 4], 7, -1e3, 1e3), randomTensor([1, 4], 8, -1e3, 1e3), { data: new Float32Array([1e-40, -7, 3e38]), shape: [1, 3] });
      for (let i = 0; i < 5; i++) expect([...one.output.data.subarray(i * 3, i * 3 + 3)]).toEqual([1e-40, -7, 3e38].map(Math.fround));
    });

    it('8. subnormal inputs give no NaN and stay within tolerance', async () => {
      const tiny = (shape: number[], seed: number) => {
        const t = randomTensor(shape, seed);
        t.data.forEach((x, i) => (t.data[i] = x * 1e-39));
        return t;
      };
      const q = tiny([9, 16], 1), k = tiny([20, 16], 2), v = tiny([20, 5], 3);
      const r = await run(q, k, v, { returnWeights: true });
      expect(r.output.data.every(Number.isFinite)).toBe(true);
      await check(q, k, v, { returnWeights: true }, 'subnormal');
      await check(randomTensor([9, 16], 4), randomTensor([20, 16], 5), v, {}, 'subnormal values');
    });

    it('9. zero sizes: B, H or Lq = 0 → empty; Lk = 0 → zeros; E = 0 → RangeError', async () => {
      for (const [qs, ks, vs] of [[[0, 2, 3, 4], [0, 2, 5, 4], [0, 2, 5, 6]], [[2, 0, 3, 4], [2, 0, 5, 4], [2, 0, 5, 6]], [[2, 2, 0, 4], [2, 2, 5, 4], [2, 2, 5, 6]]]) {
        const r = await run(randomTensor(qs!, 1), randomTensor(ks!, 2), randomTensor(vs!, 3), { returnWeights: true });
        expect(r.output.data.length).toBe(0);
        expect(r.output.shape).toEqual([...qs!.slice(0, 3), 6]);
      }
      const noKeys = await run(randomTensor([2, 3, 4], 1), randomTensor([2, 0, 4], 2), randomTensor([2, 0, 6], 3), { returnWeights: true });
      expect(noKeys.output.data.every((x) => x === 0) && noKeys.output.data.length === 36).toBe(true);
      await expect(run(randomTensor([3, 0], 1), randomTensor([4, 0], 2), randomTensor([4, 2], 3))).rejects.toThrow(RangeError);
    });

    it('10. dimension products past 32 bits and buffers past 4 GiB are RangeErrors before allocation', async () => {
      const before = attn.memoryStats().heapBytesInUse;
      const col = randomTensor([46341, 1], 1);
      await expect(run(col, col, col, { returnWeights: true })).rejects.toThrow(/2\^30 elements/);
      await expect(run({ data: new Float32Array(1), shape: [46341, 46341, 0, 1] }, col, col)).rejects.toThrow(RangeError);
      expect(attn.memoryStats().heapBytesInUse).toBe(before);
    });

    it('11. 250 repeats of the same call are bitwise identical', async () => {
      const q = randomTensor([2, 3, 45, 24], 1), k = randomTensor([2, 3, 77, 24], 2), v = randomTensor([2, 3, 77, 16], 3);
      const first = await run(q, k, v, { returnWeights: true, isCausal: 'bottom-right' });
      const bytes = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
      let identical = 0;
      for (let i = 0; i < 250; i++) {
        const again = await run(q, k, v, { returnWeights: true, isCausal: 'bottom-right' });
        if (bytes(again.output.data).equals(bytes(first.output.data)) && bytes(again.weights!.data).equals(bytes(first.weights!.data))) identical++;
      }
      expect(identical).toBe(250);
    });

    it('15. results stay right across wasm memory growth', async () => {
      const q = randomTensor([7, 8], 1), k = randomTensor([9, 8], 2), v = randomTensor([9, 3], 3);
      const before = await run(q, k, v);
      const kept = before.output.data.slice();
      // Weights of 2048 × 2048 (16 MiB) force the heap to grow.
      const big = randomTensor([2048, 4], 4);
      const grown = await run(big, big, big, { returnWeights: true });
      expect(grown.weights!.data.length).toBe(2048 * 2048);
      expect(before.output.data).toEqual(kept); // results are copies, not views into wasm memory
      const after = await run(q, k, v);
      expect(after.output.data).toEqual(kept);
    });

    it('16. 10,000 create/run/dispose cycles return the wasm heap to its baseline', async () => {
      const q = randomTensor([3, 4], 1), k = randomTensor([5, 4], 2), v = randomTensor([5, 2], 3);
      const probe = await make();
      await probe.scaledDotProductAttention(q, k, v);
      const baseline = probe.memoryStats().heapBytesInUse;
      for (let i = 0; i < 10_000; i++) {
        const a = await make();
        await a.scaledDotProductAttention(q, k, v, { returnWeights: i % 2 === 0 });
        a.dispose();
      }
      expect(probe.memoryStats().heapBytesInUse).toBe(baseline);
      probe.dispose();
    });

    it('17. 32 calls in flight at once, mixed shapes and options, all resolve correctly', async () => {
      const jobs = Array.from({ length: 32 }, (_, i) => {
        const lq = 1 + ((i * 7) % 40), lk = 1 + ((i * 13) % 90), e = 1 + (i % 9) * 4, ev = 1 + (i % 5) * 3;
        const q = randomTensor([1 + (i % 2), lq, e], 3 * i), k = randomTensor([1 + (i % 2), lk, e], 3 * i + 1), v = randomTensor([1 + (i % 2), lk, ev], 3 * i + 2);
        const options: AttentionOptions = { isCausal: [false, true, 'bottom-right'][i % 3] as AttentionOptions['isCausal'], returnWeights: i % 4 === 0 };
        return { q, k, v, options, pending: run(q, k, v, options) };
      });
      const results = await Promise.all(jobs.map((j) => j.pending));
      for (const [i, { q, k, v, options }] of jobs.entries()) {
        const ref = oracle.referenceAttention(q, k, v, options);
        expect(results[i]!.output.shape).toEqual(ref.output.shape);
        expect(elements(results[i]!.output.shape)).toBe(results[i]!.output.data.length);
        await check(q, k, v, options, `job ${i}`);
      }
    });

    it('18. calls alternating shapes and options, and a shape array changed in place between calls, are each right', async () => {
      // The sync path re-uses its last plan for an equal request: each call must still get its own.
      const a = randomTensor([2, 9, 8], 1), b = randomTensor([2, 9, 5], 2), c = randomTensor([2, 16, 8], 3);
      const calls: [Tensor, Tensor, Tensor, AttentionOptions][] = [
        [a, a, b, {}], [a, a, b, {}], [a, c, randomTensor([2, 16, 3], 4), {}], [a, a, b, { isCausal: true }],
        [a, a, b, { scale: 0.5 }], [a, a, b, {}], [a, a, b, { returnWeights: true }], [a, a, b, {}],
      ];
      for (const [i, [q, k, v, options]] of calls.entries()) {
        const result = await run(q, k, v, options);
        expect(result.output.shape, `call ${i}`).toEqual([...q.shape.slice(0, -1), v.shape.at(-1)]);
        expect(result.weights === undefined, `call ${i}`).toBe(!options.returnWeights);
        await check(q, k, v, options, `call ${i}`);
      }
      // The same shape array object, edited in place: [2, 9, 8] → [2, 8, 9] over the same data.
      const shared = [2, 9, 8];
      const q = { data: a.data, shape: shared }, k = { data: a.data, shape: shared }, v = { data: a.data, shape: shared };
      await run(q, k, v);
      shared[1] = 8;
      shared[2] = 9;
      const edited = await run(q, k, v);
      expect(edited.output.shape).toEqual([2, 8, 9]);
      await check({ data: a.data, shape: [2, 8, 9] }, { data: a.data, shape: [2, 8, 9] }, { data: a.data, shape: [2, 8, 9] }, {}, 'edited shape');
      // A result's shape array is the caller's to change.
      (edited.output.shape as number[])[0] = 99;
      expect((await run(q, k, v)).output.shape).toEqual([2, 8, 9]);
    });

    it('19. a misspelled option of every entry point is a TypeError naming it and the closest known name, before anything is allocated', async () => {
      const q = randomTensor([2, 5, 8], 1), k = randomTensor([2, 7, 8], 2), v = randomTensor([2, 7, 4], 3), dOut = randomTensor([2, 5, 4], 4);
      const q2 = randomTensor([5, 8], 5), k2 = randomTensor([7, 8], 6), dScores = randomTensor([5, 7], 7);
      // Options the types reject, as a JavaScript caller (or a cast) can pass them.
      const typo = (options: Record<string, unknown>): never => options as never;
      // [entry point, the call with one misspelled option (every other argument valid), the typo, the name to suggest]
      const calls: [string, () => unknown, string, string][] = [
        ['scaledDotProductAttention', () => attn.scaledDotProductAttention(q, k, v, typo({ isCasual: true })), 'isCasual', 'isCausal'],
        ['explain', () => attn.explain(q, k, v, typo({ enableGQA: true })), 'enableGQA', 'enableGqa'],
        ['referenceAttention', () => attn.referenceAttention(q, k, v, typo({ attn_mask: null })), 'attn_mask', 'attnMask'],
        ['scaledDotProductAttentionBackward', () => attn.scaledDotProductAttentionBackward(q, k, v, dOut, typo({ isCausal: true, logSumExps: undefined })), 'logSumExps', 'logSumExp'],
        ['referenceAttentionBackward', () => attn.referenceAttentionBackward(q, k, v, dOut, typo({ returnAttnMaskGradient: true })), 'returnAttnMaskGradient', 'returnAttnMaskGrad'],
        ['softmax', () => attn.softmax(q, typo({ temprature: 2 })), 'temprature', 'temperature'],
        ['dropout', () => attn.dropout(q, typo({ p: 0.5, seed: 1, sead: 2 })), 'sead', 'seed'],
        ['randomUniform', () => attn.randomUniform([4], 1, typo({ hi: 2 })), 'hi', 'high'],
        ['attentionScores', () => attn.attentionScores(q2, k2, typo({ kind: 'scaled-dot', scal: 1 })), 'scal', 'scale'],
        ['attentionScoresBackward', () => attn.attentionScoresBackward(q2, k2, dScores, typo({ kind: 'dot', kinds: 'dot' })), 'kinds', 'kind'],
        ['createAttention', () => createAttention(typo({ backend: 'scalar', treads: 1 })), 'treads', 'threads'],
        ['createAttention options.gpuLimits', () => createAttention({ backend: 'scalar', gpuLimits: typo({ maxBufferSise: 1 }) }), 'maxBufferSise', 'maxBufferSize'],
      ];
      // The sync API throws on a 'webgpu' instance whatever its options.
      if (backend !== 'webgpu') {
        calls.push(['scaledDotProductAttentionSync', () => attn.scaledDotProductAttentionSync(q, k, v, typo({ retrunWeights: true })), 'retrunWeights', 'returnWeights']);
      }
      const before = attn.memoryStats().heapBytesInUse;
      for (const [where, call, wrong, suggested] of calls) {
        let error: unknown;
        try {
          await call();
        } catch (e) {
          error = e;
        }
        expect(error, where).toBeInstanceOf(TypeError);
        expect((error as Error).message, where).toContain(`unknown option '${wrong}' of ${where}; did you mean '${suggested}'? (known: `);
        expect(attn.memoryStats().heapBytesInUse, where).toBe(before);
      }
      await check(q, k, v, { isCausal: true }, 'after the misspelled options');
    });

    // Causal offsets at the kernels' tile edges, and rows hidden by a negative offset.
    describe(`hardening: causal offsets on the '${backend}' backend`, () => {
      it('offsets at tile−1, tile and tile+1 for tiles 4…256, both signs, alone and with a mask', async () => {
        for (const tile of TILES) {
          const [lq, lk] = [tile + 5, 2 * tile + 3];
          const q = randomTensor([lq, 8], tile), k = randomTensor([lk, 8], tile + 1), v = randomTensor([lk, 5], tile + 2);
          const mask = randomMasks([lq, lk], tile).additive;
          for (const offset of [tile - 1, tile, tile + 1, -(tile - 1), -tile, -(tile + 1)]) {
            await check(q, k, v, { isCausal: { offset }, returnWeights: lq * lk < 100_000 }, `tile ${tile} offset ${offset}`);
            if (tile <= 64) await check(q, k, v, { isCausal: { offset }, attnMask: mask }, `tile ${tile} offset ${offset} + mask`);
          }
        }
      });

      it('rows that see no key because of a negative offset are zeros; NaN past the limit is never read', async () => {
        const [lq, lk] = [70, 130];
        const q = randomTensor([2, lq, 8], 1), k = randomTensor([2, lk, 8], 2), v = randomTensor([2, lk, 3], 3);
        for (const offset of [-1, -33, -65, -lq, -lq - 5]) {
          const r = await attn.scaledDotProductAttention(q, k, v, { isCausal: { offset }, returnWeights: true });
          const blind = Math.min(lq, -offset); // rows 0 … −offset−1 see no key
          for (let b = 0; b < 2; b++) {
            expect(r.output.data.subarray(b * lq * 3, (b * lq + blind) * 3).every((x) => x === 0), `offset ${offset}`).toBe(true);
            expect(r.weights!.data.subarray(b * lq * lk, (b * lq + blind) * lk).every((x) => x === 0), `offset ${offset} weights`).toBe(true);
          }
          // Keys past the last row's limit hold NaN: nothing changes.
          const k2 = { data: k.data.slice(), shape: k.shape }, v2 = { data: v.data.slice(), shape: v.shape };
          for (let b = 0; b < 2; b++) for (let j = Math.max(0, lq + offset); j < lk; j++) {
            k2.data.fill(NaN, (b * lk + j) * 8, (b * lk + j + 1) * 8);
            v2.data.fill(NaN, (b * lk + j) * 3, (b * lk + j + 1) * 3);
          }
          const dirty = await attn.scaledDotProductAttention(q, k2, v2, { isCausal: { offset }, returnWeights: true });
          expect(dirty.output.data, `offset ${offset} with NaN past the limit`).toEqual(r.output.data);
          expect(dirty.weights!.data).toEqual(r.weights!.data);
          await check(q, k, v, { isCausal: { offset } }, `offset ${offset}`);
        }
      });
    });

    describe(`hardening: softcap on the '${backend}' backend`, () => {
      it('softcaps and scores near FLT_MAX: an overflowing score is capped to c, not NaN', async () => {
        const q = randomTensor([8, 16], 1, -1e3, 1e3), k = randomTensor([30, 16], 2, -1e3, 1e3), v = randomTensor([30, 4], 3);
        for (const softcap of [3.4e38, 1e38, 5]) {
          const r = await attn.scaledDotProductAttention(q, k, v, { softcap, returnWeights: true });
          expect(r.output.data.every(Number.isFinite), `softcap ${softcap}`).toBe(true);
          await check(q, k, v, { softcap, returnWeights: true }, `|q|,|k| ~ 1e3, softcap ${softcap}`);
        }
        // q·k·scale = +Inf in row 0: capped to c (without the softcap that row is NaN).
        const qInf = { data: new Float32Array([3e38, 1, 1, 1]), shape: [2, 2] };
        const kInf = { data: new Float32Array([3e38, 0, 0, 1]), shape: [2, 2] };
        const vInf = randomTensor([2, 2], 4);
        const capped = await attn.scaledDotProductAttention(qInf, kInf, vInf, { scale: 1, softcap: 3e38 });
        expect(capped.output.data.every(Number.isFinite)).toBe(true);
        await check(qInf, kInf, vInf, { scale: 1, softcap: 3e38 }, 'overflowing score, softcap 3e38');
        await check(qInf, kInf, vInf, { scale: 1, softcap: 2 }, 'overflowing score, softcap 2');
      });

      it('NaN in a visible logit makes its row NaN; NaN at a hidden key is never read', async () => {
        const q = randomTensor([4, 8], 5), k = randomTensor([9, 8], 6), v = randomTensor([9, 3], 7);
        q.data[2 * 8 + 5] = NaN; // query row 2
        const r = await attn.scaledDotProductAttention(q, k, v, { softcap: 5 });
        for (let i = 0; i < 4; i++) {
          const row = r.output.data.subarray(i * 3, i * 3 + 3);
          expect(row.every(i === 2 ? Number.isNaN : Number.isFinite), `row ${i}`).toBe(true);
        }
        const clean = await attn.scaledDotProductAttention(randomTensor([4, 8], 8), k, v, { softcap: 5, isCausal: { offset: 3 } });
        const k2 = { data: k.data.slice(), shape: k.shape };
        k2.data[8 * 8 + 1] = NaN; // key 8: past every row's limit
        const dirty = await attn.scaledDotProductAttention(randomTensor([4, 8], 8), k2, v, { softcap: 5, isCausal: { offset: 3 } });
        expect(dirty.output.data).toEqual(clean.output.data);
      });

      it('a subnormal softcap gives (nearly) equal scores, hence the mean of V, as the reference', async () => {
        const q = randomTensor([6, 8], 9), k = randomTensor([40, 8], 10), v = randomTensor([40, 3], 11);
        for (const softcap of [1e-40, 1.4e-45]) {
          const r = await attn.scaledDotProductAttention(q, k, v, { softcap });
          for (let c = 0; c < 3; c++) {
            let m = 0;
            for (let j = 0; j < 40; j++) m += v.data[j * 3 + c]! / 40;
            for (let i = 0; i < 6; i++) expect(r.output.data[i * 3 + c]).toBeCloseTo(m, 5);
          }
          await check(q, k, v, { softcap, returnWeights: true }, `softcap ${softcap}`);
        }
      });
    });

    // int8/int4 caches, in the heap or on the GPU.
    describe(`hardening: int8/int4 KV caches on the '${backend}' backend`, () => {
      const gqa = { enableGqa: true, isCausal: true } as const;
      it('int8/int4 caches: stale NaN/Inf rows (after a reset, in a partly filled tile of 4 keys, past a ragged sequence) are never read; NaN/Inf appended poison only the rows that see that key', async () => {
        for (const dtype of ['int8', 'int4'] as const) {
          const fresh = attn.createKvCache({ batch: 2, kvHeads: 2, maxLength: 300, headDim: 40, valueDim: 36, dtype });
          const cache = attn.createKvCache({ batch: 2, kvHeads: 2, maxLength: 300, headDim: 40, valueDim: 36, dtype });
          const k = randomTensor([2, 2, 70, 40], 3), v = randomTensor([2, 2, 70, 36], 4);
          const q = randomTensor([2, 4, 1, 40], 5);
          fresh.append(k, v, { lengths: [70, 65] });
          const want = (await attn.scaledDotProductAttention(q, fresh, gqa)).output.data;
          expect(want.every(Number.isFinite)).toBe(true);
          for (const poison of [Number.NaN, Infinity, -Infinity, 3e38]) {
            cache.reset();
            cache.append({ data: new Float32Array(2 * 2 * 300 * 40).fill(poison), shape: [2, 2, 300, 40] }, { data: new Float32Array(2 * 2 * 300 * 36).fill(poison), shape: [2, 2, 300, 36] });
            cache.reset();
            cache.append(k, v, { lengths: [70, 65] });  // sequence 1 ends inside a tile (65 = 16·4 + 1)
            expect((await attn.scaledDotProductAttention(q, cache, gqa)).output.data, `${dtype} poison ${poison}`).toEqual(want);
          }
          // A NaN key appended at position 70 of sequence 0: its rows turn NaN, sequence 1's do not.
          const nanKey = randomTensor([2, 2, 1, 40], 6), nanValue = randomTensor([2, 2, 1, 36], 7);
          nanKey.data[3] = Number.NaN;  // batch 0, KV head 0
          cache.append(nanKey, nanValue, { lengths: [1, 0] });
          const got = (await attn.scaledDotProductAttention(q, cache, gqa)).output.data;
          const rowNaN = (row: number) => got.subarray(row * 36, (row + 1) * 36).every(Number.isNaN);
          expect([0, 1, 2, 3, 4, 5, 6, 7].map(rowNaN), dtype).toEqual([true, true, false, false, false, false, false, false]);
          fresh.dispose();
          cache.dispose();
        }
      });
    });

    // The KV cache on the CPU backends, whose keys and values live in the wasm heap (its own suite,
    // kv-cache-suite.ts, covers the reference at every step, overflow, use after dispose, and the heap
    // over 32 steps with `out`, 10,000 append/reset cycles and create/dispose).
    if (backend !== 'webgpu') {
      describe(`hardening: the KV cache on the '${backend}' backend`, () => {
        const gqa = { enableGqa: true, isCausal: true } as const;
        /** `n` rows of [1, 2, n, 8] keys and values, every element `fill` when given. */
        const rows = (n: number, seed: number, fill?: number) => {
          const key = randomTensor([1, 2, n, 8], seed), value = randomTensor([1, 2, n, 5], seed + 1);
          if (fill !== undefined) {
            key.data.fill(fill);
            value.data.fill(fill);
          }
          return { key, value };
        };

        it('stale NaN/Inf rows past the held tokens (after a reset, past a ragged sequence) are never read', async () => {
          const cache = attn.createKvCache({ batch: 2, kvHeads: 2, maxLength: 300, headDim: 8, valueDim: 5 });
          for (const poison of [Number.NaN, Infinity, -Infinity, 3e38]) {
            cache.reset();
            const bad = { key: randomTensor([2, 2, 300, 8], 1).data.fill(poison), value: randomTensor([2, 2, 300, 5], 2).data.fill(poison) };
            cache.append({ data: bad.key, shape: [2, 2, 300, 8] }, { data: bad.value, shape: [2, 2, 300, 5] });
            cache.reset();
            const k = randomTensor([2, 2, 70, 8], 3), v = randomTensor([2, 2, 70, 5], 4);
            cache.append(k, v, { lengths: [70, 65] });
            const q = randomTensor([2, 4, 1, 8], 5);
            const got = await attn.scaledDotProductAttention(q, cache, gqa);
            expect(got.output.data.every(Number.isFinite), `poison ${poison}`).toBe(true);
            // The same call on the held tokens as tensors (sequence 1's last 5 rows hidden by its length), against the oracle.
            const dense = { ...gqa, isCausal: 'bottom-right', keyLengths: new Int32Array([70, 65]) } as const;
            expect(got.output.data).toEqual((await run(q, k, v, dense)).output.data);
            await check(q, k, v, dense, `poison ${poison}`);
          }
          cache.dispose();
        });

        it('1,000 failing appends and calls write nothing, allocate nothing and leave the cache as it was', async () => {
          const cache = attn.createKvCache({ batch: 1, kvHeads: 2, maxLength: 40, headDim: 8, valueDim: 5 });
          const { key, value } = rows(37, 10);
          cache.append(key, value);
          const q = randomTensor([1, 4, 1, 8], 12);
          const before = (await attn.scaledDotProductAttention(q, cache, gqa)).output.data;
          const heap = attn.memoryStats().heapBytesInUse;
          const tooMany = rows(4, 13), wrongDim = { key: randomTensor([1, 2, 1, 7], 15), value: randomTensor([1, 2, 1, 5], 16) };
          for (let i = 0; i < 1000; i++) {
            expect(() => cache.append(tooMany.key, tooMany.value)).toThrow(RangeError);
            expect(() => cache.append(wrongDim.key, wrongDim.value)).toThrow(RangeError);
            await expect(attn.scaledDotProductAttention(q, cache, { isCausal: true })).rejects.toThrow(/enableGqa/);
            await expect(attn.scaledDotProductAttention(q, cache, { ...gqa, keyLengths: new Int32Array([38]) })).rejects.toThrow(RangeError);
            await expect(attn.scaledDotProductAttention(q, cache, { enableGqa: true, isCasual: true } as AttentionOptions)).rejects.toThrow(TypeError);
          }
          expect(attn.memoryStats().heapBytesInUse).toBe(heap);
          expect(cache.length).toBe(37);
          expect((await attn.scaledDotProductAttention(q, cache, gqa)).output.data).toEqual(before);
          cache.dispose();
        });

        it('a cache stays right across wasm memory growth', async () => {
          const cache = attn.createKvCache({ batch: 1, kvHeads: 2, maxLength: 64, headDim: 8, valueDim: 5 });
          const first = rows(20, 20), later = rows(30, 22);
          cache.append(first.key, first.value);
          const q = randomTensor([1, 4, 3, 8], 24);
          const before = (await attn.scaledDotProductAttention(q, cache, gqa)).output.data.slice();
          const memory = attn.memoryStats().memoryBytes;
          // Weights of 2048 × 2048 (16 MiB) grow the heap; the cache's rows must still be there.
          const big = randomTensor([2048, 4], 26);
          await run(big, big, big, { returnWeights: true });
          expect(attn.memoryStats().memoryBytes).toBeGreaterThanOrEqual(memory);
          expect((await attn.scaledDotProductAttention(q, cache, gqa)).output.data).toEqual(before);
          cache.append(later.key, later.value);
          const cat = (a: Tensor, b: Tensor, e: number): Tensor => {
            const data = new Float32Array(a.data.length + b.data.length);
            for (let h = 0; h < 2; h++) {
              data.set(a.data.subarray(h * 20 * e, (h + 1) * 20 * e), h * 50 * e);
              data.set(b.data.subarray(h * 30 * e, (h + 1) * 30 * e), (h * 50 + 20) * e);
            }
            return { data, shape: [1, 2, 50, e] };
          };
          const got = await attn.scaledDotProductAttention(q, cache, gqa);
          const k = cat(first.key, later.key, 8), v = cat(first.value, later.value, 5);
          expect(got.output.data).toEqual((await attn.scaledDotProductAttention(q, k, v, { ...gqa, isCausal: 'bottom-right' })).output.data);
          await check(q, k, v, { ...gqa, isCausal: 'bottom-right' }, 'after growth');
          cache.dispose();
        });

        it('a 32-step decode loop allocates nothing per step: results returned as new arrays, weights on every other step', async () => {
          const cache = attn.createKvCache({ batch: 1, kvHeads: 2, maxLength: 200, headDim: 8, valueDim: 5 });
          const prompt = rows(60, 30);
          cache.append(prompt.key, prompt.value);
          await attn.scaledDotProductAttention(randomTensor([1, 4, 60, 8], 32), cache, gqa);
          const step = rows(1, 33), q = randomTensor([1, 4, 1, 8], 35);
          const heap: number[] = [];
          for (let i = 0; i < 32; i++) {
            cache.append(step.key, step.value);
            const r = await attn.scaledDotProductAttention(q, cache, { ...gqa, returnWeights: i % 2 === 1 });
            expect(r.output.shape).toEqual([1, 4, 1, 5]);
            if (i % 2) expect(r.weights!.shape).toEqual([1, 4, 1, 61 + i]);
            heap.push(attn.memoryStats().heapBytesInUse);
          }
          expect(new Set(heap).size, `heap bytes per step: ${heap.join(', ')}`).toBe(1);
          cache.dispose();
        });

        it('a cache outlives its disposed Attention: calls through it throw, dispose still frees it', async () => {
          const owner = await make();
          const probe = await make();
          const baseline = probe.memoryStats().heapBytesInUse;
          const cache = owner.createKvCache({ batch: 1, kvHeads: 2, maxLength: 16, headDim: 8, valueDim: 5 });
          const { key, value } = rows(3, 40);
          cache.append(key, value);
          owner.dispose();
          const q = randomTensor([1, 4, 1, 8], 42);
          await expect(owner.scaledDotProductAttention(q, cache, gqa)).rejects.toThrow(/this Attention instance was disposed/);
          expect(() => owner.scaledDotProductAttentionSync(q, cache, gqa)).toThrow(/this Attention instance was disposed/);
          expect(() => owner.createKvCache({ batch: 1, kvHeads: 1, maxLength: 4, headDim: 4 })).toThrow(/this Attention instance was disposed/);
          // Another instance of the same build reads it.
          await check(q, key, value, { ...gqa, isCausal: 'bottom-right' }, 'cache of a disposed instance');
          const got = await probe.scaledDotProductAttention(q, cache, gqa);
          expect(got.output.data).toEqual((await probe.scaledDotProductAttention(q, key, value, { ...gqa, isCausal: 'bottom-right' })).output.data);
          cache.dispose();
          expect(probe.memoryStats().heapBytesInUse).toBe(baseline);
          probe.dispose();
        });
      });
    }

    // The variants at the kernels' tile edges, and their hidden keys.
    describe(`hardening: variants on the '${backend}' backend`, () => {
      it('windows and key lengths at tile−1, tile and tile+1 for tiles 4…256; documents of those lengths', async () => {
        for (const tile of TILES) {
          const [lq, lk] = [tile + 5, 2 * tile + 3];
          const q = randomTensor([2, lq, 8], tile), k = randomTensor([2, lk, 8], tile + 1), v = randomTensor([2, lk, 5], tile + 2);
          for (const n of [tile - 1, tile, tile + 1]) {
            await check(q, k, v, { window: { left: n }, isCausal: true, returnWeights: lq * lk < 100_000 }, `tile ${tile} window ${n}`);
            await check(q, k, v, { window: { left: n, right: n } }, `tile ${tile} window ±${n}`);
            await check(q, k, v, { keyLengths: new Int32Array([n, lk - n]), isCausal: 'bottom-right' }, `tile ${tile} keyLengths ${n}`);
            const ids = (L: number) => ({ data: new Int32Array(2 * L).map((_, x) => Math.floor((x % L) / n)), shape: [2, L] });
            await check(q, k, v, { queryDocuments: ids(lq), keyDocuments: ids(lk), isCausal: true }, `tile ${tile} documents of ${n}`);
          }
        }
      });

      it('a window wider than any offset reaches, key lengths of 0, sinks with nothing visible: zeros, never NaN', async () => {
        const q = randomTensor([2, 2, 33, 8], 1), k = randomTensor([2, 2, 70, 8], 2), v = randomTensor([2, 2, 70, 3], 3);
        const sinks = new Float32Array([0, 1e4]);
        for (const options of [
          { window: { left: 2 ** 53, right: 2 ** 53 }, isCausal: { offset: -(2 ** 53) } },
          { keyLengths: new Int32Array([0, 0]), sinks },
          { isCausal: { offset: -40 }, sinks, returnWeights: true },
        ] as AttentionOptions[]) {
          const r = await run(q, k, v, options);
          expect(r.output.data.every((x) => x === 0), JSON.stringify(Object.keys(options))).toBe(true);
          if (r.weights) expect(r.weights.data.every((x) => x === 0)).toBe(true);
        }
        await check(q, k, v, { window: { left: 2 ** 53 }, isCausal: { offset: 2 ** 53 } }, 'offsets and windows of 2^53');
      });

      it('sinks and ALiBi slopes near the float32 limits stay finite and as the reference', async () => {
        const q = randomTensor([1, 2, 20, 8], 4), k = randomTensor([1, 2, 90, 8], 5), v = randomTensor([1, 2, 90, 3], 6);
        await check(q, k, v, { sinks: new Float32Array([3e38, -3e38]) }, 'sinks ±3e38');
        await check(q, k, v, { alibiSlopes: new Float32Array([1e30, -1e30]), isCausal: true }, 'slopes ±1e30');
        await check(q, k, v, { alibiSlopes: new Float32Array([1e-30, 0]), window: { left: 5 } }, 'tiny slopes');
      });
    });
    // The checklist's items again with float16 query/key/value and caches (float16 rule,
    // support/float16-suite.ts): the decode kernel reads a finite float16 cache in place and every
    // other path widens, so hidden and visible non-finite halves are checked on both.
    describe(`hardening: float16 on the '${backend}' backend`, () => {
      const checkHalf = async (q: Float16Tensor, k: Float16Tensor, v: Float16Tensor, options: AttentionOptions, what: string) => {
        const { output } = await attn.scaledDotProductAttention(q, k, v, options);
        expectFloat16ResultOf(oracle, factor, output as Float16Tensor, widen(q), widen(k), widen(v), options, [q, k, v], what);
      };
      const bits = (t: { data: ArrayBufferView }) => Array.from(t.data as Uint16Array);
      const NAN = 0x7e00, INF = 0x7c00, NEG_INF = 0xfc00, MAX = 0x7bff;

      it('every length at tile−1, tile and tile+1 for tiles 4…256, causal and not', async () => {
        for (const tile of TILES) {
          for (const n of [tile - 1, tile, tile + 1]) {
            const q = randomHalf([1, 2, n, 24], tile).half, k = randomHalf([1, 2, n + 3, 24], tile + 1).half, v = randomHalf([1, 2, n + 3, 9], tile + 2).half;
            await checkHalf(q, k, v, { isCausal: n % 2 === 0 ? true : 'bottom-right' }, `tile ${tile} length ${n}`);
          }
        }
      });

      it('hidden keys holding NaN, ±Inf or 65504 halves change nothing (masks, causality, key lengths, a cache past its tokens)', async () => {
        const q = randomHalf([2, 4, 1, 32], 1).half, k = randomHalf([2, 2, 70, 32], 2).half, v = randomHalf([2, 2, 70, 16], 3).half;
        const hiddenByMask = (j: number) => j % 7 === 3;
        const mask = new Uint8Array(70).map((_, j) => (hiddenByMask(j) ? 0 : 1));
        const lengths = new Int32Array([70, 41]);
        const cases: [AttentionOptions, (b: number, j: number) => boolean][] = [
          [{ enableGqa: true, attnMask: { data: mask, shape: [70] } }, (_, j) => hiddenByMask(j)],
          [{ enableGqa: true, keyLengths: lengths, isCausal: 'bottom-right' }, (b, j) => j >= lengths[b]!],
          [{ enableGqa: true, window: { left: 20 }, isCausal: 'bottom-right' }, (_, j) => j < 49],
        ];
        for (const [options, hidden] of cases) {
          const clean = await attn.scaledDotProductAttention(q, k, v, options);
          for (const garbage of [NAN, INF, NEG_INF, MAX]) {
            const k2 = { ...k, data: (k.data as Uint16Array).slice() }, v2 = { ...v, data: (v.data as Uint16Array).slice() };
            for (let b = 0; b < 2; b++) for (let h = 0; h < 2; h++) for (let j = 0; j < 70; j++) {
              if (!hidden(b, j)) continue;
              k2.data.fill(garbage, ((b * 2 + h) * 70 + j) * 32, ((b * 2 + h) * 70 + j + 1) * 32);
              v2.data.fill(garbage, ((b * 2 + h) * 70 + j) * 16, ((b * 2 + h) * 70 + j + 1) * 16);
            }
            const dirty = await attn.scaledDotProductAttention(q, k2, v2, options);
            expect(bits(dirty.output), `${Object.keys(options).join('+')} hiding ${garbage.toString(16)}`).toEqual(bits(clean.output));
          }
        }
        // A float16 cache: NaN rows appended then reset, and a ragged batch's rows past its length.
        const cache = attn.createKvCache({ batch: 2, kvHeads: 2, maxLength: 80, headDim: 32, valueDim: 16, dtype: 'float16' });
        const full = (fill: number, n: number, dim: number): Float16Tensor => ({ data: new Uint16Array(4 * n * dim).fill(fill), shape: [2, 2, n, dim], dtype: 'float16' });
        cache.append(full(NAN, 80, 32), full(INF, 80, 16));
        cache.reset();
        cache.append(k, v, { lengths });
        const onCache = await attn.scaledDotProductAttention(q, cache, { enableGqa: true, isCausal: true });
        const ragged: AttentionOptions = { enableGqa: true, keyLengths: lengths, isCausal: 'bottom-right' };
        expectFloat16ResultOf(oracle, factor, onCache.output as Float16Tensor, widen(q), widen(k), widen(v), ragged, [q, k, v], 'a cache past its reset and ragged lengths');
        cache.dispose();
      });

      it('a NaN half in a visible query, key or value makes exactly the affected rows (or column) NaN', async () => {
        const q = randomHalf([1, 4, 3, 16], 4).half, k = randomHalf([1, 2, 90, 16], 5).half, v = randomHalf([1, 2, 90, 8], 6).half;
        const options: AttentionOptions = { enableGqa: true };
        const nanAt = (t: Float16Tensor, i: number): Float16Tensor => {
          const data = (t.data as Uint16Array).slice();
          data[i] = NAN;
          return { ...t, data };
        };
        const rows = (out: { data: ArrayBufferView }) => {
          const values = fromFloat16(out.data as Uint16Array);
          return Array.from({ length: 12 }, (_, r) => Array.from(values.subarray(r * 8, r * 8 + 8)));
        };
        // Query head 1, row 2 (row 5 of 12): that row only.
        const byQuery = rows((await attn.scaledDotProductAttention(nanAt(q, (1 * 3 + 2) * 16 + 7), k, v, options)).output);
        byQuery.forEach((row, r) => expect(row.every(r === 5 ? Number.isNaN : Number.isFinite), `query NaN, row ${r}`).toBe(true));
        // Key 40 of KV head 0: every row of query heads 0 and 1 (rows 0..5).
        const byKey = rows((await attn.scaledDotProductAttention(q, nanAt(k, 40 * 16 + 3), v, options)).output);
        byKey.forEach((row, r) => expect(row.every(r < 6 ? Number.isNaN : Number.isFinite), `key NaN, row ${r}`).toBe(true));
        // Value 40 of KV head 1, column 2: column 2 of query heads 2 and 3 (rows 6..11).
        const byValue = rows((await attn.scaledDotProductAttention(q, k, nanAt(v, (90 + 40) * 8 + 2), options)).output);
        byValue.forEach((row, r) => row.forEach((x, c) => expect(r >= 6 && c === 2 ? Number.isNaN(x) : Number.isFinite(x), `value NaN, row ${r} column ${c}`).toBe(true)));
      });

      it('rows that see nothing are +0 halves; zero sizes give empty float16 outputs; E = 0 is a RangeError', async () => {
        const q = randomHalf([6, 8], 7).half, k = randomHalf([10, 8], 8).half, v = randomHalf([10, 3], 9).half;
        const rowMask = new Uint8Array(60).fill(1).fill(0, 20, 30); // row 2 sees nothing
        const hidden = await attn.scaledDotProductAttention(q, k, v, { attnMask: { data: rowMask, shape: [6, 10] } });
        expect(bits(hidden.output).slice(6, 9)).toEqual([0, 0, 0]);
        const noKeys = await attn.scaledDotProductAttention(randomHalf([2, 3, 4], 1).half, randomHalf([2, 0, 4], 2).half, randomHalf([2, 0, 6], 3).half);
        expect(noKeys.output.dtype).toBe('float16');
        expect(bits(noKeys.output)).toEqual(new Array(36).fill(0));
        const empty = await attn.scaledDotProductAttention(randomHalf([0, 2, 3, 4], 1).half, randomHalf([0, 2, 5, 4], 2).half, randomHalf([0, 2, 5, 6], 3).half);
        expect(empty.output.data).toBeInstanceOf(Uint16Array);
        expect([empty.output.data.length, ...empty.output.shape]).toEqual([0, 0, 2, 3, 6]);
        await expect(attn.scaledDotProductAttention(randomHalf([3, 0], 1).half, randomHalf([4, 0], 2).half, randomHalf([4, 2], 3).half)).rejects.toThrow(RangeError);
      });

      it('subnormal halves give no NaN and stay within the float16 rule', async () => {
        // 2^-24 … 2^-14: every float16 subnormal, as query, key and value entries.
        const subnormal = (shape: number[], seed: number): Float16Tensor => {
          const t = randomHalf(shape, seed).half;
          (t.data as Uint16Array).forEach((h, i, a) => (a[i] = (h & 0x8000) | (h & 0x3ff)));
          return t;
        };
        const q = subnormal([2, 9, 16], 10), k = subnormal([2, 200, 16], 11), v = subnormal([2, 200, 5], 12);
        const { output } = await attn.scaledDotProductAttention(q, k, v);
        expect(Array.from(fromFloat16(output.data as Uint16Array)).every(Number.isFinite)).toBe(true);
        await checkHalf(q, k, v, {}, 'subnormal');
        await checkHalf(randomHalf([2, 1, 16], 13).half, randomHalf([2, 300, 16], 14).half, subnormal([2, 300, 5], 15), {}, 'subnormal values, one query row');
      });

      it('250 repeats are bitwise identical, and 32 float16 calls in flight each match the reference', async () => {
        const q = randomHalf([2, 3, 45, 24], 20).half, k = randomHalf([2, 3, 77, 24], 21).half, v = randomHalf([2, 3, 77, 16], 22).half;
        const first = bits((await attn.scaledDotProductAttention(q, k, v, { isCausal: 'bottom-right' })).output);
        let identical = 0;
        for (let i = 0; i < 250; i++) {
          const again = await attn.scaledDotProductAttention(q, k, v, { isCausal: 'bottom-right' });
          if (bits(again.output).every((h, x) => h === first[x])) identical++;
        }
        expect(identical).toBe(250);
        const jobs = Array.from({ length: 32 }, (_, i) => {
          const lq = 1 + ((i * 7) % 40), lk = 1 + ((i * 13) % 90), e = 1 + (i % 9) * 4, ev = 1 + (i % 5) * 3;
          const [qi, ki, vi] = [randomHalf([1 + (i % 2), lq, e], 3 * i).half, randomHalf([1 + (i % 2), lk, e], 3 * i + 1).half, randomHalf([1 + (i % 2), lk, ev], 3 * i + 2).half];
          const options: AttentionOptions = { isCausal: [false, true, 'bottom-right'][i % 3] as AttentionOptions['isCausal'] };
          return { qi, ki, vi, options, pending: attn.scaledDotProductAttention(qi, ki, vi, options) };
        });
        const results = await Promise.all(jobs.map((j) => j.pending));
        for (const [i, { qi, ki, vi, options }] of jobs.entries()) {
          expectFloat16ResultOf(oracle, factor, results[i]!.output as Float16Tensor, widen(qi), widen(ki), widen(vi), options, [qi, ki, vi], `job ${i}`);
        }
      });

      it('a float16 cache stays right across wasm memory growth', async () => {
        const cache = attn.createKvCache({ batch: 1, kvHeads: 2, maxLength: 64, headDim: 16, dtype: 'float16' });
        const q = randomHalf([1, 4, 1, 16], 30).half, options: AttentionOptions = { enableGqa: true, isCausal: 'bottom-right' };
        const keys: Float32Array[] = [], values: Float32Array[] = [];
        const append = (n: number, seed: number) => {
          const k = randomHalf([1, 2, n, 16], seed), v = randomHalf([1, 2, n, 16], seed + 1);
          cache.append(k.half, v.half);
          keys.push(k.float.data);
          values.push(v.float.data);
        };
        const checkCache = async (what: string) => {
          const { output } = await attn.scaledDotProductAttention(q, cache, options);
          expectFloat16ResultOf(oracle, factor, output as Float16Tensor, widen(q), concatLengths(keys, 1, 2, 16), concatLengths(values, 1, 2, 16), options, undefined, what);
        };
        append(40, 31);
        await checkCache('before growth');
        // Weights of 2048 × 2048 (16 MiB) force the heap to grow.
        const big = randomTensor([2048, 4], 33);
        await attn.scaledDotProductAttention(big, big, big, { returnWeights: true });
        await checkCache('after growth');
        append(1, 34);
        await checkCache('appended after growth');
        cache.dispose();
      });
    });
  });
}
