// Attention modules, the PRNG, dropout and score functions through the npm API. Expected values
// are computed here in float64 from the module's own weights (never copied from the texts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAttention,
  createMultiheadAttention,
  createSelfAttention,
  type Attention,
  type MaskTensor,
  type ScoreOptions,
  type Tensor,
} from 'sdpa-web';
import { rng } from './support/tensors.js';
import { centralDifference, randomTensor } from './support/tensors.js';
import { maxAbsDiff } from './support/tolerance.js';

// ---- float64 helpers ----------------------------------------------------------------------------

/** a [M, K] · b [K, N] (b given as a flat row-major array), float64. */
function matmul64(a: ArrayLike<number>, b: ArrayLike<number>, M: number, K: number, N: number): Float64Array {
  const out = new Float64Array(M * N);
  for (let i = 0; i < M; i++) for (let k = 0; k < K; k++) for (let j = 0; j < N; j++) out[i * N + j]! += a[i * K + k]! * b[k * N + j]!;
  return out;
}

/** x [M, in] · Wᵀ + b with W [out, in], float64. */
function linear64(x: ArrayLike<number>, w: Tensor, b: ArrayLike<number> | undefined, M: number): Float64Array {
  const [out, inp] = w.shape as [number, number];
  const y = new Float64Array(M * out);
  for (let i = 0; i < M; i++) {
    for (let o = 0; o < out; o++) {
      let s = b ? b[o]! : 0;
      for (let e = 0; e < inp; e++) s += x[i * inp + e]! * w.data[o * inp + e]!;
      y[i * out + o] = s;
    }
  }
  return y;
}

/** softmax(q·kᵀ·scale + bias) over keys, rows that see nothing -> 0; q [L, d], k [S, d], v [S, dv]. */
function attention64(q: ArrayLike<number>, k: ArrayLike<number>, v: ArrayLike<number>, L: number, S: number, d: number, dv: number, bias: (i: number, j: number) => number) {
  const w = new Float64Array(L * S);
  const o = new Float64Array(L * dv);
  for (let i = 0; i < L; i++) {
    const s = new Float64Array(S);
    let m = -Infinity;
    for (let j = 0; j < S; j++) {
      let dot = 0;
      for (let e = 0; e < d; e++) dot += q[i * d + e]! * k[j * d + e]!;
      s[j] = dot / Math.sqrt(d) + bias(i, j);
      m = Math.max(m, s[j]!);
    }
    if (m === -Infinity) continue;
    let sum = 0;
    for (let j = 0; j < S; j++) sum += s[j] = Math.exp(s[j]! - m);
    for (let j = 0; j < S; j++) {
      w[i * S + j] = s[j]! / sum;
      for (let c = 0; c < dv; c++) o[i * dv + c]! += w[i * S + j]! * v[j * dv + c]!;
    }
  }
  return { w, o };
}

function expectClose(got: ArrayLike<number>, want: ArrayLike<number>, label: string, rel = 1e-5) {
  let scale = 1;
  for (let i = 0; i < want.length; i++) scale = Math.max(scale, Math.abs(want[i]!));
  const err = maxAbsDiff(got, want);
  expect(err, `${label}: error ${err} (scale ${scale})`).toBeLessThanOrEqual(rel * scale);
}

let attn: Attention;
beforeAll(async () => {
  attn = await createAttention();
});
afterAll(() => attn.dispose());

describe('PRNG and Xavier/Glorot init', () => {
  it('xavierUniform is (2u − 1)·√(6/(rows+cols)) with u the documented mulberry32 draws', () => {
    const w = attn.xavierUniform([32, 16], 42);
    const next = rng(42); // the tests' own mulberry32: an independent implementation
    const a = Math.sqrt(6 / 48);
    const want = Float32Array.from({ length: 512 }, () => (2 * next() - 1) * a);
    expect(w.shape).toEqual([32, 16]);
    expect(w.data).toEqual(want);
    const offset = attn.xavierUniform([4, 4], 42, 100);
    const skip = rng(42);
    for (let i = 0; i < 100; i++) skip();
    expect(offset.data).toEqual(Float32Array.from({ length: 16 }, () => (2 * skip() - 1) * Math.sqrt(6 / 8)));
  });

  it('randomUniform is low + u·(high − low) with u the documented mulberry32 draws, addressable by offset', () => {
    const next = rng(7);
    const u = Array.from({ length: 24 }, () => next());
    const t = attn.randomUniform([2, 3, 4], 7, { low: -2, high: 3 });
    expect(t.shape).toEqual([2, 3, 4]);
    expect(t.data).toEqual(Float32Array.from(u, (x) => -2 + x * 5));
    expect(attn.randomUniform([4], 7, { low: -2, high: 3, offset: 20 }).data).toEqual(t.data.subarray(20));
    expect(attn.randomUniform([3], 7).data).toEqual(Float32Array.from(u.slice(0, 3), (x) => -1 + x * 2));
    expect(attn.randomUniform([0], 7).data.length).toBe(0);
  });

  it('randomUniform rejects bad arguments with typed errors naming them', () => {
    expect(() => attn.randomUniform([2], 1, { lo: 0 } as never)).toThrow(TypeError);
    expect(() => attn.randomUniform([2], 1, { lo: 0 } as never)).toThrow(/lo.*low, high, offset/);
    expect(() => attn.randomUniform([2], 1, { low: 1, high: 0 })).toThrow(RangeError);
    expect(() => attn.randomUniform([2], 1, { high: Infinity })).toThrow(/high/);
    expect(() => attn.randomUniform([2], 1, { offset: -1 })).toThrow(/offset/);
    expect(() => attn.randomUniform([2], -1)).toThrow(/seed/);
    expect(() => attn.randomUniform([-1], 1)).toThrow(RangeError);
    expect(() => attn.randomUniform([2], 1, { low: '0' } as never)).toThrow(TypeError);
  });

  it('rejects bad arguments with typed errors', () => {
    expect(() => attn.xavierUniform([0, 3], 1)).toThrow(/fanIn/);
    expect(() => attn.xavierUniform([3, 3], -1)).toThrow(RangeError);
    expect(() => attn.xavierUniform([3, 3], 2 ** 32)).toThrow(/seed/);
    expect(() => attn.xavierUniform([3, 3], '1' as never)).toThrow(TypeError);
  });
});

