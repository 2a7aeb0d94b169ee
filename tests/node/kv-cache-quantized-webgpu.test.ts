// int8/int4 KV caches on the 'webgpu' backend (dawn.node on SwiftShader): appends quantized on the
// GPU (kv_quantize.wgsl) hold the bytes of the format (cpp/core/kv_cache_format.h, written out in
// support/quantized.ts) bit for bit, and those of a CPU cache fed the same rows (the core's
// quantizer), from float32 and float16 rows on the CPU and on the GPU;
// decode (split-K: where the device has subgroups the streaming kernel,
// attention_decode_stream_quantized.wgsl, else the tile kernel, attention_decode_quantized.wgsl,
// whose lanes combine through workgroup memory) and prefill (the flash kernels on the dequantized
// query) with every variant, each decode kernel on both integer dot product paths (dot4I8Packed and
// unpacked), against the float64 reference on the dequantized cache and the int8-quantized query;
// NaN/Inf appended; values near the largest float (a split whose l·o overflows is recomputed from
// the cache).
// The shared cache body on these dtypes: kv-cache-webgpu.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttention, fromFloat16, toFloat16, type Attention, type AttentionOptions, type GpuTensor, type KvCache, type Tensor, type TensorInput } from 'sdpa-web';
import { levelsOf, quantizedBytes, roundThroughBlocks } from './support/quantized.js';

type QuantKind = 'int8' | 'int4';
import { randomTensor } from './support/tensors.js';
import { expectResultMatchesReference } from './support/tolerance.js';
import { expectSubgroupsAsConfigured, gpu, testDevice } from './support/webgpu.js';

const STORAGE = 0x80, COPY_SRC = 0x4, COPY_DST = 0x8, MAP_READ = 0x1;
const KINDS: QuantKind[] = ['int8', 'int4'];

let device: GPUDevice;
let oracle: Attention;
// Decode kernels: packed and streamUnpacked stream (where the device has subgroups) on the two
// dot paths; unpacked and tilePacked run the tile kernel (no subgroups) on them.
let packed: Attention;
let unpacked: Attention;
let streamUnpacked: Attention;
let tilePacked: Attention;
let hasSubgroups: boolean;
beforeAll(async () => {
  device = await testDevice();
  hasSubgroups = expectSubgroupsAsConfigured(device);
  oracle = await createAttention({ backend: 'scalar' });
  packed = await createAttention({ backend: 'webgpu', gpuDevice: device, gpu });
  unpacked = await createAttention({ backend: 'webgpu', gpuDevice: device, gpu, gpuLimits: { packedIntegerDotProduct: false, subgroups: false } });
  streamUnpacked = await createAttention({ backend: 'webgpu', gpuDevice: device, gpu, gpuLimits: { packedIntegerDotProduct: false } });
  tilePacked = await createAttention({ backend: 'webgpu', gpuDevice: device, gpu, gpuLimits: { subgroups: false } });
});
afterAll(() => {
  packed.dispose();
  unpacked.dispose();
  streamUnpacked.dispose();
  tilePacked.dispose();
  oracle.dispose();
  device.destroy();
});

/** The cache's key and value GPUBuffers (the storage is internal: read here to check its bytes). */
function cacheBuffers(cache: KvCache): { keyBuffer: GPUBuffer; valueBuffer: GPUBuffer } {
  return (cache as unknown as { storage: { keyBuffer: GPUBuffer; valueBuffer: GPUBuffer } }).storage;
}

/** The first `keyBytes` and `valueBytes` of a CPU cache's keys and values in the wasm heap (internal, as above). */
function heapBytes(cache: KvCache, keyBytes: number, valueBytes: number): { key: Uint8Array; value: Uint8Array } {
  const storage = (cache as unknown as { storage: { module: { HEAPU8: Uint8Array }; keyAddress: number; valueAddress: number } }).storage;
  return {
    key: storage.module.HEAPU8.slice(storage.keyAddress, storage.keyAddress + keyBytes),
    value: storage.module.HEAPU8.slice(storage.valueAddress, storage.valueAddress + valueBytes),
  };
}

