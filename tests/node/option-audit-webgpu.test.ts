// The forward option audit (support/option-audit-suite.ts) on the 'webgpu' backend (dawn.node on
// SwiftShader), the log-sum-exp of calls cut into several chunks (heads, then rows of one head),
// and the backward of a 'webgpu' instance, which runs the WebGPU backward kernels.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttention, type Attention, type GpuTensor } from 'sdpa-web';
import { defineOptionAuditSuite } from './support/option-audit-suite.js';
import { randomTensor } from './support/tensors.js';
import { expectResultMatchesReference } from './support/tolerance.js';
import { gpu, testDevice } from './support/webgpu.js';

const MAP_READ = 0x1, COPY_DST = 0x8;
let device: Promise<GPUDevice> | undefined;
const sharedDevice = () => (device ??= testDevice());

/** The floats of a GPU-resident tensor, copied to a mapped buffer. */
async function readGpu(t: GpuTensor): Promise<Float32Array> {
  const d = await sharedDevice();
  const bytes = 4 * t.shape.reduce((a, b) => a * b, 1);
  const staging = d.createBuffer({ size: Math.max(4, bytes), usage: MAP_READ | COPY_DST });
  const encoder = d.createCommandEncoder();
  if (bytes) encoder.copyBufferToBuffer(t.buffer as GPUBuffer, t.offset ?? 0, staging, 0, bytes);
  d.queue.submit([encoder.finish()]);
  await staging.mapAsync(MAP_READ);
  const data = new Float32Array(staging.getMappedRange().slice(0, bytes));
  staging.destroy();
  return data;
}

defineOptionAuditSuite({
  backend: 'webgpu',
  factor: 4,
  create: async () => createAttention({ backend: 'webgpu', gpuDevice: await sharedDevice(), gpu }),
  readGpu,
});

describe('returnLogSumExp on webgpu calls cut into chunks', () => {
  let small: Attention;
  let oracle: Attention;
  beforeAll(async () => {
    // 4 KiB bindings: a few heads per chunk, or rows of one head.
    small = await createAttention({ backend: 'webgpu', gpuDevice: await sharedDevice(), gpuLimits: { maxStorageBufferBindingSize: 4096 } });
    oracle = await createAttention({ backend: 'scalar' });
  });
  afterAll(() => {
    small.dispose();
    oracle.dispose();
  });

  it('each chunk writes its rows of the log-sum-exp', async () => {
    for (const [label, qs, ks, vs] of [
      ['heads per chunk', [3, 5, 9, 13], [3, 5, 21, 13], [3, 5, 21, 7]],
      ['rows of one head', [1, 1, 300, 13], [1, 1, 40, 13], [1, 1, 40, 7]],
    ] as const) {
      const q = randomTensor([...qs], 40, -2, 2), k = randomTensor([...ks], 41, -2, 2), v = randomTensor([...vs], 42);
      const options = { isCausal: { offset: -2 }, returnLogSumExp: true };
      expectResultMatchesReference(await small.scaledDotProductAttention(q, k, v, options), oracle, q, k, v, options, 4, label);
    }
  });
});

describe("scaledDotProductAttentionBackward on a 'webgpu' instance", () => {
  it("runs the WebGPU backward kernels, with or without the WebGPU forward's logSumExp, as the 'simd' backward does", async () => {
    const attn = await createAttention({ backend: 'webgpu', gpuDevice: await sharedDevice(), gpu });
    const simd = await createAttention({ backend: 'simd' });
    const q = randomTensor([2, 2, 9, 8], 50, -2, 2), k = randomTensor([2, 2, 13, 8], 51, -2, 2), v = randomTensor([2, 2, 13, 4], 52);
    const dOut = randomTensor([2, 2, 9, 4], 53);
    const options = { isCausal: true, sinks: new Float32Array([0.5, -1]) };
    const forward = await attn.scaledDotProductAttention(q, k, v, { ...options, returnLogSumExp: true });
    const cpu = simd.scaledDotProductAttentionBackwardSync(q, k, v, dOut, options);
    for (const given of [options, { ...options, output: forward.output, logSumExp: forward.logSumExp }]) {
      const gpuInstance = await attn.scaledDotProductAttentionBackward(q, k, v, dOut, given);
      for (const name of ['dQuery', 'dKey', 'dValue', 'dSinks'] as const) {
        expect(Math.max(...gpuInstance[name]!.data.map((x, i) => Math.abs(x - cpu[name]!.data[i]!))), name).toBeLessThanOrEqual(1e-5);
      }
    }
    const pipelines = attn.webgpuInfo()!.pipelines;
    for (const kernel of ['prep', 'dkdv', 'dq', 'reduce-sinks']) expect(pipelines.some((key) => key.startsWith(`backward-${kernel}:`)), kernel).toBe(true);
    expect(() => attn.scaledDotProductAttentionBackwardSync(q, k, v, dOut, options)).toThrow(/runs on the CPU backends only/);
    attn.dispose();
    simd.dispose();
  });
});