describe('createSelfAttention', () => {
  it("runs the source text's example: 8 tokens of 32 dims -> 8 contextual vectors of 16 dims", async () => {
    const sa = await createSelfAttention({ dModel: 32, dK: 16, seed: 42 });
    const x = randomTensor([8, 32], 5);
    const { output, weights } = sa.forward(x);
    expect(output.shape).toEqual([8, 16]);
    expect(weights.shape).toEqual([8, 8]);
    for (let i = 0; i < 8; i++) {
      const sum = weights.data.subarray(i * 8, i * 8 + 8).reduce((s, w) => s + w, 0);
      expect(Math.abs(sum - 1)).toBeLessThan(1e-6);
    }
    // float64 from the module's weights
    const q = matmul64(x.data, sa.wQ.data, 8, 32, 16);
    const k = matmul64(x.data, sa.wK.data, 8, 32, 16);
    const v = matmul64(x.data, sa.wV.data, 8, 32, 16);
    const ref = attention64(q, k, v, 8, 8, 16, 16, () => 0);
    expectClose(output.data, ref.o, 'output');
    expectClose(weights.data, ref.w, 'weights');
    // Xavier bound and the documented stream layout (W_Q, W_K, W_V consecutive)
    expect(sa.wK.data).toEqual(attn.xavierUniform([32, 16], 42, 512).data);
    expect(sa.wV.data).toEqual(attn.xavierUniform([32, 16], 42, 1024).data);
    sa.dispose();
  });

  it('is reproducible across instances for a seed, and differs across seeds', async () => {
    const [a, b, c] = await Promise.all([
      createSelfAttention({ dModel: 12, dK: 4, dV: 6, seed: 7 }),
      createSelfAttention({ dModel: 12, dK: 4, dV: 6, seed: 7 }),
      createSelfAttention({ dModel: 12, dK: 4, dV: 6, seed: 8 }),
    ]);
    expect(a.wQ.data).toEqual(b.wQ.data);
    expect(a.wV.data).toEqual(b.wV.data);
    expect(a.wV.shape).toEqual([12, 6]);
    expect(a.wQ.data).not.toEqual(c.wQ.data);
    const x = randomTensor([2, 5, 12], 1);
    expect(a.forward(x).output.data).toEqual(b.forward(x).output.data);
    expect(a.forward(x, { isCausal: true }).output.shape).toEqual([2, 5, 6]);
    for (const m of [a, b, c]) m.dispose();
  });

  it('dropout on the weights is off unless asked, seeded, and scales kept weights by 1/(1−p)', async () => {
    const sa = await createSelfAttention({ dModel: 8, dK: 8, seed: 1 });
    const x = randomTensor([16, 8], 2);
    const plain = sa.forward(x);
    const d1 = sa.forward(x, { dropout: { p: 0.5, seed: 3 } });
    const d2 = sa.forward(x, { dropout: { p: 0.5, seed: 3 } });
    expect(d1.output.data).toEqual(d2.output.data);
    for (let i = 0; i < plain.weights.data.length; i++) {
      const w = d1.weights.data[i]!;
      expect(w === 0 || Math.abs(w - 2 * plain.weights.data[i]!) <= 1e-7).toBe(true);
    }
    expect(sa.forward(x).output.data).toEqual(plain.output.data);
    sa.dispose();
  });

  it('backward: dX, dW_Q, dW_K, dW_V match float64 and finite differences of the forward', async () => {
    const sa = await createSelfAttention({ dModel: 6, dK: 4, dV: 3, seed: 9 });
    const x = randomTensor([2, 5, 6], 3);
    const dOut = randomTensor([2, 5, 3], 4);
    // The variants' options pass through to the attention call, forward and backward.
    const variants = { isCausal: true, window: { left: 2 }, softcap: 3, alibiSlopes: new Float32Array([0.3]), sinks: new Float32Array([0.5]) };
    for (const options of [{}, { isCausal: true }, variants] as const) {
      const g = sa.backward(x, dOut, options);
      expect(g.dX.shape).toEqual([2, 5, 6]);
      expect(g.dWQ.shape).toEqual([6, 4]);
      expect(g.dWV.shape).toEqual([6, 3]);
      // float64 chain rule from the float64 SDPA gradient of the projected (float32) Q, K, V
      const [q, k, v] = [sa.wQ, sa.wK, sa.wV].map((w) => attn.matmul(x, w)) as [Tensor, Tensor, Tensor];
      const g64 = attn.referenceAttentionBackward(q, k, v, dOut, options);
      const xT = (cols: number, d: ArrayLike<number>) => {
        const out = new Float64Array(6 * cols);
        for (let r = 0; r < 10; r++) for (let i = 0; i < 6; i++) for (let c = 0; c < cols; c++) out[i * cols + c]! += x.data[r * 6 + i]! * d[r * cols + c]!;
        return out;
      };
      expectClose(g.dWQ.data, xT(4, g64.dQuery.data), 'dWQ');
      expectClose(g.dWK.data, xT(4, g64.dKey.data), 'dWK');
      expectClose(g.dWV.data, xT(3, g64.dValue.data), 'dWV');
      const dX = new Float64Array(60);
      for (const [d, w, cols] of [[g64.dQuery.data, sa.wQ, 4], [g64.dKey.data, sa.wK, 4], [g64.dValue.data, sa.wV, 3]] as const) {
        for (let r = 0; r < 10; r++) for (let i = 0; i < 6; i++) for (let c = 0; c < cols; c++) dX[r * 6 + i]! += d[r * cols + c]! * w.data[i * cols + c]!;
      }
      expectClose(g.dX.data, dX, 'dX');
      // finite differences of L = Σ dOut ⊙ forward(x).output (float32, so a loose bound)
      const loss = () => sa.forward(x, options).output.data.reduce((s, o, i) => s + o * dOut.data[i]!, 0);
      const h = 1e-2;
      for (const [name, t, grad] of [['wQ', sa.wQ, g.dWQ], ['wV', sa.wV, g.dWV], ['x', x, g.dX]] as const) {
        for (const i of [0, 5, t.data.length - 1]) {
          const t0 = t.data[i]!;
          t.data[i] = t0 + h;
          const up = loss();
          t.data[i] = t0 - h;
          const down = loss();
          t.data[i] = t0;
          const numeric = (up - down) / (2 * h);
          expect(Math.abs(grad.data[i]! - numeric), `${name}[${i}]`).toBeLessThanOrEqual(2e-3 * Math.max(1, Math.abs(numeric)));
        }
      }
    }
    expect(() => sa.backward(x, randomTensor([2, 5, 4], 1))).toThrow(/dOutput/);
    expect(() => sa.backward(x, dOut, { dropout: { p: 0.1, seed: 1 } } as never)).toThrow(TypeError);
    sa.dispose();
  });

  it('rejects bad configurations and inputs with typed errors', async () => {
    await expect(createSelfAttention({ dModel: 0, dK: 4 })).rejects.toThrow(/dModel/);
    await expect(createSelfAttention({ dModel: 4, dK: 2.5 })).rejects.toThrow(RangeError);
    await expect(createSelfAttention({ dModel: 4, dK: 2, seed: -3 })).rejects.toThrow(/seed/);
    await expect(createSelfAttention({ dModel: '4' as never, dK: 2 })).rejects.toThrow(TypeError);
    const sa = await createSelfAttention({ dModel: 4, dK: 2 });
    expect(() => sa.forward(randomTensor([3, 5], 1))).toThrow(/x must have shape.*dModel = 4/);
    expect(() => sa.forward(randomTensor([3, 4], 1), { dropout: { p: 2, seed: 1 } })).toThrow(RangeError);
    sa.dispose();
  });

  it('rejects unknown option names of the config, its weights, forward, backward and dropout, naming the closest known name', async () => {
    const typo = (options: Record<string, unknown>): never => options as never;
    const w = { wQ: randomTensor([4, 2], 1), wK: randomTensor([4, 2], 2), wV: randomTensor([4, 2], 3) };
    await expect(createSelfAttention(typo({ dModel: 4, dK: 2, dv: 2 }))).rejects.toThrow(
      /^unknown option 'dv' of createSelfAttention; did you mean 'dV'\? \(known: dModel, dK, dV, seed, weights, backend\)$/,
    );
    await expect(createSelfAttention(typo({ dModel: 4, dK: 2, backnd: 'scalar' }))).rejects.toThrow(TypeError);
    await expect(createSelfAttention(typo({ dModel: 4, dK: 2, weights: { wQ: w.wQ, wK: w.wK, Wv: w.wV } }))).rejects.toThrow(
      /unknown option 'Wv' of createSelfAttention options.weights; did you mean 'wV'\? \(known: wQ, wK, wV\)/,
    );
    const sa = await createSelfAttention({ dModel: 4, dK: 2, weights: w, backend: 'scalar' });
    const x = randomTensor([2, 3, 4], 4);
    const dOut = randomTensor([2, 3, 2], 5);
    const bad: [() => unknown, RegExp][] = [
      [() => sa.forward(x, typo({ isCasual: true })), /unknown option 'isCasual' of SelfAttention.forward; did you mean 'isCausal'\? \(known: attnMask, isCausal, dropout, softcap, keyLengths, window, alibi, alibiSlopes, sinks, queryDocuments, keyDocuments\)/],
      [() => sa.forward(x, typo({ isCasual: undefined })), /unknown option 'isCasual' of SelfAttention.forward/],
      [() => sa.forward(x, typo({ dropout: { p: 0.1, seeds: 1 } })), /unknown option 'seeds' of SelfAttention.forward options.dropout; did you mean 'seed'\? \(known: p, seed\)/],
      [() => sa.backward(x, dOut, typo({ attn_mask: null })), /unknown option 'attn_mask' of SelfAttention.backward; did you mean 'attnMask'\? \(known: attnMask, isCausal, softcap, keyLengths, window, alibi, alibiSlopes, sinks, queryDocuments, keyDocuments\)/],
      [() => sa.backward(x, dOut, typo({ frobnicate: 1 })), /^unknown option 'frobnicate' of SelfAttention.backward \(known: attnMask, isCausal, softcap, keyLengths, window, alibi, alibiSlopes, sinks, queryDocuments, keyDocuments\)$/],
    ];
    for (const [call, message] of bad) {
      expect(call).toThrow(TypeError);
      expect(call).toThrow(message);
    }
    // Still usable; the forward's options, dropout off, may be passed back to the backward.
    const forwardOptions = { isCausal: true, dropout: null };
    const { output } = sa.forward(x, forwardOptions);
    expect(output.shape).toEqual([2, 3, 2]);
    expect(sa.backward(x, dOut, forwardOptions).dX.shape).toEqual([2, 3, 4]);
    sa.dispose();
  });
});

