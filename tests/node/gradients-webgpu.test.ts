// The backward on the 'webgpu' backend (dawn.node on SwiftShader): the shared backward body
// (support/backward-suite.ts) with the WebGPU tolerance factor 4; GPU-resident inputs and
// outputs; determinism; the lanes' two ways of summing; NaN propagation; head dims above 128 and
// small workgroup memory; the one-piece limit; calls in flight and a lost device; and a float64
// finite-difference gradcheck (on one instance, so the kernels of equal padded head dims and
// variants compile once).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttention, fromFloat16, toFloat16, WebGPUError, type Attention, type AttentionGradients, type BackwardOptions, type GpuTensor, type Tensor } from 'sdpa-web';
import { defineBackwardSuite, GRADCHECK_CASES, gradcheckInputs, GRADS, maxAbs } from './support/backward-suite.js';
import { centralDifference, randomMasks, randomTensor } from './support/tensors.js';
import { maxAbsDiff } from './support/tolerance.js';
import { expectSubgroupsAsConfigured, gpu, testDevice } from './support/webgpu.js';

defineBackwardSuite({
  label: "the 'webgpu' backend (SwiftShader)",
  factor: 4,
  tinyUpstream: 1e-30,
  create: async () => createAttention({ backend: 'webgpu', gpuDevice: await testDevice(), gpu }),
});

const STORAGE = 0x80, COPY_SRC = 0x4, COPY_DST = 0x8, MAP_READ = 0x1;

