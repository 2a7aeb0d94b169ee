// --probes encode: the CPU time of one GPU-resident decode step (B = 1, Hq = 32, Hkv = 8,
// E = Ev = 128, 64 keys in a float32 GPU KV cache, query and output in GPU buffers), from the
// call to its submission, with the queue's submit replaced by a no-op: neither a GPU's nor
// SwiftShader's work is timed, only what the CPU spends per layer and generated token before the
// driver takes the commands. Also what one step asks of the device (buffers, bind groups, ...).
import { createAttention } from '../../dist/index.js';
import { webgpuEntry } from './engines.mjs';
import { median } from './timing.mjs';

const [B, Hq, Hkv, E, L] = [1, 32, 8, 128, 64];
const COUNTED = ['createBuffer', 'createBindGroup', 'createCommandEncoder', 'pushErrorScope'];

export async function encodeCost({ rounds = 5, steps = 2000 } = {}) {
  const gpu = await webgpuEntry();
  const adapter = await gpu.requestAdapter();
  const device = await adapter.requestDevice({ requiredFeatures: ['subgroups', 'shader-f16'].filter((f) => adapter.features.has(f)) });
  const counts = {};
  let counting = false;
  for (const name of COUNTED) {
    const call = device[name].bind(device);
    device[name] = (...args) => ((counting && (counts[name] = (counts[name] ?? 0) + 1)), call(...args));
  }
  const attn = await createAttention({ backend: 'webgpu', gpuDevice: device });
  const cache = attn.createKvCache({ batch: B, kvHeads: Hkv, maxLength: L, headDim: E });
  const kv = { data: new Float32Array(B * Hkv * L * E).map((_, i) => Math.sin(i)), shape: [B, Hkv, L, E] };
  cache.append(kv, kv);
  const query = { buffer: device.createBuffer({ size: 4 * B * Hq * E, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST }), shape: [B, Hq, 1, E] };
  const out = device.createBuffer({ size: 4 * B * Hq * E, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
  const step = () => attn.scaledDotProductAttention(query, cache, { enableGqa: true, isCausal: true, outputLocation: 'gpu', out });
  await step(); // compiles the pipelines, submitted for real
  await device.queue.onSubmittedWorkDone();
  const submit = device.queue.submit;
  device.queue.submit = () => {};
  try {
    counting = true;
    await step();
    counting = false;
    const times = [];
    for (let r = 0; r < rounds; r++) {
      const start = performance.now();
      for (let i = 0; i < steps; i++) await step();
      times.push(((performance.now() - start) / steps) * 1000);
    }
    return { stepUs: median(times), minStepUs: Math.min(...times), perStep: counts, adapter: `${adapter.info.vendor} ${adapter.info.description}` };
  } finally {
    device.queue.submit = submit;
    cache.dispose();
    attn.dispose();
    query.buffer.destroy();
    out.destroy();
    device.destroy();
  }
}
