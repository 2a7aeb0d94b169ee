// --probes encode: the CPU time of GPU-resident calls from the call to their submission, with
// the queue's submit replaced by a no-op: neither a GPU's nor SwiftShader's work is timed, only
// what the CPU spends before the driver takes the commands. Three calls: decode steps (B = 1,
// Hq = 32, Hkv = 8, E = Ev = 128, query and output in GPU buffers: what a model pays per layer
// and generated token) on float32 GPU KV caches of 64 keys (one flash kernel) and of 4096 keys
// (flash-decoding: the split kernel and the merge), and a prefill (8 heads of 512 rows, E = 64,
// causal, GPU tensors). Also what one call asks of the device (buffers, bind groups, ...).
import { createAttention } from '../../dist/index.js';
import { webgpuEntry } from './engines.mjs';
import { benchDevice } from './gpu-buffers.mjs';
import { median } from './timing.mjs';

const [B, Hq, Hkv, E, L, LONG] = [1, 32, 8, 128, 64, 4096];
const COUNTED = ['createBuffer', 'createBindGroup', 'createCommandEncoder', 'pushErrorScope'];

/** Medians over `rounds` of `calls` back-to-back calls (µs a call), and the device calls one makes. */
async function timeCalls(call, counter, rounds, calls) {
  counter.start();
  await call();
  const perCall = counter.stop();
  const times = [];
  for (let r = 0; r < rounds; r++) {
    const start = performance.now();
    for (let i = 0; i < calls; i++) await call();
    times.push(((performance.now() - start) / calls) * 1000);
  }
  return { us: median(times), minUs: Math.min(...times), perCall };
}

export async function encodeCost({ rounds = 5, calls = 2000 } = {}) {
  const gpu = await webgpuEntry();
  const adapter = await gpu.requestAdapter();
  const device = await benchDevice(adapter);
  let counts;
  for (const name of COUNTED) {
    const call = device[name].bind(device);
    device[name] = (...args) => (counts && (counts[name] = (counts[name] ?? 0) + 1), call(...args));
  }
  const counter = {
    start: () => (counts = {}),
    stop: () => {
      const counted = counts;
      counts = undefined;
      return counted;
    },
  };
  const attn = await createAttention({ backend: 'webgpu', gpuDevice: device });
  const gpuTensor = (shape, data) => {
    const buffer = device.createBuffer({ size: 4 * data.length, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
    device.queue.writeBuffer(buffer, 0, data);
    return { buffer, shape };
  };
  const filled = (n) => new Float32Array(n).map((_, i) => Math.sin(i));
  const filledCache = (length) => {
    const cache = attn.createKvCache({ batch: B, kvHeads: Hkv, maxLength: length, headDim: E });
    const kv = { data: filled(B * Hkv * length * E), shape: [B, Hkv, length, E] };
    cache.append(kv, kv);
    return cache;
  };
  const [cache, longCache] = [filledCache(L), filledCache(LONG)];
  const query = gpuTensor([B, Hq, 1, E], filled(B * Hq * E));
  const out = gpuTensor([B, Hq, 1, E], new Float32Array(B * Hq * E));
  const stepOn = (kvCache) => () =>
    attn.scaledDotProductAttention(query, kvCache, { enableGqa: true, isCausal: true, outputLocation: 'gpu', out: out.buffer });
  const [step, longStep] = [stepOn(cache), stepOn(longCache)];
  // A prefill call on GPU tensors: 8 heads of 512 rows, E = 64, causal.
  const [pq, pk, pv, pout] = [0, 1, 2, 3].map(() => gpuTensor([1, 8, 512, 64], filled(8 * 512 * 64)));
  const prefill = () => attn.scaledDotProductAttention(pq, pk, pv, { isCausal: true, outputLocation: 'gpu', out: pout.buffer });
  await step(); // compiles the pipelines, submitted for real
  await longStep();
  await prefill();
  await device.queue.onSubmittedWorkDone();
  const submit = device.queue.submit;
  device.queue.submit = () => {};
  try {
    return {
      decode: await timeCalls(step, counter, rounds, calls),
      decodeSplit: await timeCalls(longStep, counter, rounds, calls),
      prefill: await timeCalls(prefill, counter, rounds, calls),
      adapter: `${adapter.info.vendor} ${adapter.info.description}`,
    };
  } finally {
    device.queue.submit = submit;
    cache.dispose();
    longCache.dispose();
    attn.dispose();
    for (const t of [query, out, pq, pk, pv, pout]) t.buffer.destroy();
    device.destroy();
  }
}