async function readBytes(buffer: GPUBuffer): Promise<Uint8Array> {
  const staging = device.createBuffer({ size: buffer.size, usage: MAP_READ | COPY_DST });
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(buffer, 0, staging, 0, buffer.size);
  device.queue.submit([encoder.finish()]);
  await staging.mapAsync(MAP_READ);
  const bytes = new Uint8Array(staging.getMappedRange().slice(0));
  staging.destroy();
  return bytes;
}

function toGpu(data: Float32Array | Uint16Array, offset: number): GPUBuffer {
  const buffer = device.createBuffer({ size: 4 * Math.ceil((offset + data.byteLength) / 4), usage: STORAGE | COPY_SRC | COPY_DST });
  // writeBuffer takes whole words: the data written from the word its offset is in.
  const start = offset & ~3;
  const padded = new Uint8Array(4 * Math.ceil((offset - start + data.byteLength) / 4));
  padded.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), offset - start);
  device.queue.writeBuffer(buffer, start, padded);
  return buffer;
}

/**
 * Rows of `dim` floats that stress the quantizer: random magnitudes over the float32 range,
 * quotients next to the rounding ties, subnormals, ±65504, the largest float, zero and constant
 * blocks, and (with `nonFinite`) NaN and ±Inf in a few blocks.
 */
function hardRows(count: number, dim: number, seed: number, nonFinite: boolean): Float32Array {
  const data = randomTensor([count, dim], seed, -1, 1).data;
  const random = randomTensor([count * dim], seed + 1, 0, 1).data;
  for (let r = 0; r < count; r++) {
    const row = data.subarray(r * dim, (r + 1) * dim);
    const kind = r % 8;
    const scale = 2 ** Math.round(random[r]! * 200 - 100);
    for (let e = 0; e < dim; e++) {
      const u = random[r * dim + e]!;
      if (kind === 0) row[e] = row[e]! * scale;
      else if (kind === 1) row[e] = Math.fround(((Math.round(u * 254) - 127 + 0.5) / 127) * 3.75);  // quotients next to ties
      else if (kind === 2) row[e] = row[e]! * 1e-39;  // subnormal
      else if (kind === 3) row[e] = e % 3 === 0 ? 65504 : e % 3 === 1 ? -65504 : row[e]! * 65504;
      else if (kind === 4) row[e] = e % 2 ? 3.4028234663852886e38 : -row[e]! * 1e38;
      else if (kind === 5) row[e] = e < 32 ? 0 : 0.75;  // a zero block, then constant ones
    }
    if (nonFinite && kind === 6) {
      row[0] = NaN;
      if (dim > 40) row[40] = Infinity;
    }
    if (nonFinite && kind === 7 && dim > 33) row[33] = -Infinity;
  }
  return data;
}