describe('dropout', () => {
  it('keeps 1−p of a large input within 0.01, scaled by 1/(1−p), deterministically', async () => {
    const n = 1 << 20;
    const ones: Tensor = { data: new Float32Array(n).fill(1), shape: [1024, 1024] };
    const other = await createAttention({ backend: 'scalar' });
    const differences = (a: Float32Array, b: Float32Array) => a.reduce((n, x, i) => n + (x === b[i] ? 0 : 1), 0);
    for (const p of [0.1, 0.3, 0.5, 0.9]) {
      const y = attn.dropout(ones, { p, seed: 11 });
      const scale = Math.fround(1 / (1 - p));
      const kept = y.data.reduce((n, v) => n + (v !== 0 ? 1 : 0), 0);
      const wrongScale = y.data.reduce((n, v) => n + (v !== 0 && v !== scale ? 1 : 0), 0);
      expect(wrongScale).toBe(0);
      expect(Math.abs(kept / n - (1 - p))).toBeLessThanOrEqual(0.01);
      expect(differences(other.dropout(ones, { p, seed: 11 }).data, y.data)).toBe(0); // another instance, same seed
      expect(differences(attn.dropout(ones, { p, seed: 12 }).data, y.data)).toBeGreaterThan(0);
    }
    expect(differences(attn.dropout(ones, { p: 0, seed: 1 }).data, ones.data)).toBe(0);
    expect(attn.dropout(ones, { p: 1, seed: 1 }).data.every((v) => v === 0)).toBe(true);
    expect(() => attn.dropout(ones, { p: -0.1, seed: 1 })).toThrow(RangeError);
    expect(() => attn.dropout(ones, { p: 0.5 } as never)).toThrow(TypeError);
    other.dispose();
  });
});

