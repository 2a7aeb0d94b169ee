// The generation example (web/examples/generate): a seeded 4-layer GQA decoder generating 64 tokens
// with one KV cache per layer, on every backend. Checked three ways:
// - every attention call of the cached path (the prefill and each step's query row over the cache)
//   against the float64 reference on the keys and values appended so far (the tolerance rule);
// - the tokens and the last step's logits against the same model recomputing full causal attention
//   over the whole sequence at every step (its MultiheadAttention modules);
// - both paths' logits against the model computed in float64 (JavaScript doubles, attention by the
//   float64 reference), within 2·e_ref + 1e-5·max(1, |logits|max), e_ref the error of the
//   'scalar' backend's float32 full path.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttention, maxAbsDiff, toleranceBound, type Attention, type Tensor } from 'sdpa-web';
import { argmax, DECODER_CONFIG, Decoder, gelu, type AttentionEvent } from '../../web/examples/generate/decoder.js';
import { expectResultMatchesReference } from './support/tolerance.js';
import { gpu } from './support/webgpu.js';

const PROMPT = 'The cache grows by one row per token.';
const COUNT = 64;

/** x `[n, din]` times W: `[din, dout]` (`transposed`: W given as `[dout, din]`), in float64. */
function linear64(x: Float64Array, n: number, w: Tensor, transposed = false): Float64Array {
  const [r, c] = w.shape as [number, number];
  const [din, dout] = transposed ? [c, r] : [r, c];
  const out = new Float64Array(n * dout);
  for (let i = 0; i < n; i++) {
    for (let o = 0; o < dout; o++) {
      let s = 0;
      for (let k = 0; k < din; k++) s += x[i * din + k]! * w.data[transposed ? o * din + k : k * dout + o]!;
      out[i * dout + o] = s;
    }
  }
  return out;
}

function rmsNorm64(x: Float64Array, d: number): Float64Array {
  const out = new Float64Array(x.length);
  for (let r = 0; r < x.length / d; r++) {
    let ss = 0;
    for (let i = 0; i < d; i++) ss += x[r * d + i]! ** 2;
    const k = 1 / Math.sqrt(ss / d + 1e-5);
    for (let i = 0; i < d; i++) out[r * d + i] = x[r * d + i]! * k;
  }
  return out;
}

/** `[L, H·E]` → `[1, H, L, E]`, rounded to float32 (the reference's input type). */
function headsOf(x: Float64Array, L: number, heads: number): Tensor {
  const e = x.length / L / heads;
  const data = new Float32Array(x.length);
  for (let r = 0; r < L; r++) for (let h = 0; h < heads; h++) for (let i = 0; i < e; i++) data[(h * L + r) * e + i] = x[r * heads * e + h * e + i]!;
  return { data, shape: [1, heads, L, e] };
}

/**
 * The decoder's logits `[L·vocab]` at every position, in float64 from its float32 weights; attention
 * by the float64 reference (its q, k, v rounded to float32 on the way in, as its API takes them).
 */
function logits64(decoder: Decoder, oracle: Attention, tokens: readonly number[]): Float64Array {
  const { dModel: d, heads, kvHeads } = decoder.config;
  const w = decoder.weights;
  const L = tokens.length, e = d / heads;
  const x = new Float64Array(L * d);
  tokens.forEach((t, r) => {
    for (let i = 0; i < d; i++) x[r * d + i] = w.embedding.data[t * d + i]! + w.positions.data[r * d + i]!;
  });
  for (const layer of w.layers) {
    const xn = rmsNorm64(x, d);
    const q = headsOf(linear64(xn, L, layer.wQ, true), L, heads);
    const k = headsOf(linear64(xn, L, layer.wK, true), L, kvHeads);
    const v = headsOf(linear64(xn, L, layer.wV, true), L, kvHeads);
    const o = oracle.referenceAttention(q, k, v, { isCausal: true, enableGqa: true }).output.data;
    const merged = new Float64Array(L * d);
    for (let h = 0; h < heads; h++) for (let r = 0; r < L; r++) for (let i = 0; i < e; i++) merged[r * d + h * e + i] = o[(h * L + r) * e + i]!;
    const attended = linear64(merged, L, layer.wO, true);
    for (let i = 0; i < x.length; i++) x[i]! += attended[i]!;
    const hidden = linear64(rmsNorm64(x, d), L, layer.w1).map(gelu);
    const out = linear64(hidden, L, layer.w2);
    for (let i = 0; i < x.length; i++) x[i]! += out[i]!;
  }
  return linear64(rmsNorm64(x, d), L, w.head);
}