describe('appends quantize on the GPU bit for bit as the format', () => {
  const B = 2, Hkv = 3, maxLength = 11, E = 72, Ev = 40;
  for (const kind of KINDS) {
    for (const source of ['cpu float32', 'cpu float16', 'gpu float32', 'gpu float16'] as const) {
      it(`${kind} from ${source}: two appends (one ragged), every byte as the format and as the CPU's cache`, async () => {
        const cache = packed.createKvCache({ batch: B, kvHeads: Hkv, maxLength, headDim: E, valueDim: Ev, dtype: kind });
        const cpuCache = oracle.createKvCache({ batch: B, kvHeads: Hkv, maxLength, headDim: E, valueDim: Ev, dtype: kind });
        const rows: { key: number[][]; value: number[][] }[] = Array.from({ length: B * Hkv }, () => ({ key: [], value: [] }));
        const half = source.endsWith('float16');
        let seed = 10;
        for (const [n, lengths] of [[6, undefined], [4, [4, 1]]] as const) {
          const tensors = [[E, 'key'], [Ev, 'value']].map(([dim]) => {
            const floats = hardRows(B * Hkv * n, dim as number, seed++, true);
            // float16 sources: the halves nearest the rows (what the cache then quantizes, widened).
            return half ? toFloat16(floats) : floats;
          });
          const inputs = tensors.map((data, t) => {
            const dim = t === 0 ? E : Ev;
            const shape = [B, Hkv, n, dim];
            if (source.startsWith('cpu')) return half ? { data, shape, dtype: 'float16' as const } : { data: data as Float32Array, shape };
            // GPU sources at offsets that are not binding-aligned (halves: mid-word).
            const offset = half ? 258 : 260;
            const tensor: GpuTensor = { buffer: toGpu(data, offset), shape, offset, ...(half ? { dtype: 'float16' as const } : {}) };
            return tensor;
          });
          cache.append(inputs[0]!, inputs[1]!, lengths ? { lengths } : undefined);
          const cpuInputs = tensors.map((data, t): TensorInput => {
            const shape = [B, Hkv, n, t === 0 ? E : Ev];
            return half ? { data: data as Uint16Array, shape, dtype: 'float16' } : { data: data as Float32Array, shape };
          });
          cpuCache.append(cpuInputs[0]!, cpuInputs[1]!, lengths ? { lengths } : undefined);
          tensors.forEach((data, t) => {
            const floats = half ? fromFloat16(data as Uint16Array) : (data as Float32Array);
            const dim = t === 0 ? E : Ev;
            for (let head = 0; head < B * Hkv; head++) {
              const added = lengths ? lengths[Math.floor(head / Hkv)]! : n;
              for (let i = 0; i < added; i++) {
                const row = Array.from(floats.subarray((head * n + i) * dim, (head * n + i + 1) * dim));
                (t === 0 ? rows[head]!.key : rows[head]!.value).push(row);
              }
            }
          });
        }
        const { keyBuffer, valueBuffer } = cacheBuffers(cache);
        const expectedKey = quantizedBytes(kind, B * Hkv, maxLength, E, (h) => rows[h]!.key);
        const expectedValue = quantizedBytes(kind, B * Hkv, maxLength, Ev, (h) => rows[h]!.value);
        expect(cache.bytes).toBe(expectedKey.length + expectedValue.length);
        const gotKey = await readBytes(keyBuffer), gotValue = await readBytes(valueBuffer);
        expect(gotKey.subarray(0, expectedKey.length)).toEqual(expectedKey);
        expect(gotValue.subarray(0, expectedValue.length)).toEqual(expectedValue);
        const cpu = heapBytes(cpuCache, expectedKey.length, expectedValue.length);
        expect(gotKey.subarray(0, expectedKey.length)).toEqual(cpu.key);
        expect(gotValue.subarray(0, expectedValue.length)).toEqual(cpu.value);
        cache.dispose();
        cpuCache.dispose();
      });
    }
  }

  it('cache.bytes: levels and scales (int8 36, int4 20 bytes a block of 32)', () => {
    for (const [dtype, perBlock] of [['int8', 36], ['int4', 20]] as const) {
      const cache = packed.createKvCache({ batch: 1, kvHeads: 8, maxLength: 4096, headDim: 128, dtype });
      expect(cache.bytes).toBe(2 * 8 * 4096 * 4 * perBlock);
      cache.dispose();
    }
    const float = packed.createKvCache({ batch: 1, kvHeads: 8, maxLength: 4096, headDim: 128, dtype: 'float16' });
    expect(float.bytes).toBe(2 * 8 * 4096 * 128 * 2);
    float.dispose();
    expect(() => packed.createKvCache({ batch: 1, kvHeads: 1, maxLength: 4, headDim: 4, dtype: 'int2' as never })).toThrow(/dtype must be one of 'float32', 'float16', 'int8', 'int4'/);
  });
});

