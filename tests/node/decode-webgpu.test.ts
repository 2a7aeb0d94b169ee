// The flash-decoding kernels (a workgroup per KV head, block of the rows that read it and key
// split): with subgroups (SwiftShader and lavapipe have 'subgroups') the streaming kernel
// (attention_decode_stream.wgsl: groups of lanes per key, q·k summed by subgroupShuffleXor) or,
// where its lanes cannot hold the rows, the tile kernel with its lanes combined by subgroups;
// without (forced with gpuLimits.subgroups = false) the tile kernel (attention_decode_partial.wgsl)
// combining lanes through workgroup memory. Under SDPA_WEBGPU_SUBGROUPS=0 the device has no
// subgroups, so gpuLimits.subgroups = true must take the workgroup-memory kernels too. Each case
// is checked against the float64 reference: GQA groups of 1 to 20 rows (one workgroup or several), Lq > 1, odd head dims, every
// variant, masks, NaN scores, Inf values behind hidden keys, key tiles of 4 to 32 keys.
import { describe, expect, it } from 'vitest';
import { createAttention, type Attention, type AttentionOptions } from 'sdpa-web';
import { randomMasks, randomTensor } from './support/tensors.js';
import { expectResultMatchesReference } from './support/tolerance.js';
import { expectSubgroupsAsConfigured, gpu, SUBGROUPS_WITHHELD, withDeviceAndOracle } from './support/webgpu.js';

const FACTOR = 4;

let device: GPUDevice;
let oracle: Attention;
withDeviceAndOracle({ maxComputeWorkgroupStorageSize: 32768 }, (d, o) => ([device, oracle] = [d, o]));

type Case = [label: string, q: number[], k: number[], v: number[], options: AttentionOptions];
const masks = randomMasks([1, 2, 2, 300], 5);
const CASES: Case[] = [
  ['GQA 4 per KV head, E = 128', [1, 8, 1, 128], [1, 2, 300, 128], [1, 2, 300, 128], { enableGqa: true, isCausal: 'bottom-right' }],
  ['Lq 3 over GQA 2, odd dims', [2, 4, 3, 13], [2, 2, 270, 13], [2, 2, 270, 7], { enableGqa: true, isCausal: 'bottom-right', returnLogSumExp: true }],
  ['20 query heads on 1 KV head (two row blocks)', [1, 20, 1, 16], [1, 1, 400, 16], [1, 1, 400, 16], { enableGqa: true }],
  ['window, softcap, sinks, ALiBi', [1, 2, 2, 32], [1, 2, 500, 32], [1, 2, 500, 32], { window: { left: 64 }, softcap: 3, sinks: new Float32Array([1, -0.5]), alibiSlopes: new Float32Array([0.05, 0.2]), isCausal: 'bottom-right' }],
  ['key lengths (one empty) and log-sum-exp', [2, 2, 1, 16], [2, 2, 300, 16], [2, 2, 300, 16], { keyLengths: new Int32Array([0, 261]), returnLogSumExp: true }],
  ['bool mask', [1, 2, 2, 24], [1, 2, 300, 24], [1, 2, 300, 24], { attnMask: masks.bool }],
  ['additive mask', [1, 2, 2, 24], [1, 2, 300, 24], [1, 2, 300, 24], { attnMask: masks.additive }],
];

function documents(): AttentionOptions {
  const keys = new Int32Array(300).map((_, j) => (j < 130 ? 0 : j < 280 ? 1 : 2));
  return { queryDocuments: { data: Int32Array.of(1, 2), shape: [1, 2] }, keyDocuments: { data: keys, shape: [1, 300] } };
}

/** An instance allowed subgroups (`gpuLimits.subgroups`: the device decides) or not. */
async function instance(subgroups: boolean, caps: Record<string, number> = {}): Promise<Attention> {
  return createAttention({ backend: 'webgpu', gpuDevice: device, gpuLimits: { ...caps, subgroups } });
}

