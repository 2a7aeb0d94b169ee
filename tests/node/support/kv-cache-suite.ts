// The one KV-cache test body every backend runs (tests/node/kv-cache-<backend>.test.ts): a cache
// grown by a prompt and then token by token, ragged batches, overflow, reset, GQA, option names,
// use after dispose, and the heap staying flat. Expected values come from the float64
// reference on the same keys and values as dense tensors (the concatenation of what was appended;
// for an int8/int4 cache, as the cache holds them, with the query as its scores take it:
// support/quantized.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttention, KvCache, type Attention, type AttentionOptions, type AttentionResult, type KvCacheDType, type Tensor } from 'sdpa-web';
import { asCached, asScoredQuery } from './quantized.js';
import { randomTensor } from './tensors.js';
import { expectResultMatchesReference } from './tolerance.js';

export interface KvCacheSuiteOptions {
  /** f of the tolerance rule (support/tolerance.ts). */
  factor: number;
  /** Creates the backend under test. */
  create: () => Promise<Attention>;
  /** Element type of every cache the suite makes; default 'float32'. */
  dtype?: KvCacheDType;
}

/** The tokens appended so far, per sequence, as the dense tensors the oracle reads. */
class Appended {
  readonly rows: number[][][][];  // [b][h][token] -> E floats (key) ...
  readonly valueRows: number[][][][];
  constructor(readonly B: number, readonly H: number, readonly E: number, readonly Ev: number) {
    this.rows = Array.from({ length: B }, () => Array.from({ length: H }, () => []));
    this.valueRows = Array.from({ length: B }, () => Array.from({ length: H }, () => []));
  }
  append(key: Tensor, value: Tensor, lengths?: readonly number[]): void {
    const n = key.shape[2]!;
    for (let b = 0; b < this.B; b++) {
      for (let h = 0; h < this.H; h++) {
        for (let t = 0; t < (lengths ? lengths[b]! : n); t++) {
          const row = (b * this.H + h) * n + t;
          this.rows[b]![h]!.push(Array.from(key.data.subarray(row * this.E, (row + 1) * this.E)));
          this.valueRows[b]![h]!.push(Array.from(value.data.subarray(row * this.Ev, (row + 1) * this.Ev)));
        }
      }
    }
  }
  lengths(): Int32Array {
    return Int32Array.from(this.rows.map((heads) => heads[0]!.length));
  }
  /** Keys and values [B, H, max length, E|Ev] (zeros past a sequence's length). */
  dense(): { key: Tensor; value: Tensor } {
    const L = Math.max(...this.lengths());
    const pack = (rows: number[][][][], dim: number): Tensor => {
      const data = new Float32Array(this.B * this.H * L * dim);
      rows.forEach((heads, b) => heads.forEach((tokens, h) => tokens.forEach((row, t) => data.set(row, ((b * this.H + h) * L + t) * dim))));
      return { data, shape: [this.B, this.H, L, dim] };
    };
    return { key: pack(this.rows, this.E), value: pack(this.valueRows, this.Ev) };
  }
}