/**
 * Whether `attn` decoded on `kind` keys with the kernel its device and limits choose (the
 * streaming kernel with subgroups, else the tile kernel with lanes in workgroup memory), on the
 * dot path `dot4` ('packed' | 'unpack'), with `rows` rows a workgroup when given.
 */
function decodedWith(attn: Attention, kind: QuantKind, streaming: boolean, dot4: 'packed' | 'unpack', rows?: number): boolean {
  const kernel = streaming ? 'decode-stream-quantized:' : 'decode-partial-quantized:';
  return attn.webgpuInfo()!.pipelines.some((p) => p.startsWith(kernel) && p.includes(`:k=${kind === 'int8' ? 'i8' : 'i4'}:`) &&
    p.includes(`:dot4=${dot4}`) && p.endsWith(streaming ? ':subgroups' : ':wgmem') && (rows === undefined || p.includes(`:rows${rows}:`)));
}

/** A cache of `kind` holding key [B, Hkv, L, E] and value [B, Hkv, L, Ev], and the dequantized tensors the oracle reads. */
function filledCache(attn: Attention, kind: QuantKind, key: Tensor, value: Tensor, lengths?: number[]) {
  const [B, Hkv, L, E] = key.shape as [number, number, number, number];
  const Ev = value.shape[3]!;
  const cache = attn.createKvCache({ batch: B, kvHeads: Hkv, maxLength: L + 3, headDim: E, valueDim: Ev, dtype: kind });
  cache.append(key, value, lengths ? { lengths } : undefined);
  return { cache, key: { data: roundThroughBlocks(key.data, E, levelsOf(kind)), shape: key.shape }, value: { data: roundThroughBlocks(value.data, Ev, levelsOf(kind)), shape: value.shape } };
}

async function expectCacheMatches(attn: Attention, cache: KvCache, query: Tensor, key: Tensor, value: Tensor, options: AttentionOptions, label: string) {
  const got = await attn.scaledDotProductAttention(query, cache, options);
  const q = { data: roundThroughBlocks(query.data, query.shape[3]!, 127), shape: query.shape };
  const dense: AttentionOptions = { ...options, isCausal: options.isCausal === true ? 'bottom-right' : options.isCausal };
  expectResultMatchesReference(got, oracle, q, key, value, dense, 4, label);
  return got;
}

