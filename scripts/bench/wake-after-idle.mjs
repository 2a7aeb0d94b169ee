// How fast a sleeping second thread joins in, after the process was idle for a short or a long
// time: what a thread pool (sdpa-web's, onnxruntime-web's) pays for its first calls after a
// pause. A worker sleeps in Atomics.wait; the main thread sleeps `idleMs` (event loop idle),
// then wakes the worker with Atomics.notify and both run the same fixed loop of ~1.5 ms.
// Reported per idle time: the worker's wake latency, and the two loops' speed-up over one loop
// run alone (2× when the threads run on two cores at once).
// A speed-up near 1× means the woken thread shared the waking thread's core (some VMs place a
// thread woken after a long idle there).
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { median, now, pause, timeSync } from './timing.mjs';

function spinLoop(iterations) {
  let x = 1;
  for (let i = 0; i < iterations; i++) x = x * 1.0000001 + 1e-9;
  return x;
}

if (!isMainThread) {
  const { control, times, iterations } = workerData; // control: [generation], times: [wokeAt, doneAt]
  let seen = 0;
  for (;;) {
    Atomics.wait(control, 0, seen);
    seen = Atomics.load(control, 0);
    if (seen < 0) break;
    times[0] = now();
    spinLoop(iterations);
    times[1] = now();
    Atomics.store(control, 1, seen);
  }
}

/** Medians over `rounds` per idle time: { idleMs, wakeMs, speedup } (speedup: one loop's time × 2 / both loops' time). */
export async function wakeAfterIdle({ idleTimes = [2, 10, 30, 150], rounds = 9, loopMs = 1.5 } = {}) {
  let iterations = 1e5;
  for (let i = 0; i < 5; i++) spinLoop(iterations); // optimize it first
  iterations = Math.round((iterations * loopMs) / Math.max(timeSync(() => spinLoop(iterations)), 1e-3));
  const aloneMs = median(Array.from({ length: 7 }, () => timeSync(() => spinLoop(iterations))));
  const control = new Int32Array(new SharedArrayBuffer(8));
  const times = new Float64Array(new SharedArrayBuffer(16));
  const worker = new Worker(new URL(import.meta.url), { workerData: { control, times, iterations } });
  await new Promise((resolve) => worker.once('online', resolve));
  const results = [];
  let generation = 0;
  for (const idleMs of idleTimes) {
    const wake = [], speedup = [];
    for (let r = 0; r < rounds + 1; r++) {
      await pause(idleMs);
      const t0 = now();
      Atomics.store(control, 0, ++generation);
      Atomics.notify(control, 0);
      spinLoop(iterations);
      while (Atomics.load(control, 1) !== generation) {}
      if (r === 0) continue; // the first round follows the previous idle time's
      wake.push(times[0] - t0);
      speedup.push((2 * aloneMs) / (Math.max(now(), times[1]) - t0));
    }
    results.push({ idleMs, wakeMs: median(wake), speedup: median(speedup) });
  }
  Atomics.store(control, 0, -1);
  Atomics.notify(control, 0);
  await worker.terminate();
  return { loopMs: aloneMs, results };
}