/** The keys and values a layer's cache was given, as dense `[1, Hkv, length, E]` tensors. */
class Appended {
  private keys: Float32Array[] = [];
  private values: Float32Array[] = [];
  constructor(private readonly kvHeads: number, private readonly e: number) {
    for (let h = 0; h < kvHeads; h++) {
      this.keys.push(new Float32Array(0));
      this.values.push(new Float32Array(0));
    }
  }
  add(key: Tensor, value: Tensor): void {
    const n = key.shape[2]!, block = n * this.e;
    const grow = (a: Float32Array, b: Float32Array) => {
      const out = new Float32Array(a.length + b.length);
      out.set(a);
      out.set(b, a.length);
      return out;
    };
    for (let h = 0; h < this.kvHeads; h++) {
      this.keys[h] = grow(this.keys[h]!, key.data.subarray(h * block, (h + 1) * block));
      this.values[h] = grow(this.values[h]!, value.data.subarray(h * block, (h + 1) * block));
    }
  }
  dense(): { key: Tensor; value: Tensor } {
    const length = this.keys[0]!.length / this.e;
    const pack = (rows: Float32Array[]) => {
      const data = new Float32Array(this.kvHeads * length * this.e);
      rows.forEach((r, h) => data.set(r, h * length * this.e));
      return { data, shape: [1, this.kvHeads, length, this.e] };
    };
    return { key: pack(this.keys), value: pack(this.values) };
  }
}

const BACKENDS: [string, () => Promise<Attention>, number][] = [
  ["'simd' (threads)", () => createAttention({ backend: 'simd' }), 2],
  ["'simd' (1 thread)", () => createAttention({ backend: 'simd', threads: 1 }), 2],
  ["'scalar'", () => createAttention({ backend: 'scalar' }), 2],
  ["'webgpu'", () => createAttention({ backend: 'webgpu', gpu }), 4],
];