describe('attention reads the quantized cache in place', () => {
  const B = 2, Hq = 4, Hkv = 2, L = 300;
  const variants: [string, (Lq: number) => AttentionOptions][] = [
    ['causal', () => ({ isCausal: true })],
    ['window, softcap', () => ({ isCausal: true, window: { left: 70 }, softcap: 4 })],
    ['ALiBi, sinks', () => ({ alibi: true, sinks: Float32Array.from([0.5, -1, 2, 0]) })],
    ['keyLengths', () => ({ keyLengths: Int32Array.from([L, 131]) })],
    ['documents', (Lq) => ({
      queryDocuments: { data: Int32Array.from({ length: B * Lq }, (_, i) => (i % Lq) % 2), shape: [B, Lq] },
      keyDocuments: { data: Int32Array.from({ length: B * L }, (_, i) => Math.floor((i % L) / 100) % 2), shape: [B, L] },
    })],
    ['bool mask', (Lq) => ({ attnMask: { data: Uint8Array.from({ length: Lq * L }, (_, i) => (i * 7) % 5 !== 0 ? 1 : 0), shape: [Lq, L] } })],
    ['additive mask', (Lq) => ({ attnMask: { data: Float32Array.from({ length: Lq * L }, (_, i) => (i % 9 === 0 ? -Infinity : (i % 4) * 0.25)), shape: [Lq, L] } })],
  ];
  // Pipelines compile once per variant (a flash kernel takes seconds on SwiftShader): every
  // variant on the decode kernel, a few on the prefill (flash) kernels, which share their loaders.
  const byName = (names: string[]) => variants.filter(([name]) => names.includes(name));
  for (const kind of KINDS) {
    for (const [E, Ev, decodeVariants, unpackedVariants, prefillVariants] of [
      [64, 64, variants, byName(['causal', 'ALiBi, sinks']), byName(['window, softcap', 'documents', 'additive mask'])],
      [40, 72, byName(['causal', 'keyLengths', 'bool mask']), byName(['causal']), byName(['causal'])],
    ] as const) {
      it(`${kind}, E = ${E}, Ev = ${Ev}: decode (split-K) on both dot paths, and prefill`, async () => {
        let seed = 100 + E;
        const key = randomTensor([B, Hkv, L, E], seed++, -2, 2), value = randomTensor([B, Hkv, L, Ev], seed++, -2, 2);
        const runs: [Attention, number, typeof variants][] = [[packed, 1, decodeVariants], [packed, 3, byName(['causal'])], [unpacked, 1, unpackedVariants],
          [streamUnpacked, 1, unpackedVariants], [streamUnpacked, 3, byName(['causal'])], [tilePacked, 1, byName(['causal'])], [packed, 20, prefillVariants]];
        const paths = new Map([[packed, 'dot4I8Packed'], [unpacked, 'unpacked, tile kernel'], [streamUnpacked, 'unpacked'], [tilePacked, 'dot4I8Packed, tile kernel']]);
        for (const attn of [packed, unpacked, streamUnpacked, tilePacked]) {
          const path = paths.get(attn)!;
          const filled = filledCache(attn, kind, key, value);
          for (const [runOn, Lq, list] of runs) {
            if (runOn !== attn) continue;
            const query = randomTensor([B, Hq, Lq, E], seed++, -2, 2);
            for (const [name, options] of list) {
              await expectCacheMatches(attn, filled.cache, query, filled.key, filled.value, { enableGqa: true, ...options(Lq) }, `${path} Lq ${Lq} ${name}`);
            }
          }
          filled.cache.dispose();
        }
        // Under SDPA_WEBGPU_SUBGROUPS=0 the device has none: every instance runs the tile kernel.
        expect(decodedWith(packed, kind, hasSubgroups, 'packed')).toBe(true);
        expect(decodedWith(streamUnpacked, kind, hasSubgroups, 'unpack')).toBe(true);
        expect(decodedWith(unpacked, kind, false, 'unpack')).toBe(true);
        expect(decodedWith(tilePacked, kind, false, 'packed')).toBe(true);
      });
    }

    it(`${kind}: a ragged cache, a float16 query, a GPU output`, async () => {
      const E = 32, key = randomTensor([B, Hkv, L, E], 7, -3, 3), value = randomTensor([B, Hkv, L, E], 8, -3, 3);
      const filled = filledCache(packed, kind, key, value, [L, 200]);
      const lengths = Int32Array.from([L, 200]);
      const query = randomTensor([B, Hq, 1, E], 9, -2, 2);
      await expectCacheMatches(packed, filled.cache, query, filled.key, filled.value, { enableGqa: true, isCausal: true, keyLengths: lengths }, 'ragged');
      const halves = { data: toFloat16(query.data), shape: query.shape, dtype: 'float16' as const };
      const fromHalves = await packed.scaledDotProductAttention(halves, filled.cache, { enableGqa: true, outputDtype: 'float32' });
      await expectCacheMatches(packed, filled.cache, { data: fromFloat16(halves.data), shape: query.shape }, filled.key, filled.value, { enableGqa: true, keyLengths: lengths }, 'float16 query');
      const asFloat = await packed.scaledDotProductAttention({ data: fromFloat16(halves.data), shape: query.shape }, filled.cache, { enableGqa: true });
      expect(fromHalves.output.data).toEqual(asFloat.output.data);
      const prefill = randomTensor([B, Hq, 5, E], 10, -2, 2);
      const withWeights = await expectCacheMatches(packed, filled.cache, prefill, filled.key, filled.value, { enableGqa: true, keyLengths: lengths, returnWeights: true, returnLogSumExp: true }, 'weights');
      expect(withWeights.weights!.shape).toEqual([B, Hq, 5, L]);
      const onGpu = await packed.scaledDotProductAttention(query, filled.cache, { enableGqa: true, outputLocation: 'gpu' });
      expect(onGpu.output.buffer.size).toBe(4 * B * Hq * E);
      onGpu.output.buffer.destroy();
      filled.cache.dispose();
    });
  }
});

