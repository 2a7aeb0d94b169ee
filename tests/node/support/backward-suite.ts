// The backward pass's shared body, run on every backend (tests/node/gradients.test.ts: the CPU
// backends; gradients-webgpu.test.ts: 'webgpu' on SwiftShader): against the float64 analytic
// gradient (attn.referenceAttentionBackward) with the rule of tests/cpp/attention_backward_test.cpp:
//   max|g − g64| ≤ f·e_ref + 1e-5·max(1, max|g64|),  e_ref = error of the float32 scalar backward
// (f = 2 on the CPU backends, 4 on WebGPU as for its forward), with and without the forward's
// output and log-sum-exp; hidden keys, rows that see nothing, values near FLT_MAX, errors, zero
// sizes and the forward's log-sum-exp.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttention, type Attention, type AttentionGradients, type AttentionGradients64, type BackwardOptions, type Tensor } from 'sdpa-web';
import { randomMasks, randomTensor } from './tensors.js';
import { maxAbsDiff } from './tolerance.js';

export const GRADS = ['dQuery', 'dKey', 'dValue'] as const;

export function maxAbs(x: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < x.length; i++) if (Number.isFinite(x[i]!)) m = Math.max(m, Math.abs(x[i]!));
  return m;
}

/**
 * Each gradient of `got` (and dAttnMask, dSinks where `options` asks for them) against the
 * float64 gradient `ref`: max|g − g64| ≤ factor·e_ref + 1e-5·max(1, max|g64|), e_ref the error of
 * the float32 scalar backward `plain`.
 */
export function expectGradientsMatch(got: AttentionGradients, ref: AttentionGradients64, plain: AttentionGradients,
                                     options: BackwardOptions, factor: number, label: string): void {
  const names = [...GRADS, ...(options.returnAttnMaskGrad ? ['dAttnMask' as const] : []), ...(options.sinks ? ['dSinks' as const] : [])];
  for (const name of names) {
    expect(got[name]!.shape, `${label} ${name} shape`).toEqual(ref[name]!.shape);
    const eRef = maxAbsDiff(plain[name]!.data, ref[name]!.data);
    expect(eRef, `${label} ${name}: the float32 scalar backward's error`).toBeLessThan(Infinity);
    const bound = factor * eRef + 1e-5 * Math.max(1, maxAbs(ref[name]!.data));
    const err = maxAbsDiff(got[name]!.data, ref[name]!.data);
    expect(err, `${label} ${name} error ${err} > ${bound} (e_ref ${eRef})`).toBeLessThanOrEqual(bound);
  }
}

export interface BackwardSuiteConfig {
  label: string;
  create: () => Promise<Attention>;
  /** f of the tolerance rule. */
  factor: number;
  /**
   * The scale of the upstream gradient against values near FLT_MAX: 1e-38 (mostly subnormal) on
   * the CPU backends; WGSL lets a GPU flush subnormal floats to zero, so WebGPU takes 1e-30.
   */
  tinyUpstream?: number;
}