// ---- multi-head attention vs a float64 PyTorch-semantics computation ---------------------------

interface Mha64Options {
  E: number; H: number; Hkv: number; B: number; L: number; S: number;
  wQ: Tensor; wK: Tensor; wV: Tensor; wO: Tensor; bQ: Float32Array; bK: Float32Array; bV: Float32Array; bO: Float32Array;
  kpm?: Uint8Array; attnMask?: Uint8Array | Float32Array; causal?: boolean;
}
/** nn.MultiheadAttention (batch_first=True) in float64, with GQA by repeating K/V heads. */
function mha64(q: Tensor, k: Tensor, v: Tensor, o: Mha64Options) {
  const { E, H, Hkv, B, L, S } = o;
  const hd = E / H;
  const out = new Float64Array(B * L * E);
  const avg = new Float64Array(B * L * S);
  for (let b = 0; b < B; b++) {
    const qp = linear64(q.data.subarray(b * L * E, (b + 1) * L * E), o.wQ, o.bQ, L);
    const kp = linear64(k.data.subarray(b * S * E, (b + 1) * S * E), o.wK, o.bK, S);
    const vp = linear64(v.data.subarray(b * S * E, (b + 1) * S * E), o.wV, o.bV, S);
    const merged = new Float64Array(L * E);
    for (let h = 0; h < H; h++) {
      const g = h / (H / Hkv) | 0;
      const head = (x: Float64Array, n: number, width: number, hh: number) =>
        Float64Array.from({ length: n * hd }, (_, idx) => x[Math.floor(idx / hd) * width + hh * hd + (idx % hd)]!);
      const bias = (i: number, j: number) => {
        let x = 0;
        if (o.kpm && o.kpm[b * S + j]) x = -Infinity;
        if (o.attnMask) {
          const m = o.attnMask[i * S + j]!;
          x += o.attnMask instanceof Uint8Array ? (m ? -Infinity : 0) : m;
        }
        if (o.causal && j > i) x = -Infinity;
        return x;
      };
      const r = attention64(head(qp, L, E, h), head(kp, S, Hkv * hd, g), head(vp, S, Hkv * hd, g), L, S, hd, hd, bias);
      for (let i = 0; i < L; i++) for (let c = 0; c < hd; c++) merged[i * E + h * hd + c] = r.o[i * hd + c]!;
      for (let i = 0; i < L * S; i++) avg[b * L * S + i]! += r.w[i]! / H;
    }
    out.set(linear64(merged, o.wO, o.bO, L), b * L * E);
  }
  return { out, avg };
}