describe('NaN and ±Inf appended to a quantized cache', () => {
  for (const kind of KINDS) {
    it(`${kind}: a non-finite block reads NaN where it is seen, and nowhere else (streaming and tile kernels)`, async () => {
      const B = 1, H = 1, L = 260, E = 64;
      const key = randomTensor([B, H, L, E], 21, -1, 1), value = randomTensor([B, H, L, E], 22, -1, 1);
      key.data[100 * E + 5] = NaN;  // key 100, block 0
      value.data[200 * E + 40] = Infinity;  // value 200, block 1
      for (const attn of [packed, tilePacked]) {
        const filled = filledCache(attn, kind, key, value);
        const query = randomTensor([B, H, 1, E], 23, -1, 1);
        const { cache } = filled;
        // Key 100 seen: the row is NaN.
        const all = await attn.scaledDotProductAttention(query, cache, {});
        expect(Array.from(all.output.data).every(Number.isNaN)).toBe(true);
        // Keys 150…259 seen: key 100 hidden; value 200's block 1 makes output dims 32…63 NaN, 0…31 are finite and right.
        const late = await attn.scaledDotProductAttention(query, cache, { keyLengths: Int32Array.from([L]), window: { left: 109 }, isCausal: true });
        const out = Array.from(late.output.data);
        expect(out.slice(32).every(Number.isNaN)).toBe(true);
        expect(out.slice(0, 32).every(Number.isFinite)).toBe(true);
        // Keys 210…259: neither is seen, the output is finite and matches the reference.
        await expectCacheMatches(attn, cache, query, filled.key, filled.value, { isCausal: true, window: { left: 49 } }, 'after the non-finite rows');
        // A non-finite query block makes the row NaN.
        const nanQuery = { data: query.data.slice(), shape: query.shape };
        nanQuery.data[3] = -Infinity;
        const got = await attn.scaledDotProductAttention(nanQuery, cache, { isCausal: true, window: { left: 49 } });
        expect(Array.from(got.output.data).every(Number.isNaN)).toBe(true);
        cache.dispose();
      }
      expect(decodedWith(packed, kind, hasSubgroups, 'packed')).toBe(true);
      expect(decodedWith(tilePacked, kind, false, 'packed')).toBe(true);
    });
  }
});

describe('values near the largest float', () => {
  for (const kind of KINDS) {
    it(`${kind}: a split whose l·o overflows is recomputed from the cache, on the streaming and tile kernels`, async () => {
      const B = 1, Hq = 4, Hkv = 2, L = 300, E = 32;
      const key = randomTensor([B, Hkv, L, E], 31, -0.5, 0.5), value = randomTensor([B, Hkv, L, E], 32, 2.9e38, 3.3e38);
      const query = randomTensor([B, Hq, 1, E], 33, -1, 1);
      for (const attn of [packed, unpacked]) {
        const filled = filledCache(attn, kind, key, value);
        const got = await expectCacheMatches(attn, filled.cache, query, filled.key, filled.value, { enableGqa: true }, `${kind} near the largest float`);
        expect(Array.from(got.output.data).every(Number.isFinite)).toBe(true);
        filled.cache.dispose();
      }
    });
  }
});