/** Whether an instance allowed `subgroups` combines its decode lanes by subgroups: where the device has them. */
function onSubgroups(subgroups: boolean): boolean {
  return subgroups && expectSubgroupsAsConfigured(device);
}

function decodeKernels(attn: Attention): string[] {
  return attn.webgpuInfo()!.pipelines.filter((key) => key.startsWith('decode-') && !key.startsWith('decode-merge'));
}

describe.each([
  [SUBGROUPS_WITHHELD ? 'workgroup memory (subgroups allowed, none on the device)' : 'subgroupShuffleXor', true],
  ['workgroup memory', false],
])('flash-decoding, lanes combined by %s', (_, allowed) => {
  it('every case matches the float64 reference; the plan chose this path', async () => {
    const subgroups = onSubgroups(allowed);
    const attn = await instance(allowed);
    for (const [label, qs, ks, vs, options] of [...CASES, ['documents', [1, 2, 2, 16], [1, 2, 300, 16], [1, 2, 300, 16], documents()] as Case]) {
      const q = randomTensor(qs, 1), k = randomTensor(ks, 2), v = randomTensor(vs, 3);
      expectResultMatchesReference(await attn.scaledDotProductAttention(q, k, v, options), oracle, q, k, v, options, FACTOR, label);
    }
    const kernels = decodeKernels(attn);
    expect(kernels.length).toBeGreaterThan(0);
    for (const key of kernels) expect(key).toContain(subgroups ? ':subgroups' : ':wgmem');
    // With subgroups every case fits the streaming kernel's lanes; without, the tile kernel runs.
    for (const key of kernels) expect(key.startsWith(subgroups ? 'decode-stream:' : 'decode-partial:')).toBe(true);
    expect(attn.webgpuInfo()!.limits.subgroups).toBe(subgroups);
    attn.dispose();
  });

  it('NaN where a visible score is NaN; Inf values behind hidden keys are never read', async () => {
    const attn = await instance(allowed);
    const q = randomTensor([1, 4, 1, 16], 4), k = randomTensor([1, 2, 300, 16], 5), v = randomTensor([1, 2, 300, 16], 6);
    k.data[(300 + 200) * 16] = Number.NaN; // KV head 1, key 200: its two query heads' rows are NaN
    v.data.fill(Number.POSITIVE_INFINITY, 280 * 16, 300 * 16); // KV head 0, keys 280…299: hidden below
    const options: AttentionOptions = { enableGqa: true, keyLengths: new Int32Array([280]) };
    const { output } = await attn.scaledDotProductAttention(q, k, v, options);
    expect(Array.from(output.data.subarray(0, 32)).every(Number.isFinite)).toBe(true);
    expect(Array.from(output.data.subarray(32)).every(Number.isNaN)).toBe(true);
    expectResultMatchesReference({ output } as never, oracle, q, k, v, options, FACTOR, 'NaN and hidden Inf');
    attn.dispose();
  });

  it('key tiles of every size the plan picks (workgroup memory caps of 4 or 8 to 32 KiB)', async () => {
    const subgroups = onSubgroups(allowed);
    // With subgroups, 16 rows of E = 128 hold more columns than a streaming lane of a subgroup
    // of 8 (SwiftShader, lavapipe) may: the tile kernel. Where subgroups hold 16 or 32 lanes (an
    // NVIDIA GPU) the rows fit a lane, and the plan streams them where one group's combine fits
    // the cap: 16 rows × (16 + 4 + 4·Ev) bytes (plan.cpp's decode_stream_workgroup_bytes), 8,512
    // here, so the 8 KiB cap still takes the tile kernel.
    const [heads, dim, caps] = subgroups ? [32, 128, [8192, 16384, 32768]] : [4, 64, [4096, 8192, 16384, 32768]];
    const wideLanes = subgroups && (device.adapterInfo as unknown as { subgroupMinSize: number }).subgroupMinSize >= 16;
    const streamedCaps = wideLanes ? caps.filter((bytes) => bytes >= 16 * (16 + 4 + 4 * dim)).length : 0;
    const q = randomTensor([1, heads, 1, dim], 7), k = randomTensor([1, 2, 300, dim], 8), v = randomTensor([1, 2, 300, dim], 9);
    const options: AttentionOptions = { enableGqa: true, isCausal: 'bottom-right' };
    const tiles = new Set<string>();
    let streamed = 0;
    for (const bytes of caps) {
      const attn = await instance(allowed, { maxComputeWorkgroupStorageSize: bytes });
      expectResultMatchesReference(await attn.scaledDotProductAttention(q, k, v, options), oracle, q, k, v, options, FACTOR, `${bytes} bytes`);
      for (const key of decodeKernels(attn)) {
        if (key.startsWith('decode-stream:')) streamed++;
        else tiles.add(/:bk(\d+):/.exec(key)![1]!);
      }
      attn.dispose();
    }
    expect(streamed).toBe(streamedCaps);
    expect(tiles.size).toBeGreaterThanOrEqual(Math.min(3, caps.length - streamedCaps));
  });

  it('the streaming kernel with one group of lanes (the groups\' combine does not fit twice) or the tile kernel', async () => {
    const subgroups = onSubgroups(allowed);
    const attn = await instance(allowed, { maxComputeWorkgroupStorageSize: 4096 });
    const q = randomTensor([1, 4, 1, 128], 13), k = randomTensor([1, 1, 300, 128], 14), v = randomTensor([1, 1, 300, 128], 15);
    const options: AttentionOptions = { enableGqa: true, isCausal: 'bottom-right', softcap: 2 };
    expectResultMatchesReference(await attn.scaledDotProductAttention(q, k, v, options), oracle, q, k, v, options, FACTOR, 'one group');
    if (subgroups) expect(decodeKernels(attn).some((key) => key.includes(':groups1:'))).toBe(true);
    attn.dispose();
  });

  it('splits of 1024 keys (16 KV heads of 65536 keys: webgpu_decode_split_keys), ragged and windowed', async () => {
    const attn = await instance(allowed);
    const q = randomTensor([2, 8, 1, 4], 10), k = randomTensor([2, 8, 65536, 4], 11), v = randomTensor([2, 8, 65536, 4], 12);
    const options: AttentionOptions = { keyLengths: new Int32Array([65536, 40001]), window: { left: 50000 }, isCausal: 'bottom-right', returnLogSumExp: true };
    expectResultMatchesReference(await attn.scaledDotProductAttention(q, k, v, options), oracle, q, k, v, options, FACTOR, 'long splits');
    expect(decodeKernels(attn).length).toBeGreaterThan(0);
    attn.dispose();
  });
});

it("a device the library requests itself has 'subgroups' as SDPA_WEBGPU_SUBGROUPS says, and its decode kernel follows", async () => {
  const attn = await createAttention({ backend: 'webgpu', gpu });
  const q = randomTensor([1, 2, 1, 8], 16), k = randomTensor([1, 1, 256, 8], 17), v = randomTensor([1, 1, 256, 8], 18);
  expectResultMatchesReference(await attn.scaledDotProductAttention(q, k, v, { enableGqa: true }), oracle, q, k, v, { enableGqa: true }, FACTOR, 'own device');
  expect(attn.webgpuInfo()!.limits.subgroups).toBe(!SUBGROUPS_WITHHELD);
  const kernels = decodeKernels(attn);
  expect(kernels.length).toBeGreaterThan(0);
  for (const key of kernels) expect(key.endsWith(SUBGROUPS_WITHHELD ? ':wgmem' : ':subgroups'), key).toBe(true);
  attn.dispose();
});

it('gpuLimits.subgroups must be a boolean', async () => {
  await expect(createAttention({ backend: 'webgpu', gpuDevice: device, gpuLimits: { subgroups: 'no' as never } })).rejects.toThrow(/gpuLimits.subgroups must be a boolean/);
});