export function defineKvCacheSuite(label: string, { factor, create, dtype = 'float32' }: KvCacheSuiteOptions): void {
  describe(`KV cache (${dtype}) on ${label}`, () => {
    let attn: Attention;
    let oracle: Attention;
    const B = 2, Hq = 8, Hkv = 2, E = 16, Ev = 12;
    let seed = 1;
    const draw = (shape: number[]) => randomTensor(shape, seed++, -2, 2);

    beforeAll(async () => {
      attn = await create();
      oracle = await createAttention({ backend: 'scalar' });
    });
    afterAll(() => {
      attn.dispose();
      oracle.dispose();
    });

    /** The cache call against the float64 reference on the dense tensors of what was appended. */
    async function expectCacheCall(cache: KvCache, appended: Appended, query: Tensor, options: AttentionOptions, what: string): Promise<AttentionResult> {
      const got = await attn.scaledDotProductAttention(query, cache, options);
      const dense = appended.dense();
      const key = asCached(dense.key, dtype), value = asCached(dense.value, dtype);
      const lengths = appended.lengths();
      const ragged = lengths.some((n) => n !== lengths[0]);
      const denseOptions: AttentionOptions = {
        ...options,
        isCausal: options.isCausal === true ? 'bottom-right' : options.isCausal,
        keyLengths: options.keyLengths ?? (ragged ? lengths : undefined),
      };
      expectResultMatchesReference(got, oracle, asScoredQuery(query, dtype), key, value, denseOptions, factor, what);
      return got;
    }

    it('a prompt, then token by token, matches the reference at every step (lengths straddling the chunks and splits)', async () => {
      const cache = attn.createKvCache({ batch: B, kvHeads: Hkv, maxLength: 600, headDim: E, valueDim: Ev, dtype });
      const appended = new Appended(B, Hkv, E, Ev);
      const prompt = { key: draw([B, Hkv, 62, E]), value: draw([B, Hkv, 62, Ev]) };
      cache.append(prompt.key, prompt.value);
      appended.append(prompt.key, prompt.value);
      await expectCacheCall(cache, appended, draw([B, Hq, 62, E]), { isCausal: true, enableGqa: true }, 'prefill of 62');
      const step = async () => {
        const key = draw([B, Hkv, 1, E]), value = draw([B, Hkv, 1, Ev]);
        cache.append(key, value);
        appended.append(key, value);
        expect(cache.length).toBe(appended.lengths()[0]);
        await expectCacheCall(cache, appended, draw([B, Hq, 1, E]), { isCausal: true, enableGqa: true }, `step to ${cache.length}`);
      };
      for (const target of [66, 258, 514]) {
        if (cache.length < target - 4) {
          const n = target - 4 - cache.length;
          const key = draw([B, Hkv, n, E]), value = draw([B, Hkv, n, Ev]);
          cache.append(key, value);
          appended.append(key, value);
        }
        while (cache.length < target) await step();
        // Several query rows on the cache (draft tokens to verify, a chunk of a prompt): 12, 64 and
        // 68 rows per KV head (an int8/int4 cache is read in place by the decode kernel up to 64,
        // dequantized for the tile kernel beyond).
        for (const rows of [3, 16, 17]) {
          await expectCacheCall(cache, appended, draw([B, Hq, rows, E]), { isCausal: true, enableGqa: true }, `${rows} query rows at ${cache.length}`);
        }
      }
      // Token by token equals one append of the concatenation, bit for bit.
      const whole = attn.createKvCache({ batch: B, kvHeads: Hkv, maxLength: 600, headDim: E, valueDim: Ev, dtype });
      const { key, value } = appended.dense();
      whole.append(key, value);
      const query = draw([B, Hq, 1, E]);
      for (const options of [{ enableGqa: true }, { enableGqa: true, softcap: 5, window: { left: 100 } }] as AttentionOptions[]) {
        const a = await attn.scaledDotProductAttention(query, cache, options);
        const b = await attn.scaledDotProductAttention(query, whole, options);
        expect(a.output.data).toEqual(b.output.data);
        await expectCacheCall(cache, appended, query, options, `one call, ${JSON.stringify(options)}`);
      }
      cache.dispose();
      whole.dispose();
    });

    it('ragged batches: append lengths, and keyLengths within them', async () => {
      const cache = attn.createKvCache({ batch: 3, kvHeads: Hkv, maxLength: 400, headDim: E, valueDim: Ev, dtype });
      const appended = new Appended(3, Hkv, E, Ev);
      const add = (n: number, lengths: number[]) => {
        const key = draw([3, Hkv, n, E]), value = draw([3, Hkv, n, Ev]);
        cache.append(key, value, { lengths: lengths.length % 2 ? Int32Array.from(lengths) : lengths });
        appended.append(key, value, lengths);
      };
      add(300, [300, 0, 130]);
      expect(Array.from(cache.lengths)).toEqual([300, 0, 130]);
      expect(cache.length).toBe(300);
      for (const options of [{ isCausal: true }, {}, { isCausal: true, window: { left: 64 } }] as AttentionOptions[]) {
        await expectCacheCall(cache, appended, draw([3, Hq, 1, E]), { ...options, enableGqa: true }, `ragged ${JSON.stringify(options)}`);
      }
      add(2, [1, 2, 0]);
      await expectCacheCall(cache, appended, draw([3, Hq, 2, E]), { isCausal: true, enableGqa: true }, 'two queries, ragged');
      await expectCacheCall(cache, appended, draw([3, Hq, 1, E]), { enableGqa: true, keyLengths: Int32Array.from([200, 1, 0]) }, 'keyLengths within the cache');
      await expect(attn.scaledDotProductAttention(draw([3, Hq, 1, E]), cache, { enableGqa: true, keyLengths: Int32Array.from([302, 0, 0]) })).rejects.toThrow(RangeError);
      await expect(attn.scaledDotProductAttention(draw([3, Hq, 1, E]), cache, { enableGqa: true, keyLengths: Int32Array.from([1, 3, 0]) })).rejects.toThrow(/keyLengths\[1\] = 3 is more than the 2 tokens/);
      expect(() => cache.append(draw([3, Hkv, 2, E]), draw([3, Hkv, 2, Ev]), { lengths: [1, 3, 0] })).toThrow(/lengths\[1\] must be an integer in \[0, n = 2\]/);
      expect(() => cache.append(draw([3, Hkv, 2, E]), draw([3, Hkv, 2, Ev]), { lengths: [1, 1] })).toThrow(RangeError);
      cache.dispose();
    });

    it('overflow is a RangeError with nothing written; reset empties the cache', async () => {
      const cache = attn.createKvCache({ batch: 1, kvHeads: 2, maxLength: 10, headDim: 8, dtype });
      expect(cache.valueDim).toBe(8);
      const appended = new Appended(1, 2, 8, 8);
      const key = draw([1, 2, 8, 8]), value = draw([1, 2, 8, 8]);
      cache.append(key, value);
      appended.append(key, value);
      const query = draw([1, 2, 1, 8]);
      const before = await expectCacheCall(cache, appended, query, {}, 'before the overflow');
      expect(() => cache.append(draw([1, 2, 3, 8]), draw([1, 2, 3, 8]))).toThrow(/sequence 0 holds 8 tokens; 3 more would pass maxLength = 10 \(nothing was written\)/);
      expect(cache.length).toBe(8);
      expect((await attn.scaledDotProductAttention(query, cache)).output.data).toEqual(before.output.data);
      cache.reset();
      expect(cache.length).toBe(0);
      expect(Array.from(cache.lengths)).toEqual([0]);
      // No tokens: every row sees nothing and gets zeros.
      expect(Array.from((await attn.scaledDotProductAttention(query, cache)).output.data).every((x) => x === 0)).toBe(true);
      const fresh = new Appended(1, 2, 8, 8);
      const k2 = draw([1, 2, 10, 8]), v2 = draw([1, 2, 10, 8]);
      cache.append(k2, v2);
      fresh.append(k2, v2);
      await expectCacheCall(cache, fresh, draw([1, 2, 3, 8]), { isCausal: true }, 'after reset, full');
      cache.dispose();
    });

    it('bad input: GQA without enableGqa, shapes, option names, another module', async () => {
      const cache = attn.createKvCache({ batch: 1, kvHeads: 2, maxLength: 16, headDim: 8, valueDim: 4, dtype });
      cache.append(draw([1, 2, 3, 8]), draw([1, 2, 3, 4]));
      await expect(attn.scaledDotProductAttention(draw([1, 4, 1, 8]), cache)).rejects.toThrow(/enableGqa/);
      await expect(attn.scaledDotProductAttention(draw([4, 1, 8]), cache)).rejects.toThrow(/query must have shape \[B, Hq, Lq, E\] with a KV cache/);
      await expect(attn.scaledDotProductAttention(draw([1, 2, 1, 7]), cache)).rejects.toThrow(RangeError);
      await expect(attn.scaledDotProductAttention(draw([1, 2, 1, 8]), cache, { isCasual: true } as AttentionOptions)).rejects.toThrow(/did you mean 'isCausal'/);
      expect(() => cache.append(draw([1, 2, 1, 8]), draw([1, 2, 1, 8]))).toThrow(/value must have shape \[B, Hkv, n, Ev\] = \[1, 2, n, 4\]/);
      expect(() => cache.append(draw([1, 2, 0, 8]), draw([1, 2, 0, 4]))).toThrow(RangeError);
      expect(() => cache.append(draw([1, 2, 1, 8]), draw([1, 2, 1, 4]), { length: [1] } as never)).toThrow(/did you mean 'lengths'/);
      expect(() => attn.createKvCache({ batch: 1, kvHeads: 1, maxLen: 4, headDim: 4 } as never)).toThrow(/did you mean 'maxLength'/);
      expect(() => attn.createKvCache({ batch: 1, kvHeads: 1, maxLength: 0, headDim: 4, dtype })).toThrow(/maxLength must be an integer ≥ 1/);
      expect(() => attn.createKvCache({ batch: 1, kvHeads: 1, maxLength: 2 ** 20, headDim: 2 ** 11, dtype })).toThrow(/more than 2\^30 elements/);
      await expect(attn.scaledDotProductAttentionBackward(draw([1, 2, 1, 8]), cache as never, draw([1, 2, 3, 4]), draw([1, 2, 1, 4]))).rejects.toThrow(/not a KvCache/);
      // The float64 reference reads a cache in wasm memory; a GPU cache's tokens are on the GPU.
      if (attn.backend === 'webgpu') expect(() => attn.referenceAttention(draw([1, 2, 1, 8]), cache)).toThrow(/referenceAttention reads a KvCache in wasm memory/);
      else expect(attn.referenceAttention(draw([1, 2, 1, 8]), cache).output.shape).toEqual([1, 2, 1, 4]);
      expect(cache.length).toBe(3);
      cache.dispose();
    });

    it('use after dispose is a clear error', async () => {
      const cache = attn.createKvCache({ batch: 1, kvHeads: 1, maxLength: 4, headDim: 4, dtype });
      cache.dispose();
      const disposed = /this KvCache was disposed/;
      expect(() => cache.append(draw([1, 1, 1, 4]), draw([1, 1, 1, 4]))).toThrow(disposed);
      expect(() => cache.length).toThrow(disposed);
      expect(() => cache.lengths).toThrow(disposed);
      expect(() => cache.reset()).toThrow(disposed);
      expect(() => cache.dispose()).toThrow(disposed);
      await expect(attn.scaledDotProductAttention(draw([1, 1, 1, 4]), cache)).rejects.toThrow(disposed);
      expect(() => attn.referenceAttention(draw([1, 1, 1, 4]), cache)).toThrow(disposed);
      expect(cache).toBeInstanceOf(KvCache);
    });

    it('the heap stays flat: 32 decode steps, 10,000 append/reset cycles, create/dispose', async () => {
      const baseline = attn.memoryStats().heapBytesInUse;
      const cache = attn.createKvCache({ batch: 1, kvHeads: Hkv, maxLength: 128, headDim: E, valueDim: Ev, dtype });
      const key = draw([1, Hkv, 1, E]), value = draw([1, Hkv, 1, Ev]), query = draw([1, Hq, 1, E]);
      const out = new Float32Array(Hq * Ev);
      const heap: number[] = [];
      for (let step = 0; step < 32; step++) {
        cache.append(key, value);
        await attn.scaledDotProductAttention(query, cache, { enableGqa: true, isCausal: true, out });
        heap.push(attn.memoryStats().heapBytesInUse);
      }
      expect(new Set(heap).size, `heap bytes per step: ${heap.join(', ')}`).toBe(1);
      const held = attn.memoryStats().heapBytesInUse;
      for (let cycle = 0; cycle < 10_000; cycle++) {
        cache.append(key, value);
        cache.reset();
      }
      expect(attn.memoryStats().heapBytesInUse).toBe(held);
      cache.dispose();
      for (let cycle = 0; cycle < 200; cycle++) attn.createKvCache({ batch: 2, kvHeads: 2, maxLength: 64, headDim: 8, dtype }).dispose();
      expect(attn.memoryStats().heapBytesInUse).toBe(baseline);
    });
  });
}