describe('the WebGPU backward', () => {
  let device: GPUDevice;
  let attn: Attention;
  let oracle: Attention;
  beforeAll(async () => {
    device = await testDevice();
    attn = await createAttention({ backend: 'webgpu', gpuDevice: device, gpu });
    oracle = await createAttention({ backend: 'scalar' });
  });
  afterAll(() => {
    attn.dispose();
    oracle.dispose();
    device.destroy();
  });

  /** `t` in a new GPUBuffer, from byte `offset` on. */
  const upload = (t: Tensor, offset = 0): GpuTensor => {
    const buffer = device.createBuffer({ size: offset + Math.max(4, t.data.byteLength), usage: STORAGE | COPY_SRC | COPY_DST });
    device.queue.writeBuffer(buffer, offset, t.data as Float32Array<ArrayBuffer>);
    return { buffer, shape: [...t.shape], offset };
  };
  const read = async (t: GpuTensor): Promise<Float32Array> => {
    const bytes = 4 * t.shape.reduce((a, b) => a * b, 1);
    const staging = device.createBuffer({ size: Math.max(4, bytes), usage: MAP_READ | COPY_DST });
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(t.buffer as GPUBuffer, t.offset ?? 0, staging, 0, bytes);
    device.queue.submit([encoder.finish()]);
    await staging.mapAsync(MAP_READ);
    const data = new Float32Array(staging.getMappedRange().slice(0));
    staging.destroy();
    return data;
  };
  /** Within the rule against the float64 gradient (f = 4). */
  const expectWithinRule = (got: AttentionGradients, q: Tensor, k: Tensor, v: Tensor, dOut: Tensor, options: BackwardOptions, label: string) => {
    const ref = oracle.referenceAttentionBackward(q, k, v, dOut, options);
    const plain = oracle.scaledDotProductAttentionBackwardSync(q, k, v, dOut, options);
    for (const name of [...GRADS, ...(options.returnAttnMaskGrad ? ['dAttnMask' as const] : []), ...(options.sinks ? ['dSinks' as const] : [])]) {
      const bound = 4 * maxAbsDiff(plain[name]!.data, ref[name]!.data) + 1e-5 * Math.max(1, maxAbs(ref[name]!.data));
      expect(maxAbsDiff(got[name]!.data, ref[name]!.data), `${label} ${name}`).toBeLessThanOrEqual(bound);
    }
  };

  const q = randomTensor([2, 4, 37, 16], 1, -2, 2), k = randomTensor([2, 2, 53, 16], 2, -2, 2), v = randomTensor([2, 2, 53, 8], 3);
  const dOut = randomTensor([2, 4, 37, 8], 4);
  const options: BackwardOptions = {
    enableGqa: true, isCausal: 'bottom-right', attnMask: randomMasks([4, 37, 53], 5).additive, returnAttnMaskGrad: true, sinks: new Float32Array([0.5, -1, 0, 2]),
  };

  it("GPU-resident query/key/value/dOutput and outputLocation 'gpu' give the CPU-array call's gradients bit for bit", async () => {
    const onCpu = await attn.scaledDotProductAttentionBackward(q, k, v, dOut, options);
    expectWithinRule(onCpu, q, k, v, dOut, options, 'CPU arrays');
    // query bound in place at offset 256, key copied from offset 4 (not binding-aligned)
    const inputs = [upload(q, 256), upload(k, 4), upload(v), upload(dOut)] as const;
    const onGpu = await attn.scaledDotProductAttentionBackward(...inputs, { ...options, outputLocation: 'gpu' });
    for (const name of GRADS) {
      expect(onGpu[name].shape).toEqual(onCpu[name].shape);
      expect(await read(onGpu[name]), name).toEqual(onCpu[name].data);
      onGpu[name].buffer.destroy();
    }
    expect(onGpu.dAttnMask!.data).toEqual(onCpu.dAttnMask!.data);
    expect(onGpu.dSinks!.data).toEqual(onCpu.dSinks!.data);
    const fromGpu = await attn.scaledDotProductAttentionBackward(...inputs, options);
    for (const name of GRADS) expect(fromGpu[name].data, name).toEqual(onCpu[name].data);
    for (const t of inputs) t.buffer.destroy();
  });

  it('float16 query/key/value (CPU halves, a GPU tensor at byte offset 2) give the gradients of their widened values, bit for bit', async () => {
    const half = (t: Tensor) => ({ data: toFloat16(t.data), shape: t.shape, dtype: 'float16' as const });
    const [qh, kh, vh] = [half(q), half(k), half(v)];
    const widened = await attn.scaledDotProductAttentionBackward(...([qh, kh, vh].map((t) => ({ data: fromFloat16(t.data), shape: t.shape })) as [Tensor, Tensor, Tensor]), dOut, options);
    const fromHalves = await attn.scaledDotProductAttentionBackward(qh, kh, vh, dOut, options);
    const keyBuffer = device.createBuffer({ size: 2 + kh.data.byteLength + 2, usage: STORAGE | COPY_DST });
    const bytes = new Uint16Array(kh.data.length + 2);
    bytes.set(kh.data, 1);
    device.queue.writeBuffer(keyBuffer, 0, bytes);
    const fromGpuHalves = await attn.scaledDotProductAttentionBackward(qh, { buffer: keyBuffer, shape: kh.shape, offset: 2, dtype: 'float16' }, vh, dOut, options);
    for (const name of [...GRADS, 'dAttnMask', 'dSinks'] as const) {
      expect(fromHalves[name]!.data, name).toEqual(widened[name]!.data);
      expect(fromGpuHalves[name]!.data, name).toEqual(widened[name]!.data);
    }
    keyBuffer.destroy();
    await expect(attn.scaledDotProductAttentionBackward(q, k, v, half(dOut) as never)).rejects.toThrow(/dOutput.data must be a Float32Array/);
  });

  it('is deterministic: the same bits on every run (a GQA group of 2, a mask broadcast over the batch)', async () => {
    const first = await attn.scaledDotProductAttentionBackward(q, k, v, dOut, options);
    for (let run = 0; run < 2; run++) {
      const again = await attn.scaledDotProductAttentionBackward(q, k, v, dOut, options);
      for (const name of [...GRADS, 'dAttnMask', 'dSinks'] as const) expect(again[name]!.data, name).toEqual(first[name]!.data);
    }
  });

  it("each key's and row's 4 lanes sum their parts by subgroups or through workgroup memory: both within the rule, each the same bits on every run", async () => {
    // Under SDPA_WEBGPU_SUBGROUPS=0 the device has none: both instances sum through workgroup memory.
    const byDefault = expectSubgroupsAsConfigured(device) ? ':lanes4:subgroups' : ':lanes4:wgmem';
    const wgmem = await createAttention({ backend: 'webgpu', gpuDevice: device, gpuLimits: { subgroups: false } });
    for (const [instance, path] of [[attn, byDefault], [wgmem, ':lanes4:wgmem']] as const) {
      const first = await instance.scaledDotProductAttentionBackward(q, k, v, dOut, options);
      expectWithinRule(first, q, k, v, dOut, options, path);
      const again = await instance.scaledDotProductAttentionBackward(q, k, v, dOut, options);
      for (const name of [...GRADS, 'dAttnMask', 'dSinks'] as const) expect(again[name]!.data, `${path} ${name}`).toEqual(first[name]!.data);
      for (const kernel of ['dkdv', 'dq']) {
        expect(instance.webgpuInfo()!.pipelines.some((key) => key.startsWith(`backward-${kernel}:`) && key.endsWith(path)), `${kernel} ${path}`).toBe(true);
      }
    }
    wgmem.dispose();
  });

  it('NaN in a visible input reaches exactly the gradients it touches in the float64 reference; NaN in a hidden key none', async () => {
    const qn = randomTensor([1, 2, 9, 8], 10), kn = randomTensor([1, 2, 12, 8], 11), vn = randomTensor([1, 2, 12, 4], 12), dn = randomTensor([1, 2, 9, 4], 13);
    qn.data[3 * 8 + 2] = NaN; // head 0, row 3
    dn.data[(9 + 5) * 4 + 1] = NaN; // head 1, row 5
    kn.data[(12 + 11) * 8] = NaN; // head 1, key 11: hidden from rows 0…8 by the causal mask
    const causal = { isCausal: true };
    const ref = oracle.referenceAttentionBackward(qn, kn, vn, dn, causal);
    const got = await attn.scaledDotProductAttentionBackward(qn, kn, vn, dn, causal);
    const nanAt = (x: ArrayLike<number>) => Array.from(x, (y) => Number.isNaN(y));
    for (const name of GRADS) {
      expect(nanAt(got[name].data), name).toEqual(nanAt(ref[name].data));
      expect(got[name].data.some((y) => Number.isNaN(y)), name).toBe(true);
    }
  });

  it('head dims above 128 and workgroup memory for a few rows a block match the rule', async () => {
    const small = await createAttention({ backend: 'webgpu', gpuDevice: device, gpuLimits: { maxComputeWorkgroupStorageSize: 4096 } });
    const cases: [Attention, number, number, string][] = [[attn, 160, 200, 'E 160, Ev 200'], [small, 24, 40, 'blocks of 8 rows (4 KiB)']];
    for (const [instance, e, ev, label] of cases) {
      const qq = randomTensor([1, 2, 70, e], 20, -1, 1), kk = randomTensor([1, 2, 45, e], 21, -1, 1), vv = randomTensor([1, 2, 45, ev], 22), dd = randomTensor([1, 2, 70, ev], 23);
      const o: BackwardOptions = { isCausal: { offset: -20 }, window: { left: 30 }, alibi: true };
      expectWithinRule(await instance.scaledDotProductAttentionBackward(qq, kk, vv, dd, o), qq, kk, vv, dd, o, label);
    }
    // 4 KiB hold 10 rows of 384 bytes; without subgroups the lanes' parts (8 bytes for each of a
    // tile of 16 keys' 4 lanes) leave room for 9.
    const block = expectSubgroupsAsConfigured(device) ? 'bq10:bk10' : 'bq9:bk9';
    expect(small.webgpuInfo()!.pipelines.some((key) => key.startsWith(`backward-dkdv:e32:ev64:${block}:`))).toBe(true);
    small.dispose();
  });

  // Not bit for bit against the lone head: its pipelines (other tiles) are other programs, and a
  // GPU compiler may contract their sums differently (NVIDIA's dQ did); both meet the rule.
  it('each pass takes tiles of 64, 32 or 16 by its grid, the heaviest causal tiles first; a lone head (tiles of 16) also meets the rule', async () => {
    /** Heads [h0, h0 + n) of batch b of a [B, H, L, D] tensor, as a [1, n, L, D] tensor. */
    const heads = (t: Tensor, b: number, h0: number, n: number): Tensor => {
      const [, H, L, D] = t.shape as [number, number, number, number];
      const at = (b * H + h0) * L * D;
      return { data: t.data.slice(at, at + n * L * D), shape: [1, n, L, D] };
    };
    // 256 query heads of 100 rows (dQ: 2 tiles of 64 a head, 512 workgroups) over 128 key heads
    // of 40 keys (dK/dV: 3 tiles of 16, the smallest), then 256 heads of 40 rows (dQ: 2 tiles of
    // 32) over 256 of 100 keys (dK/dV: 2 tiles of 64).
    const cases: [number, number, number, BackwardOptions, string][] = [
      [100, 64, 40, { enableGqa: true, isCausal: 'bottom-right' }, ':tk16:tq64:'],
      [40, 128, 100, { isCausal: true }, ':tk64:tq32:'],
    ];
    for (const [lq, hkv, lk, o, tiles] of cases) {
      const qq = randomTensor([2, 128, lq, 8], 90, -2, 2), kk = randomTensor([2, hkv, lk, 8], 91, -2, 2), vv = randomTensor([2, hkv, lk, 8], 92), dd = randomTensor([2, 128, lq, 8], 93);
      const all = await attn.scaledDotProductAttentionBackward(qq, kk, vv, dd, o);
      expectWithinRule(all, qq, kk, vv, dd, o, tiles);
      expect(attn.webgpuInfo()!.pipelines.some((key) => key.startsWith('backward-dkdv:') && key.includes(tiles)), tiles).toBe(true);
      // Batch 1's query heads 6 and 7 and the key head they read, alone: tiles of 16.
      const kvHead = hkv === 128 ? 6 : 3, kvHeads = hkv === 128 ? 2 : 1;
      const [q1, k1, v1, d1] = [heads(qq, 1, 6, 2), heads(kk, 1, kvHead, kvHeads), heads(vv, 1, kvHead, kvHeads), heads(dd, 1, 6, 2)];
      expectWithinRule(await attn.scaledDotProductAttentionBackward(q1, k1, v1, d1, o), q1, k1, v1, d1, o, `${tiles} a lone head`);
    }
    expect(attn.webgpuInfo()!.pipelines.some((key) => key.startsWith('backward-dq:') && key.includes(':tk16:tq16:'))).toBe(true);
  });

  it("each pass's loop cut into segments (1 KiB of workgroup memory: blocks of a few rows) meets the rule in every variant, with NaN, and gives the same bits on every run", async () => {
    // Blocks of 7 rows (4 without subgroups): 70 query rows and 90 keys are 10 and 13 blocks
    // (18 and 23), 2 segments each (4); a segment holds at least 4 blocks.
    const split = await createAttention({ backend: 'webgpu', gpuDevice: device, gpuLimits: { maxComputeWorkgroupStorageSize: 1024 } });
    const [lq, lk] = [70, 90];
    const qq = randomTensor([2, 4, lq, 16], 100, -2, 2), kk = randomTensor([2, 2, lk, 16], 101, -2, 2), vv = randomTensor([2, 2, lk, 8], 102), dd = randomTensor([2, 4, lq, 8], 103);
    const { bool, additive } = randomMasks([4, lq, lk], 104);
    const sinks = new Float32Array([0.5, -1, 0, 2]);
    const ids = (L: number, n: number) => ({ data: new Int32Array(2 * L).map((_, x) => Math.floor((x % L) / n)), shape: [2, L] });
    const withNaN = (t: Tensor, at: number): Tensor => {
      const data = new Float32Array(t.data);
      data[at] = NaN;
      return { data, shape: t.shape };
    };
    const gqa = { enableGqa: true };
    const cases: [string, BackwardOptions, Tensor, Tensor, Tensor, Tensor][] = [
      ['causal', { ...gqa, isCausal: true }, qq, kk, vv, dd],
      ['bottom-right causal, ALiBi, softcap', { ...gqa, isCausal: 'bottom-right', alibi: true, softcap: 5 }, qq, kk, vv, dd],
      ['window', { ...gqa, window: { left: 25, right: 3 } }, qq, kk, vv, dd],
      ['bool mask', { ...gqa, attnMask: bool }, qq, kk, vv, dd],
      ['additive mask and its gradient, sinks', { ...gqa, attnMask: additive, returnAttnMaskGrad: true, sinks, isCausal: 'bottom-right' }, qq, kk, vv, dd],
      // Rows 0…29 see nothing; NaN in the dOutput of row 3 (it sees nothing: its sink term is 0).
      ['sinks, rows that see nothing', { ...gqa, sinks, isCausal: { offset: -30 } }, qq, kk, vv, withNaN(dd, 3 * 8 + 1)],
      // Batch 1 sees 7 keys (its rows' later key segments are empty); NaN in a key it never sees.
      ['key lengths, NaN in a hidden key', { ...gqa, keyLengths: new Int32Array([50, 7]), isCausal: 'bottom-right', sinks }, qq, withNaN(kk, (2 * lk + 60) * 16), vv, dd],
      ['documents', { ...gqa, queryDocuments: ids(lq, 20), keyDocuments: ids(lk, 25), isCausal: 'bottom-right' }, qq, kk, vv, dd],
      // A NaN query row (batch 0, head 1, row 40) and a NaN dOutput row (batch 1, head 3, row 60).
      ['NaN rows', { ...gqa, isCausal: true, sinks }, withNaN(qq, (lq + 40) * 16 + 2), kk, vv, withNaN(dd, ((4 + 3) * lq + 60) * 8 + 5)],
    ];
    for (const [label, o, q1, k1, v1, d1] of cases) {
      const first = await split.scaledDotProductAttentionBackward(q1, k1, v1, d1, o);
      expectWithinRule(first, q1, k1, v1, d1, o, label);
      const again = await split.scaledDotProductAttentionBackward(q1, k1, v1, d1, o);
      for (const name of [...GRADS, ...(o.returnAttnMaskGrad ? ['dAttnMask' as const] : []), ...(o.sinks ? ['dSinks' as const] : [])]) {
        expect(again[name]!.data, `${label} ${name}: the same bits again`).toEqual(first[name]!.data);
      }
      if (label === 'NaN rows') {
        for (const name of GRADS) expect(first[name].data.some((y) => Number.isNaN(y)), `${label} ${name}`).toBe(true);
      }
    }
    // Both passes ran their segments and the combine.
    for (const kernel of ['reduce-dkdv', 'reduce-dq']) {
      expect(split.webgpuInfo()!.pipelines.some((key) => key.startsWith(`backward-${kernel}:`)), kernel).toBe(true);
    }
    split.dispose();
  });

  it('a call too large for one binding is a RangeError naming the buffer; the instance stays usable and leaks nothing', async () => {
    const capped = await createAttention({ backend: 'webgpu', gpuDevice: device, gpuLimits: { maxStorageBufferBindingSize: 4096 } });
    const big = randomTensor([1, 1, 300, 16], 30);
    const before = capped.memoryStats().heapBytesInUse;
    await expect(capped.scaledDotProductAttentionBackward(big, big, big, big)).rejects.toThrow(/runs in one piece and query needs 19200 bytes/);
    await expect(capped.scaledDotProductAttentionBackward(big, big, big, big)).rejects.toThrow(RangeError);
    expect(capped.memoryStats().heapBytesInUse).toBe(before);
    const sq = randomTensor([1, 1, 20, 16], 31), sd = randomTensor([1, 1, 20, 16], 32);
    expectWithinRule(await capped.scaledDotProductAttentionBackward(sq, sq, sq, sd), sq, sq, sq, sd, {}, 'after the error');
    capped.dispose();
  });

  it('calls in flight at once each get their own gradients', async () => {
    const calls = [0, 1, 2, 3].map((s) => [randomTensor([2, 19, 8], 40 + s), randomTensor([2, 23, 8], 50 + s), randomTensor([2, 23, 4], 60 + s), randomTensor([2, 19, 4], 70 + s)] as const);
    const alone: AttentionGradients[] = [];
    for (const c of calls) alone.push(await attn.scaledDotProductAttentionBackward(...c, { isCausal: true }));
    const together = await Promise.all(calls.map((c) => attn.scaledDotProductAttentionBackward(...c, { isCausal: true })));
    together.forEach((g, i) => {
      for (const name of GRADS) expect(g[name].data, `call ${i} ${name}`).toEqual(alone[i]![name].data);
    });
  });

  it('device.destroy() during a backward rejects it with a device-lost WebGPUError', async () => {
    const lost = await testDevice();
    const instance = await createAttention({ backend: 'webgpu', gpuDevice: lost, gpu });
    const qq = randomTensor([2, 4, 120, 32], 80), kk = randomTensor([2, 4, 150, 32], 81), vv = randomTensor([2, 4, 150, 32], 82), dd = randomTensor([2, 4, 120, 32], 83);
    const inFlight = instance.scaledDotProductAttentionBackward(qq, kk, vv, dd);
    lost.destroy();
    const error = await inFlight.then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(WebGPUError);
    expect((error as WebGPUError).kind).toBe('device-lost');
    instance.dispose();
  });

  it('gradcheck against float64 finite differences, every variant on small cases: |g − (L(x + h) − L(x − h)) / 2h| ≤ 1e-5 + 1e-4·|numeric|', async () => {
    for (const [label, options, qs, ks, vs] of GRADCHECK_CASES) {
      const inputs = gradcheckInputs(qs, ks, vs);
      const run = () => oracle.referenceAttention(inputs.q, inputs.k, inputs.v, options).output.data;
      const dOut = randomTensor([...oracle.referenceAttention(inputs.q, inputs.k, inputs.v, options).output.shape], 4);
      const loss = () => run().reduce((s, x, i) => s + x * dOut.data[i]!, 0);
      const g = await attn.scaledDotProductAttentionBackward(inputs.q, inputs.k, inputs.v, dOut, options);
      for (const [name, x] of [['dQuery', inputs.q], ['dKey', inputs.k], ['dValue', inputs.v]] as const) {
        for (let i = 0; i < x.data.length; i++) {
          const numeric = centralDifference(x, i, loss);
          expect(Math.abs(g[name].data[i]! - numeric), `${label} ${name}[${i}]`).toBeLessThanOrEqual(1e-5 + 1e-4 * Math.abs(numeric));
        }
      }
      if (options.sinks) {
        for (let h = 0; h < options.sinks.length; h++) {
          const numeric = centralDifference({ data: options.sinks }, h, loss);
          expect(Math.abs(g.dSinks!.data[h]! - numeric), `${label} dSinks[${h}]`).toBeLessThanOrEqual(1e-5 + 1e-4 * Math.abs(numeric));
        }
      }
    }
  });
});
