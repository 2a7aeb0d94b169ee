// The machine's own two-core scaling, the ceiling for sdpa-web's threads: two worker threads,
// each with its own single-thread sdpa-web instance (its own wasm memory: nothing shared), make
// back-to-back calls at the same time, against one of them alone. On a shared VM the second core
// can slow the first (host contention), so 2 threads over 1 is judged against this, measured in
// the same minutes. sdpa-web's threads run the same workload on one instance in between.
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { callsFor, median, now, pause } from './timing.mjs';

if (!isMainThread) {
  const { createAttention } = await import(workerData.dist);
  const attn = await createAttention({ backend: 'simd', threads: 1 });
  const [q, k, v] = workerData.tensors;
  for (let i = 0; i < 3; i++) attn.scaledDotProductAttentionSync(q, k, v);
  parentPort.on('message', ({ startAt, durationMs }) => {
    while (now() < startAt) {} // start together with the other worker
    parentPort.postMessage(callsFor(() => attn.scaledDotProductAttentionSync(q, k, v), durationMs));
  });
  parentPort.postMessage('ready');
}

/**
 * GFLOP/s medians over `rounds` rounds (order rotated each round) of: one worker alone, two
 * workers at once (their sum), and `threaded` (an sdpa-web instance on every core, main thread).
 */
export async function twoCoreCeiling({ dist, shape, tensors, flops, threaded, rounds = 5, durationMs = 500 }) {
  const workers = [0, 1].map(() => new Worker(new URL(import.meta.url), { workerData: { dist, tensors } }));
  await Promise.all(workers.map((w) => new Promise((resolve, reject) => {
    w.once('message', resolve);
    w.once('error', reject);
  })));
  const run = (list) => {
    const startAt = now() + 5;
    return Promise.all(list.map((w) => new Promise((resolve) => {
      w.once('message', ({ calls, ms }) => resolve((flops * calls) / ms / 1e6));
      w.postMessage({ startAt, durationMs });
    })));
  };
  const [q, k, v] = tensors;
  const phases = {
    alone: async () => (await run([workers[0]]))[0],
    pair: async () => (await run(workers)).reduce((a, b) => a + b, 0),
    threads: async () => {
      const call = () => threaded.scaledDotProductAttentionSync(q, k, v);
      call();
      call();
      const { calls, ms } = callsFor(call, durationMs);
      return (flops * calls) / ms / 1e6;
    },
  };
  const names = Object.keys(phases);
  const results = Object.fromEntries(names.map((n) => [n, []]));
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < names.length; i++) {
      const name = names[(i + r) % names.length];
      await pause(20); // spinning helpers of the previous phase go idle
      results[name].push(await phases[name]());
    }
  }
  await Promise.all(workers.map((w) => w.terminate()));
  const alone = median(results.alone), pair = median(results.pair), threads = median(results.threads);
  return { shape, aloneGflops: alone, pairGflops: pair, threadsGflops: threads, machineScaling: pair / alone, threadsScaling: threads / alone, ofCeiling: threads / pair };
}