describe('the decode kernel on a GQA group larger than a workgroup', () => {
  it('20 query heads on one KV head (Lq = 1 and 3: blocks of 16 rows), on both lane reductions', async () => {
    const B = 1, Hq = 20, Hkv = 1, L = 300, E = 32;
    const key = randomTensor([B, Hkv, L, E], 41, -2, 2), value = randomTensor([B, Hkv, L, E], 42, -2, 2);
    for (const [attn, kind] of [[packed, 'int8'], [unpacked, 'int4']] as const) {
      const filled = filledCache(attn, kind, key, value);
      for (const Lq of [1, 3]) {
        const query = randomTensor([B, Hq, Lq, E], 43 + Lq, -2, 2);
        await expectCacheMatches(attn, filled.cache, query, filled.key, filled.value, { enableGqa: true, isCausal: true }, `${kind} Hq 20 Lq ${Lq}`);
      }
      filled.cache.dispose();
      expect(decodedWith(attn, kind, attn === packed && hasSubgroups, attn === packed ? 'packed' : 'unpack', 16)).toBe(true);
    }
  });
});

describe('the streaming decode kernel on odd head dims and Lq = 8', () => {
  it('E = 13, Ev = 7 (partial blocks of 32), GQA 2, Lq = 1 and 8 (16 rows a workgroup), on both dot paths', async () => {
    const B = 1, Hq = 2, Hkv = 1, L = 300, E = 13, Ev = 7;
    const key = randomTensor([B, Hkv, L, E], 51, -2, 2), value = randomTensor([B, Hkv, L, Ev], 52, -2, 2);
    for (const [attn, kind, dot4] of [[packed, 'int8', 'packed'], [streamUnpacked, 'int4', 'unpack']] as const) {
      const filled = filledCache(attn, kind, key, value);
      for (const Lq of [1, 8]) {
        const query = randomTensor([B, Hq, Lq, E], 53 + Lq, -2, 2);
        await expectCacheMatches(attn, filled.cache, query, filled.key, filled.value, { enableGqa: true, isCausal: true, window: { left: 150 } }, `${kind} E 13 Ev 7 Lq ${Lq}`);
      }
      filled.cache.dispose();
      expect(decodedWith(attn, kind, hasSubgroups, dot4, 16)).toBe(true);
    }
  });
});

describe('the streaming decode kernel at E = Ev = 128', () => {
  // The decode bench's shape. A tile of 4 int8 keys of 128 elements is 32 vec4<u32> words (int4:
  // 16), a block 8 of them: with subgroups of 16 (lavapipe with LP_NATIVE_VECTOR_WIDTH=512) a
  // lane takes two words and 16 lanes span 2 blocks; with 32 (NVIDIA) one word, 4 blocks. Each
  // block's integer dot product is summed over its 8 lanes, then the scaled blocks over the rest.
  it('int8 and int4, GQA 4 (the decode bench\'s group), Lq = 1, on both dot paths', async () => {
    const B = 1, Hq = 8, Hkv = 2, L = 300, E = 128;
    const key = randomTensor([B, Hkv, L, E], 61, -2, 2), value = randomTensor([B, Hkv, L, E], 62, -2, 2);
    const query = randomTensor([B, Hq, 1, E], 63, -2, 2);
    const subgroupSize = (await gpu.requestAdapter())!.info.subgroupMinSize;
    for (const [attn, kind, dot4] of [[packed, 'int8', 'packed'], [streamUnpacked, 'int4', 'unpack'], [packed, 'int4', 'packed'], [streamUnpacked, 'int8', 'unpack']] as const) {
      const filled = filledCache(attn, kind, key, value);
      await expectCacheMatches(attn, filled.cache, query, filled.key, filled.value, { enableGqa: true, isCausal: true }, `${kind} ${dot4} E 128`);
      filled.cache.dispose();
      expect(decodedWith(attn, kind, hasSubgroups, dot4, 4)).toBe(true);
      if (hasSubgroups) {
        // As many lanes a key as the subgroup and the tile allow (at most 32).
        expect(subgroupSize).toBeGreaterThan(0);
        const lanes = Math.min(32, subgroupSize!, kind === 'int8' ? 32 : 16);
        expect(attn.webgpuInfo()!.pipelines.some((p) => p.startsWith('decode-stream-quantized:') && p.includes(`:lanes${lanes}:`)), `${kind} ${lanes} lanes`).toBe(true);
      }
    }
  });
});
