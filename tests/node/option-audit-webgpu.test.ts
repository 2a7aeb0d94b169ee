// The forward option audit (support/option-audit-suite.ts) on the 'webgpu' backend (dawn.node on
// SwiftShader), and the log-sum-exp of calls cut into several chunks (heads, then rows of one head).
import { afterAll, beforeAll, describe, it } from 'vitest';
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