export function defineBackwardSuite({ label, create, factor, tinyUpstream = 1e-38 }: BackwardSuiteConfig): void {
  describe(`backward on ${label}`, () => {
    let attn: Attention;
    let oracle: Attention;
    beforeAll(async () => {
      attn = await create();
      oracle = await createAttention({ backend: 'scalar' });
    });
    afterAll(() => {
      attn.dispose();
      oracle.dispose();
    });

    // editDOut changes the upstream gradient after its scaling (a NaN row, say). maxAbsDiff is
    // Infinity unless NaN sits exactly where the float64 gradient has NaN.
    const check = async (q: Tensor, k: Tensor, v: Tensor, options: BackwardOptions, label: string, seed = 7, dOutScale = 1,
                         editDOut?: (dOut: Tensor) => void) => {
      // The forward's options: returnAttnMaskGrad is the backward's own (an unknown option of the forward).
      const { returnAttnMaskGrad: _backwardOnly, ...forwardOptions } = options;
      const { output } = oracle.scaledDotProductAttentionSync(q, k, v, forwardOptions);
      const dOut = randomTensor([...output.shape], seed);
      dOut.data.forEach((x, i) => (dOut.data[i] = x * dOutScale));
      editDOut?.(dOut);
      const ref = oracle.referenceAttentionBackward(q, k, v, dOut, options);
      const plain = oracle.scaledDotProductAttentionBackwardSync(q, k, v, dOut, options);
      const fwd = await attn.scaledDotProductAttention(q, k, v, { ...forwardOptions, returnLogSumExp: true });
      for (const passForward of [false, true]) {
        const got = await attn.scaledDotProductAttentionBackward(q, k, v, dOut, passForward ? { ...options, output: fwd.output, logSumExp: fwd.logSumExp } : options);
        expectGradientsMatch(got, ref, plain, options, factor, `${label}${passForward ? ' with lse' : ''}`);
      }
    };

    it('matches the float64 gradient over lengths and head dims', async () => {
      let c = 0;
      for (const lq of [1, 3, 31, 33, 70]) {
        for (const lk of [1, 17, 32, 65, 130]) {
          const [e, ev] = ([[8, 8], [15, 4], [64, 33], [1, 16]] as const)[c % 4]!;
          const lead = c % 2 ? [2, 3] : [2];
          const q = randomTensor([...lead, lq, e], 3 * c, -2, 2);
          const k = randomTensor([...lead, lk, e], 3 * c + 1, -2, 2);
          const v = randomTensor([...lead, lk, ev], 3 * c + 2);
          await check(q, k, v, {}, `Lq=${lq} Lk=${lk} E=${e} Ev=${ev}`);
          c++;
        }
      }
    });

    it('every option: scale, causal both alignments, GQA, bool and additive masks (with dAttnMask)', async () => {
      const q = randomTensor([2, 4, 37, 16], 1);
      const k = randomTensor([2, 2, 53, 16], 2);
      const v = randomTensor([2, 2, 53, 8], 3);
      await check(q, k, v, { enableGqa: true, scale: 0.7 }, 'gqa + scale');
      for (const isCausal of ['top-left', 'bottom-right'] as const) {
        await check(q, k, v, { enableGqa: true, isCausal }, `gqa + ${isCausal}`);
        const qq = randomTensor([2, 70, 16], 4);
        await check(qq, randomTensor([2, 45, 16], 5), randomTensor([2, 45, 8], 6), { isCausal }, `${isCausal} Lq > Lk`);
      }
      for (const shape of [[2, 4, 37, 53], [37, 53], [2, 1, 1, 53], [1, 4, 37, 1]]) {
        const { bool, additive } = randomMasks(shape, 11);
        await check(q, k, v, { enableGqa: true, attnMask: bool }, `bool mask [${shape}]`);
        await check(q, k, v, { enableGqa: true, attnMask: additive, returnAttnMaskGrad: true }, `additive mask [${shape}]`);
      }
    });

    it('causal offsets around the tiles, alone and composed with bool and additive masks (with dAttnMask)', async () => {
      for (const [lq, lk] of [[70, 130], [130, 70]]) {
        const q = randomTensor([2, lq, 16], lq), k = randomTensor([2, lk, 16], lk + 1), v = randomTensor([2, lk, 8], lk + 2);
        const { bool, additive } = randomMasks([2, lq, lk], lq + lk);
        for (const offset of [-lq - 1, -33, -3, 0, 31, 64, lk - lq, lk + 2]) {
          const isCausal = { offset };
          await check(q, k, v, { isCausal }, `offset ${offset} ${lq}x${lk}`);
          await check(q, k, v, { isCausal, attnMask: bool }, `offset ${offset} + bool mask ${lq}x${lk}`);
          await check(q, k, v, { isCausal, attnMask: additive, returnAttnMaskGrad: true }, `offset ${offset} + additive mask ${lq}x${lk}`);
        }
        await check(q, k, v, { isCausal: true, attnMask: additive, returnAttnMaskGrad: true }, `top-left + additive mask ${lq}x${lk}`);
      }
      const dOut = randomTensor([2, 70, 8], 9);
      await expect(attn.scaledDotProductAttentionBackward(randomTensor([2, 70, 16], 1), randomTensor([2, 130, 16], 2), randomTensor([2, 130, 8], 3), dOut, { isCausal: { offset: 1.5 } })).rejects.toThrow(/isCausal\.offset/);
    });

    it('softcap 0.5, 5 and 50 around the tiles, alone, with masks (dAttnMask) and causal offsets', async () => {
      for (const [lq, lk] of [[33, 65], [70, 130]]) {
        const q = randomTensor([2, lq, 16], lq + 7, -3, 3), k = randomTensor([2, lk, 16], lk + 8, -3, 3), v = randomTensor([2, lk, 8], lk + 9);
        const { bool, additive } = randomMasks([2, lq, lk], lq + lk + 3);
        for (const softcap of [0.5, 5, 50]) {
          const label = `softcap ${softcap} ${lq}x${lk}`;
          await check(q, k, v, { softcap }, label);
          await check(q, k, v, { softcap, attnMask: bool, isCausal: { offset: 31 } }, `${label} + bool mask + offset 31`);
          await check(q, k, v, { softcap, attnMask: additive, returnAttnMaskGrad: true }, `${label} + additive mask`);
          await check(q, k, v, { softcap, isCausal: { offset: -3 } }, `${label} + offset -3`);
        }
      }
      const dOut = randomTensor([3, 2], 9);
      for (const softcap of [-1, NaN, Infinity]) {
        await expect(attn.scaledDotProductAttentionBackward(randomTensor([3, 4], 1), randomTensor([5, 4], 2), randomTensor([5, 2], 3), dOut, { softcap })).rejects.toThrow(RangeError);
      }
      await expect(attn.scaledDotProductAttentionBackward(randomTensor([3, 4], 1), randomTensor([5, 4], 2), randomTensor([5, 2], 3), dOut, { softcap: '2' as never })).rejects.toThrow(/softcap/);
    });

    it('the variants: windows, key lengths, ALiBi, sinks (with dSinks) and documents around the tiles, alone and together', async () => {
      for (const [lq, lk] of [[33, 65], [70, 130]]) {
        const q = randomTensor([1, 2, lq, 16], lq + 17, -2, 2), k = randomTensor([1, 2, lk, 16], lk + 18, -2, 2), v = randomTensor([1, 2, lk, 8], lk + 19);
        const ids = (L: number, n: number) => ({ data: new Int32Array(L).map((_, x) => Math.floor(x / n)), shape: [1, L] });
        const sinks = new Float32Array([0.5, -1]);
        const cases: [string, BackwardOptions][] = [
          ['window left 31', { window: { left: 31 }, isCausal: true }],
          ['window ±1', { window: { left: 1, right: 1 } }],
          ['keyLengths', { keyLengths: new Int32Array([lk - 40]), isCausal: 'bottom-right' }],
          ['ALiBi', { alibi: true, isCausal: true }],
          ['sinks', { sinks }],
          ['sinks, rows that see nothing', { sinks, isCausal: { offset: -5 } }],
          ['documents', { queryDocuments: ids(lq, 20), keyDocuments: ids(lk, 40), isCausal: 'bottom-right' }],
          ['all', { softcap: 5, window: { left: 40 }, alibi: true, sinks, keyLengths: new Int32Array([lk - 3]), queryDocuments: ids(lq, 30), keyDocuments: ids(lk, 50), isCausal: 'bottom-right' }],
        ];
        for (const [name, options] of cases) await check(q, k, v, options, `${name} ${lq}x${lk}`);
      }
    });

    it(`values near FLT_MAX (the forward output near FLT_MAX, an upstream gradient of ${tinyUpstream}) stay finite and within the rule`, async () => {
      const q = randomTensor([2, 70, 16], 30, -3, 3);
      const k = randomTensor([2, 70, 16], 31, -3, 3);
      const v = randomTensor([2, 70, 8], 32);
      v.data.forEach((x, i) => (v.data[i] = (x < 0 ? -3.3e38 : 3.3e38) * (0.9 + 0.1 * Math.abs(x))));
      await check(q, k, v, {}, 'V near FLT_MAX', 33, tinyUpstream);
      await check(q, k, v, { isCausal: true }, 'V near FLT_MAX, causal', 34, tinyUpstream);
      const dOut = randomTensor([2, 70, 8], 35);
      dOut.data.forEach((x, i) => (dOut.data[i] = x * tinyUpstream));
      const g = await attn.scaledDotProductAttentionBackward(q, k, v, dOut);
      for (const name of GRADS) for (const x of g[name].data) expect(Number.isFinite(x), name).toBe(true);
    });

    it('rows that see no key get zero gradients; hidden NaN/Inf never leaks', async () => {
      const q = randomTensor([6, 8], 20);
      const k = randomTensor([40, 8], 21);
      const v = randomTensor([40, 4], 22);
      const mask = { data: new Uint8Array(6 * 40).fill(1), shape: [6, 40] };
      mask.data.fill(0, 2 * 40, 3 * 40); // row 2 sees nothing
      for (let i = 0; i < 6; i++) mask.data[i * 40 + 9] = 0; // key 9 hidden everywhere
      k.data[9 * 8] = NaN;
      v.data[9 * 4 + 1] = Infinity;
      const dOut = randomTensor([6, 4], 23);
      const g = await attn.scaledDotProductAttentionBackward(q, k, v, dOut, { attnMask: mask });
      for (const name of GRADS) for (const x of g[name].data) expect(Number.isFinite(x)).toBe(true);
      expect([...g.dQuery.data.subarray(16, 24)]).toEqual(new Array(8).fill(0));
      expect([...g.dKey.data.subarray(72, 80)]).toEqual(new Array(8).fill(0));
      expect([...g.dValue.data.subarray(36, 40)]).toEqual(new Array(4).fill(0));
    });

    it('rows whose scores are all huge (padding masked with −3.4e38, as Hugging Face masks it; −1e9) keep P summing to 1', async () => {
      // The float32 log-sum-exp of such a row, m + log Σ, rounds to m: P = e^(s − lse) alone would
      // be Lk× too large. Rows 0 and 36 of head 0 and row 5 of head 1 (batch 0), row 20 (batch
      // 1, head 1) half hidden by −3.4e38 and half visible.
      const q = randomTensor([2, 2, 37, 16], 50), k = randomTensor([2, 2, 70, 16], 51), v = randomTensor([2, 2, 70, 8], 52);
      const { additive } = randomMasks([2, 2, 37, 70], 53, 1);
      const row = (b: number, h: number, i: number) => ((b * 2 + h) * 37 + i) * 70;
      additive.data.fill(-3.4e38, row(0, 0, 0), row(0, 0, 1));
      additive.data.fill(-3.4e38, row(0, 0, 36), row(0, 0, 37));
      additive.data.fill(-1e9, row(0, 1, 5), row(0, 1, 6));
      additive.data.fill(-3.4e38, row(1, 1, 20), row(1, 1, 20) + 35);
      await check(q, k, v, { attnMask: additive, returnAttnMaskGrad: true }, 'huge additive mask rows');
      await check(q, k, v, { attnMask: additive, isCausal: true, sinks: new Float32Array([-2, 1]) }, 'huge additive mask rows + causal + sinks');
    });

    it('NaN in a query or dOutput row reaches only the keys that row sees; Inf in keys and values no row sees never leaks', async () => {
      // Causal 37×53 (keys 37–52 seen by no row, in a tile with seen keys 32–36) or masks that hide
      // key 40 from every row; a NaN in row 3 (sees few keys) or 33 (the last block of 32 rows).
      const q = randomTensor([2, 37, 16], 40), k = randomTensor([2, 53, 16], 41), v = randomTensor([2, 53, 8], 42);
      const { bool, additive } = randomMasks([2, 37, 53], 43);
      for (let i = 0; i < 2 * 37; i++) {
        bool.data[i * 53 + 40] = 0;
        additive.data[i * 53 + 40] = -Infinity;
      }
      const withNaN = (t: Tensor, at: number): Tensor => {
        const data = new Float32Array(t.data);
        data[at] = NaN;
        return { data, shape: t.shape };
      };
      const kInf = { data: new Float32Array(k.data), shape: k.shape }, vInf = { data: new Float32Array(v.data), shape: v.shape };
      for (const b of [0, 1]) {
        kInf.data[(b * 53 + 45) * 16 + 3] = Infinity;
        vInf.data[(b * 53 + 50) * 8 + 1] = -Infinity;
      }
      const cases: [string, BackwardOptions, number, number][] = [
        ['causal', { isCausal: true }, 3, 33],
        ['bool mask', { attnMask: bool }, 33, 3],
        ['causal + additive mask', { isCausal: true, attnMask: additive, returnAttnMaskGrad: true }, 3, 33],
      ];
      for (const [name, options, queryRow, dOutRow] of cases) {
        await check(withNaN(q, (37 + queryRow) * 16 + 2), k, v, options, `${name}, NaN in query row ${queryRow}`);
        await check(q, k, v, options, `${name}, NaN in dOutput row ${dOutRow}`, 44, 1, (dOut) => {
          dOut.data[dOutRow * 8 + 5] = NaN;
        });
        const unseen = options.attnMask ? { k: withNaN(k, (53 + 40) * 16), v: withNaN(v, 40 * 8 + 7) } : { k: kInf, v: vInf };
        await check(q, unseen.k, unseen.v, options, `${name}, NaN/Inf in keys and values no row sees`);
      }
      // With sinks, a NaN row that sees keys spreads its NaN into dSinks (rows 0–4 see nothing).
      await check(withNaN(q, (37 + 33) * 16 + 2), k, v, { sinks: new Float32Array([0.5]), isCausal: { offset: -5 } }, 'sinks, NaN in query row 33');
      // A row that sees no key has D = Σ_j P·dP = 0 (it has no P), so its sink term −e^(sink − lse)·D
      // is 0 even with NaN in its dOutput row (its output is 0, and dO·O would be NaN): row 3 behind
      // a causal offset, and behind masks that hide every key from it.
      const boolHidesRow3 = { data: new Uint8Array(bool.data), shape: bool.shape };
      const additiveHidesRow3 = { data: new Float32Array(additive.data), shape: additive.shape };
      boolHidesRow3.data.fill(0, 3 * 53, 4 * 53);
      additiveHidesRow3.data.fill(-Infinity, 3 * 53, 4 * 53);
      const sinks = new Float32Array([0.5]);
      const unseenRows: [string, BackwardOptions][] = [
        ['causal offset -5', { sinks, isCausal: { offset: -5 } }],
        ['bool mask', { sinks, attnMask: boolHidesRow3 }],
        ['additive mask', { sinks, attnMask: additiveHidesRow3, returnAttnMaskGrad: true }],
      ];
      for (const [name, options] of unseenRows) {
        await check(q, k, v, options, `sinks + ${name}, NaN in the dOutput of row 3 that sees nothing`, 44, 1, (dOut) => {
          dOut.data[3 * 8 + 5] = NaN;
        });
      }
    });

    it('rejects bad input with typed errors naming the argument, and does not leak', async () => {
      const q = randomTensor([2, 5, 8], 1);
      const k = randomTensor([2, 6, 8], 2);
      const v = randomTensor([2, 6, 3], 3);
      const dOut = randomTensor([2, 5, 3], 4);
      const before = attn.memoryStats().heapBytesInUse;
      await expect(attn.scaledDotProductAttentionBackward(q, k, v, randomTensor([2, 5, 4], 5))).rejects.toThrow(RangeError);
      await expect(attn.scaledDotProductAttentionBackward(q, k, v, randomTensor([2, 5, 4], 5))).rejects.toThrow(/dOutput.*\[2, 5, 3\]/);
      await expect(attn.scaledDotProductAttentionBackward(q, k, v, { data: [1], shape: [1] } as unknown as Tensor)).rejects.toThrow(TypeError);
      const fwd = await attn.scaledDotProductAttention(q, k, v, { returnLogSumExp: true });
      await expect(attn.scaledDotProductAttentionBackward(q, k, v, dOut, { output: fwd.output })).rejects.toThrow(TypeError);
      await expect(attn.scaledDotProductAttentionBackward(q, k, v, dOut, { output: fwd.output, logSumExp: randomTensor([2, 4], 1) })).rejects.toThrow(/logSumExp.*\[2, 5\]/);
      const { bool } = randomMasks([5, 6], 3);
      await expect(attn.scaledDotProductAttentionBackward(q, k, v, dOut, { attnMask: bool, returnAttnMaskGrad: true })).rejects.toThrow(TypeError);
      await expect(attn.scaledDotProductAttentionBackward(q, k, v, dOut, { isCausal: 'sideways' as never })).rejects.toThrow(TypeError);
      await expect(attn.scaledDotProductAttentionBackward(q, k, v, dOut, { returnAttnMaskGrad: 1 as never })).rejects.toThrow(TypeError);
      expect(attn.memoryStats().heapBytesInUse).toBe(before);
      expect((await attn.scaledDotProductAttentionBackward(q, k, v, dOut)).dQuery.shape).toEqual([2, 5, 8]);
      expect(attn.memoryStats().heapBytesInUse).toBe(before);
    });

    it('zero sizes: empty gradients, and Lk = 0 gives zero dQuery', async () => {
      const cases: [number[], number[], number[]][] = [
        [[0, 3, 4], [0, 5, 4], [0, 5, 2]],
        [[2, 0, 4], [2, 5, 4], [2, 5, 2]],
        [[2, 3, 4], [2, 0, 4], [2, 0, 2]],
      ];
      for (const [qs, ks, vs] of cases) {
        const q = randomTensor(qs, 1), k = randomTensor(ks, 2), v = randomTensor(vs, 3);
        const dOut = randomTensor([...qs.slice(0, -1), vs.at(-1)!], 4);
        const fwd = await attn.scaledDotProductAttention(q, k, v, { returnLogSumExp: true });
        for (const options of [{}, { output: fwd.output, logSumExp: fwd.logSumExp }]) {
          const g = await attn.scaledDotProductAttentionBackward(q, k, v, dOut, options);
          expect(g.dQuery.shape).toEqual(qs);
          expect(g.dKey.shape).toEqual(ks);
          expect(g.dValue.shape).toEqual(vs);
          expect(g.dQuery.data.every((x) => x === 0)).toBe(true);
        }
      }
    });

    it('returnLogSumExp gives log Σ exp(masked scores) per row, −Infinity for rows that see nothing', async () => {
      const q = randomTensor([2, 9, 8], 30, -2, 2);
      const k = randomTensor([2, 12, 8], 31, -2, 2);
      const v = randomTensor([2, 12, 4], 32);
      const { output, logSumExp } = await attn.scaledDotProductAttention(q, k, v, { isCausal: 'bottom-right', returnLogSumExp: true });
      const plain = await attn.scaledDotProductAttention(q, k, v, { isCausal: 'bottom-right' });
      expect(output.data).toEqual(plain.output.data);
      expect(logSumExp!.shape).toEqual([2, 9]);
      const stages = await oracle.explain(q, k, v, { isCausal: 'bottom-right' });
      for (let r = 0; r < 18; r++) {
        const row = stages.maskedScores.data.subarray(r * 12, (r + 1) * 12);
        const m = Math.max(...row);
        const want = m + Math.log(row.reduce((s, x) => s + Math.exp(x - m), 0));
        expect(Math.abs(logSumExp!.data[r]! - want)).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(want)));
      }
      const blind = await attn.scaledDotProductAttention(randomTensor([4, 8], 1), randomTensor([2, 8], 2), randomTensor([2, 4], 3), {
        isCausal: 'bottom-right', returnLogSumExp: true,
      });
      expect([...blind.logSumExp!.data]).toEqual([-Infinity, -Infinity, blind.logSumExp!.data[2], blind.logSumExp!.data[3]]);
      expect(Number.isFinite(blind.logSumExp!.data[2]!)).toBe(true);
      await expect(attn.scaledDotProductAttention(q, k, v, { returnLogSumExp: 'yes' as never })).rejects.toThrow(TypeError);
    });
  });
}