describe('createMultiheadAttention', () => {
  const E = 16, H = 4, B = 2, L = 5, S = 7;
  const weights = {
    inProjWeight: randomTensor([3 * E, E], 100, -0.4, 0.4),
    inProjBias: randomTensor([3 * E], 101, -0.1, 0.1),
    outProjWeight: randomTensor([E, E], 102, -0.4, 0.4),
    outProjBias: randomTensor([E], 103, -0.1, 0.1),
  };
  const slice = (t: Tensor, r0: number, r1: number): Tensor => ({ data: t.data.slice(r0 * E, r1 * E), shape: [r1 - r0, E] });
  const ref = {
    E, H, Hkv: H, B, L, S,
    wQ: slice(weights.inProjWeight, 0, E), wK: slice(weights.inProjWeight, E, 2 * E), wV: slice(weights.inProjWeight, 2 * E, 3 * E),
    wO: weights.outProjWeight,
    bQ: weights.inProjBias.data.slice(0, E), bK: weights.inProjBias.data.slice(E, 2 * E), bV: weights.inProjBias.data.slice(2 * E),
    bO: weights.outProjBias.data,
  };
  const q = randomTensor([B, L, E], 1), k = randomTensor([B, S, E], 2), v = randomTensor([B, S, E], 3);

  it('matches nn.MultiheadAttention numerics (float64 here) given the same weights, batch-first', async () => {
    const mha = await createMultiheadAttention({ embedDim: E, numHeads: H, batchFirst: true, weights });
    const r = mha.forward(q, k, v);
    const want = mha64(q, k, v, ref);
    expect(r.output.shape).toEqual([B, L, E]);
    expect(r.weights!.shape).toEqual([B, L, S]);
    expectClose(r.output.data, want.out, 'output');
    expectClose(r.weights!.data, want.avg, 'averaged weights');
    expect(mha.forward(q, k, v, { averageAttnWeights: false }).weights!.shape).toEqual([B, H, L, S]);
    expect(mha.forward(q, k, v, { needWeights: false }).weights).toBeUndefined();
    mha.dispose();
  });

  it("passes the variants' options through: a window equals the additive band mask it stands for", async () => {
    const mha = await createMultiheadAttention({ embedDim: E, numHeads: H, batchFirst: true, weights });
    // Without isCausal query i sits at position p = i + S − L; the window keeps |p − j| ≤ 1.
    const band = new Float32Array(L * S).map((_, x) => (Math.abs(Math.floor(x / S) + S - L - (x % S)) <= 1 ? 0 : -Infinity));
    const windowed = mha.forward(q, k, v, { window: { left: 1, right: 1 }, softcap: 2 });
    const masked = mha.forward(q, k, v, { attnMask: { data: band, shape: [L, S] }, softcap: 2 });
    expectClose(windowed.output.data, masked.output.data, 'output');
    expectClose(windowed.weights!.data, masked.weights!.data, 'weights');
    expect(maxAbsDiff(windowed.output.data, mha.forward(q, k, v, { window: { left: 1, right: 1 } }).output.data)).toBeGreaterThan(1e-4);
    expect(() => mha.forward(q, k, v, { window: { lef: 1 } } as never)).toThrow(/unknown option 'lef' of window; did you mean 'left'/);
    mha.dispose();
  });

  it('key padding mask (1 = ignore), bool attn mask (1 = not allowed), float attn mask and causal', async () => {
    const mha = await createMultiheadAttention({ embedDim: E, numHeads: H, batchFirst: true, weights });
    const kpm = new Uint8Array(B * S);
    kpm.fill(1, S - 2, S); // batch 0: last two keys are padding
    kpm[S + 0] = 1; // batch 1: first key is padding
    const boolMask = Uint8Array.from({ length: L * S }, (_, i) => (i % 5 === 3 ? 1 : 0));
    const floatMask = Float32Array.from({ length: L * S }, (_, i) => ((i * 7) % 5) / 4 - 0.5);
    const cases: [string, Parameters<typeof mha.forward>[3], Partial<Mha64Options>][] = [
      ['key padding', { keyPaddingMask: { data: kpm, shape: [B, S] } }, { kpm }],
      ['bool attn mask + padding', { keyPaddingMask: { data: kpm, shape: [B, S] }, attnMask: { data: boolMask, shape: [L, S] } }, { kpm, attnMask: boolMask }],
      ['float attn mask + causal', { attnMask: { data: floatMask, shape: [L, S] }, isCausal: true }, { attnMask: floatMask, causal: true }],
      ['causal only', { isCausal: true }, { causal: true }],
    ];
    for (const [label, options, extra] of cases) {
      const r = mha.forward(q, k, v, options);
      const want = mha64(q, k, v, { ...ref, ...extra });
      expectClose(r.output.data, want.out, label);
      expectClose(r.weights!.data, want.avg, `${label} weights`);
    }
    // Polarity: a padded key gets weight exactly 0.
    const r = mha.forward(q, k, v, { keyPaddingMask: { data: kpm, shape: [B, S] } });
    for (let i = 0; i < L; i++) expect(r.weights!.data[i * S + S - 1]).toBe(0);
    mha.dispose();
  });

  it('sequence-first layout [L, B, E] (PyTorch default) and unbatched [L, E]', async () => {
    const mha = await createMultiheadAttention({ embedDim: E, numHeads: H, weights });
    const toLBE = (t: Tensor): Tensor => {
      const [b, l, e] = t.shape as [number, number, number];
      const data = new Float32Array(t.data.length);
      for (let i = 0; i < b; i++) for (let j = 0; j < l; j++) data.set(t.data.subarray((i * l + j) * e, (i * l + j + 1) * e), (j * b + i) * e);
      return { data, shape: [l, b, e] };
    };
    const r = mha.forward(toLBE(q), toLBE(k), toLBE(v));
    const want = mha64(q, k, v, ref);
    expect(r.output.shape).toEqual([L, B, E]);
    const back = toLBE({ data: r.output.data, shape: [L, B, E] }); // [L, B, E] -> [B, L, E]
    expectClose(back.data, want.out, 'sequence-first');
    const one = mha.forward({ data: q.data.slice(0, L * E), shape: [L, E] }, { data: k.data.slice(0, S * E), shape: [S, E] }, { data: v.data.slice(0, S * E), shape: [S, E] });
    expect(one.output.shape).toEqual([L, E]);
    expect(one.weights!.shape).toEqual([L, S]);
    expectClose(one.output.data, want.out.subarray(0, L * E), 'unbatched');
    mha.dispose();
  });

  it('GQA and MQA: fewer key/value heads, each shared by its group of query heads', async () => {
    for (const Hkv of [2, 1]) {
      const kv = Hkv * (E / H);
      const w = {
        qProjWeight: randomTensor([E, E], 200, -0.4, 0.4),
        kProjWeight: randomTensor([kv, E], 201, -0.4, 0.4),
        vProjWeight: randomTensor([kv, E], 202, -0.4, 0.4),
        kProjBias: randomTensor([kv], 203, -0.1, 0.1),
        outProjWeight: randomTensor([E, E], 204, -0.4, 0.4),
      };
      const mha = await createMultiheadAttention({ embedDim: E, numHeads: H, numKvHeads: Hkv, batchFirst: true, weights: w });
      const r = mha.forward(q, k, v, { isCausal: true });
      const zeros = (n: number) => new Float32Array(n);
      const want = mha64(q, k, v, {
        E, H, Hkv, B, L, S, wQ: w.qProjWeight, wK: w.kProjWeight, wV: w.vProjWeight, wO: w.outProjWeight,
        bQ: zeros(E), bK: w.kProjBias.data, bV: zeros(kv), bO: zeros(E), causal: true,
      });
      expectClose(r.output.data, want.out, `Hkv=${Hkv}`);
      expectClose(r.weights!.data, want.avg, `Hkv=${Hkv} weights`);
      mha.dispose();
    }
  });

  it('seeded Xavier init is reproducible; dropout is deterministic per seed', async () => {
    const a = await createMultiheadAttention({ embedDim: 8, numHeads: 2, numKvHeads: 1, seed: 5, batchFirst: true });
    const b = await createMultiheadAttention({ embedDim: 8, numHeads: 2, numKvHeads: 1, seed: 5, batchFirst: true });
    expect(a.weights.wK.shape).toEqual([4, 8]);
    expect(a.weights.wQ.data).toEqual(b.weights.wQ.data);
    expect(a.weights.wO.data).toEqual(attn.xavierUniform([8, 8], 5, 64 + 32 + 32).data);
    const x = randomTensor([2, 6, 8], 9);
    const d1 = a.forward(x, x, x, { dropout: { p: 0.25, seed: 4 } });
    const d2 = b.forward(x, x, x, { dropout: { p: 0.25, seed: 4 } });
    expect(d1.output.data).toEqual(d2.output.data);
    expect(d1.output.data).not.toEqual(a.forward(x, x, x).output.data);
    a.dispose();
    b.dispose();
  });

  it('rejects bad configurations, weights and inputs with typed errors naming them', async () => {
    await expect(createMultiheadAttention({ embedDim: 10, numHeads: 4 })).rejects.toThrow(/embedDim = 10 must be divisible by numHeads = 4/);
    await expect(createMultiheadAttention({ embedDim: 8, numHeads: 4, numKvHeads: 3 })).rejects.toThrow(/numKvHeads/);
    await expect(createMultiheadAttention({ embedDim: 8, numHeads: 2, weights: { outProjWeight: randomTensor([8, 8], 1) } })).rejects.toThrow(TypeError);
    await expect(
      createMultiheadAttention({ embedDim: 8, numHeads: 2, weights: { inProjWeight: randomTensor([8, 8], 1), outProjWeight: randomTensor([8, 8], 1) } }),
    ).rejects.toThrow(/inProjWeight must have shape \[24, 8\]/);
    const mha = await createMultiheadAttention({ embedDim: 8, numHeads: 2, batchFirst: true });
    const x = randomTensor([2, 3, 8], 1);
    expect(() => mha.forward(x, randomTensor([3, 4, 8], 2), randomTensor([3, 4, 8], 3))).toThrow(/key must have shape \[2, S, 8\]/);
    expect(() => mha.forward(x, x, x, { keyPaddingMask: { data: new Uint8Array(3), shape: [3] } })).toThrow(/keyPaddingMask must have shape \[2, 3\]/);
    expect(() => mha.forward(x, x, x, { attnMask: { data: new Uint8Array(4), shape: [2, 2] } as MaskTensor })).toThrow(RangeError);
    mha.dispose();
  });

  it('rejects unknown option names of the config, its weights, forward and dropout, naming the closest known name', async () => {
    const typo = (options: Record<string, unknown>): never => options as never;
    await expect(createMultiheadAttention(typo({ embedDim: 8, numHeads: 2, num_kv_heads: 1 }))).rejects.toThrow(
      /^unknown option 'num_kv_heads' of createMultiheadAttention; did you mean 'numKvHeads'\? \(known: embedDim, numHeads, numKvHeads, kdim, vdim, bias, batchFirst, weights, seed, backend\)$/,
    );
    await expect(createMultiheadAttention(typo({ embedDim: 8, numHeads: 2, batch_first: true }))).rejects.toThrow(/did you mean 'batchFirst'/);
    const outProjWeight = randomTensor([8, 8], 1);
    // An entry set to undefined is still checked by name.
    for (const weights of [{ outProjWeight, outProjBais: randomTensor([8], 2) }, { outProjWeight, outProjBais: undefined }]) {
      await expect(createMultiheadAttention(typo({ embedDim: 8, numHeads: 2, weights }))).rejects.toThrow(
        /unknown option 'outProjBais' of createMultiheadAttention options.weights; did you mean 'outProjBias'\? \(known: inProjWeight, inProjBias, /,
      );
    }
    const mha = await createMultiheadAttention({ embedDim: 8, numHeads: 2, batchFirst: true, backend: 'scalar' });
    const x = randomTensor([2, 3, 8], 3);
    const bad: [() => unknown, RegExp][] = [
      [() => mha.forward(x, x, x, typo({ keyPaddingMsk: null })), /unknown option 'keyPaddingMsk' of MultiheadAttention.forward; did you mean 'keyPaddingMask'\?/],
      [() => mha.forward(x, x, x, typo({ need_weights: false })), /unknown option 'need_weights' of MultiheadAttention.forward; did you mean 'needWeights'\?/],
      [() => mha.forward(x, x, x, typo({ isCasual: true })), /did you mean 'isCausal'\? \(known: keyPaddingMask, attnMask, isCausal, needWeights, averageAttnWeights, dropout, softcap, keyLengths, window, alibi, alibiSlopes, sinks, queryDocuments, keyDocuments\)/],
      [() => mha.forward(x, x, x, typo({ dropout: { P: 0.5, seed: 1 } })), /unknown option 'P' of MultiheadAttention.forward options.dropout; did you mean 'p'\?/],
    ];
    for (const [call, message] of bad) {
      expect(call).toThrow(TypeError);
      expect(call).toThrow(message);
    }
    expect(mha.forward(x, x, x, { isCausal: true, needWeights: false }).output.shape).toEqual([2, 3, 8]);
    mha.dispose();
  });
});

// ---- score functions ------------------------------------------------------------------------------

function scores64(q: Tensor, k: Tensor, o: ScoreOptions): Float64Array {
  const [Lq, Dq] = q.shape as [number, number];
  const [Lk, Dk] = k.shape as [number, number];
  const s = new Float64Array(Lq * Lk);
  for (let i = 0; i < Lq; i++) {
    for (let j = 0; j < Lk; j++) {
      let x = 0;
      if (o.kind === 'dot' || o.kind === 'scaled-dot') {
        for (let e = 0; e < Dq; e++) x += q.data[i * Dq + e]! * k.data[j * Dk + e]!;
        if (o.kind === 'scaled-dot') x *= Math.fround(o.scale ?? 1 / Math.sqrt(Dk));
      } else if (o.kind === 'multiplicative') {
        for (let a = 0; a < Dq; a++) for (let c = 0; c < Dk; c++) x += q.data[i * Dq + a]! * o.w!.data[a * Dk + c]! * k.data[j * Dk + c]!;
      } else {
        const Hd = o.v!.shape[0]!;
        for (let h = 0; h < Hd; h++) {
          let z = 0;
          for (let e = 0; e < Dq; e++) z += o.w1!.data[h * Dq + e]! * q.data[i * Dq + e]!;
          for (let e = 0; e < Dk; e++) z += o.w2!.data[h * Dk + e]! * k.data[j * Dk + e]!;
          x += o.v!.data[h]! * Math.tanh(z);
        }
      }
      s[i * Lk + j] = x;
    }
  }
  return s;
}

describe('score functions', () => {
  const grid = (t: Tensor): Tensor => ({ data: t.data.map((x) => Math.round(x * 256) / 256), shape: t.shape });
  const q = grid(randomTensor([3, 4], 1)), k4 = grid(randomTensor([5, 4], 2)), k6 = grid(randomTensor([5, 6], 3));
  const kinds: [ScoreOptions, Tensor][] = [
    [{ kind: 'dot' }, k4],
    [{ kind: 'scaled-dot' }, k4],
    [{ kind: 'multiplicative', w: grid(randomTensor([4, 6], 4)) }, k6],
    [{ kind: 'additive', w1: grid(randomTensor([3, 4], 5)), w2: grid(randomTensor([3, 6], 6)), v: grid(randomTensor([3], 7)) }, k6],
  ];

  for (const [options, k] of kinds) {
    it(`${options.kind}: scores match float64, weights are their softmax, gradients match finite differences`, () => {
      const r = attn.attentionScores(q, k, options);
      expect(r.scores.shape).toEqual([3, 5]);
      expectClose(r.scores.data, scores64(q, k, options), 'scores', 2e-6);
      for (let i = 0; i < 3; i++) {
        const sum = r.weights.data.subarray(i * 5, i * 5 + 5).reduce((s, w) => s + w, 0);
        expect(Math.abs(sum - 1)).toBeLessThan(1e-6);
      }
      const dS = randomTensor([3, 5], 8);
      const g = attn.attentionScoresBackward(q, k, dS, options);
      const loss = () => scores64(q, k, options).reduce((s, x, i) => s + x * dS.data[i]!, 0);
      const params: [string, Tensor | undefined, Tensor | undefined][] = [
        ['dQuery', q, g.dQuery], ['dKey', k, g.dKey], ['dW', options.w, g.dW], ['dW1', options.w1, g.dW1], ['dW2', options.w2, g.dW2], ['dV', options.v, g.dV],
      ];
      for (const [name, x, grad] of params) {
        if (!x) continue;
        expect(grad, name).toBeDefined();
        for (let i = 0; i < x.data.length; i++) {
          const numeric = centralDifference(x, i, loss);
          expect(Math.abs(grad!.data[i]! - numeric), `${options.kind} ${name}[${i}]`).toBeLessThanOrEqual(1e-5 + 1e-4 * Math.abs(numeric));
        }
      }
    });
  }

  it('scaled-dot scores equal the attention explainer\'s scaled scores', async () => {
    const stages = await attn.explain(q, k4, randomTensor([5, 2], 1));
    expect(attn.attentionScores(q, k4, { kind: 'scaled-dot' }).scores.data).toEqual(stages.scaledScores.data);
  });

  it('rejects bad kinds and parameter shapes', () => {
    expect(() => attn.attentionScores(q, k4, { kind: 'cosine' as never })).toThrow(TypeError);
    expect(() => attn.attentionScores(q, k6, { kind: 'dot' })).toThrow(/Dq = Dk/);
    expect(() => attn.attentionScores(q, k6, { kind: 'multiplicative', w: randomTensor([6, 4], 1) })).toThrow(/w of shape \[Dq, Dk\] = \[4, 6\]/);
    expect(() => attn.attentionScores(q, k6, { kind: 'additive', w1: randomTensor([3, 4], 1), w2: randomTensor([3, 6], 1) })).toThrow(/v of shape/);
    expect(() => attn.attentionScoresBackward(q, k4, randomTensor([3, 4], 1), { kind: 'dot' })).toThrow(/dScores/);
  });
});