describe('the generation example', () => {
  let oracle: Attention;
  let scalar: Decoder;
  let prompt: number[];
  let expected: { tokens: number[]; logits64: Float64Array; eRef: number };

  beforeAll(async () => {
    oracle = await createAttention({ backend: 'scalar' });
    scalar = await Decoder.create(DECODER_CONFIG, { backend: 'scalar' });
    prompt = scalar.encode(PROMPT);
    // The float64 model's greedy tokens, and e_ref: the scalar float32 full path's error in the last position's logits.
    const tokens: number[] = [];
    let all: Float64Array = new Float64Array(0);
    const V = DECODER_CONFIG.vocab.length;
    const seq = [...prompt];
    for (let i = 0; i < COUNT; i++) {
      all = logits64(scalar, oracle, seq);
      tokens.push(argmax(all.subarray(all.length - V)));
      seq.push(tokens[i]!);
    }
    seq.pop();
    const f32 = scalar.logitsFull(seq);
    expected = { tokens, logits64: all, eRef: maxAbsDiff(f32.subarray(f32.length - V), all.subarray(all.length - V)) };
    expect(expected.eRef).toBeGreaterThan(0);
  });

  afterAll(() => {
    scalar?.dispose();
    oracle?.dispose();
  });

  it('the float64 model does not generate one token over and over', () => {
    expect(new Set(expected.tokens).size).toBeGreaterThan(8);
  });

  for (const [label, create, factor] of BACKENDS) {
    it(`on ${label}: the cached path's attention matches the float64 reference at every step, and its tokens and last logits the full recomputation's`, async () => {
      const attn = await create();
      const decoder = await Decoder.create(DECODER_CONFIG, { attention: attn });
      try {
        const { kvHeads, dModel, heads, vocab } = decoder.config;
        const appended = Array.from({ length: DECODER_CONFIG.layers }, () => new Appended(kvHeads, dModel / heads));
        const events: AttentionEvent[] = [];
        const run = await decoder.generate(prompt, COUNT, {
          onAttention: (ev) => {
            appended[ev.layer]!.add(ev.key, ev.value);
            const { key, value } = appended[ev.layer]!.dense();
            expect(ev.cacheLength).toBe(key.shape[2]);
            expectResultMatchesReference({ output: ev.output }, oracle, ev.query, key, value, { isCausal: 'bottom-right', enableGqa: true }, factor, `layer ${ev.layer} at ${ev.start}`);
            events.push(ev);
          },
        });
        // A prefill and 63 one-row steps in each layer.
        expect(events.length).toBe(COUNT * DECODER_CONFIG.layers);
        expect(events.filter((ev) => ev.start > 0).every((ev) => ev.query.shape[2] === 1)).toBe(true);
        expect(events[events.length - 1]!.cacheLength).toBe(prompt.length + COUNT - 1);

        const full = decoder.generateFull(prompt, COUNT);
        expect(run.tokens).toEqual(full.tokens);
        expect(run.tokens).toEqual(expected.tokens);
        // The last step's logits, cached and full, against the float64 model's.
        const last64 = expected.logits64.subarray(expected.logits64.length - vocab.length);
        const bound = toleranceBound(expected.eRef, factor, last64);
        for (const [name, logits] of [['cached', run.logits], ['full', full.logits]] as const) {
          const err = maxAbsDiff(logits, last64);
          expect(err, `${name} logits error ${err} > ${bound} (e_ref ${expected.eRef})`).toBeLessThanOrEqual(bound);
        }
        // Every position's greedy choice: the float64 model's margin over the runner-up is above the bound.
        const V = vocab.length;
        for (let p = prompt.length - 1; p < prompt.length + COUNT - 1; p++) {
          const row = [...expected.logits64.subarray(p * V, (p + 1) * V)].sort((a, b) => b - a);
          expect(row[0]! - row[1]!, `position ${p}: a near tie`).toBeGreaterThan(2 * bound);
        }
      } finally {
        decoder.dispose();
        attn.dispose();
      }
    });
  }

  it('steps ask for the weights: each new row is the softmax of the query row over the whole cache', async () => {
    const attn = await createAttention({ backend: 'simd' });
    const decoder = await Decoder.create(DECODER_CONFIG, { attention: attn });
    try {
      const rows: AttentionEvent[] = [];
      const run = await decoder.generate(prompt, 8, { returnWeights: true, onAttention: (ev) => rows.push(ev) });
      expect(run.tokens).toEqual(expected.tokens.slice(0, 8));
      for (const ev of rows.filter((r) => r.start > 0)) {
        expect(ev.weights!.shape).toEqual([1, DECODER_CONFIG.heads, 1, ev.cacheLength]);
        for (let h = 0; h < DECODER_CONFIG.heads; h++) {
          const sum = ev.weights!.data.subarray(h * ev.cacheLength, (h + 1) * ev.cacheLength).reduce((a, b) => a + b, 0);
          expect(Math.abs(sum - 1)).toBeLessThan(1e-5);
        }
      }
    } finally {
      decoder.dispose();
      attn.dispose();
    }
  });

  it('a prompt longer than the caches is a RangeError; the heap is flat after generating', async () => {
    const attn = await createAttention({ backend: 'simd' });
    const decoder = await Decoder.create(DECODER_CONFIG, { attention: attn });
    try {
      await expect(decoder.generate(prompt, DECODER_CONFIG.maxLength)).rejects.toThrow(/maxLength is 256/);
      expect(() => decoder.encode('ü')).toThrow(/'ü' is not in the decoder's vocabulary/);
      await decoder.generate(prompt, 4);
      const before = attn.memoryStats().heapBytesInUse;
      await decoder.generate(prompt, COUNT);
      expect(attn.memoryStats().heapBytesInUse).toBe(before);
    } finally {
      decoder.dispose();
      attn.dispose();
    }
  });
});