/**
 * Small cases for a gradcheck: central differences of L = Σ dO ⊙ O(x) with the float64 forward,
 * on a 2^-8 input grid (gradcheckInputs) with steps of 2^-10 (exact in float32).
 */
export const GRADCHECK_CASES: [string, BackwardOptions, number[], number[], number[]][] = [
  ['plain', {}, [1, 2, 3, 4], [1, 2, 5, 4], [1, 2, 5, 3]],
  ['scale + top-left causal', { scale: 0.9, isCausal: true }, [2, 4, 3], [2, 4, 3], [2, 4, 2]],
  ['bottom-right, Lq > Lk', { isCausal: 'bottom-right' }, [5, 3], [3, 3], [3, 2]],
  ['gqa', { enableGqa: true }, [1, 4, 3, 3], [1, 2, 4, 3], [1, 2, 4, 2]],
  ['causal offset −2, Lq > Lk', { isCausal: { offset: -2 } }, [5, 3], [3, 3], [3, 2]],
  ['causal offset 1 + bool mask', { isCausal: { offset: 1 }, attnMask: randomMasks([2, 4, 5], 5).bool }, [2, 4, 3], [2, 5, 3], [2, 5, 2]],
  ['bottom-right + additive mask', { isCausal: 'bottom-right', attnMask: randomMasks([4, 6], 6).additive }, [2, 4, 3], [2, 6, 3], [2, 6, 2]],
  ['window ±1 + softcap', { window: { left: 1, right: 1 }, softcap: 2 }, [2, 4, 3], [2, 6, 3], [2, 6, 2]],
  ['key lengths, bottom-right', { keyLengths: new Int32Array([4, 2]), isCausal: 'bottom-right' }, [2, 3, 3], [2, 6, 3], [2, 6, 2]],
  ['ALiBi', { alibiSlopes: new Float32Array([0.5, 0.25]), isCausal: true }, [1, 2, 4, 3], [1, 2, 5, 3], [1, 2, 5, 2]],
  ['sinks (dSinks too)', { sinks: new Float32Array([0.25, -0.5]), isCausal: { offset: -1 } }, [1, 2, 4, 3], [1, 2, 5, 3], [1, 2, 5, 2]],
  ['documents', { queryDocuments: { data: new Int32Array([0, 0, 1, 1]), shape: [1, 4] }, keyDocuments: { data: new Int32Array([0, 1, 0, 1, 1]), shape: [1, 5] } }, [1, 4, 3], [1, 5, 3], [1, 5, 2]],
];

/** A case's query, key and value on the 2^-8 grid. */
export function gradcheckInputs(qs: number[], ks: number[], vs: number[]): { q: Tensor; k: Tensor; v: Tensor } {
  const grid = (t: Tensor): Tensor => ({ data: t.data.map((x) => Math.round(x * 256) / 256), shape: t.shape });
  return { q: grid(randomTensor(qs, 1)), k: grid(randomTensor(ks, 2)), v: grid(randomTensor(vs, 3)) };
}
