// Where the time of a call goes, on one thread and on every core: copying the inputs into the
// wasm heap, the kernel (module.runAttention, as the package calls it), and reading the output
// back, each timed in a loop of back-to-back calls. The copies are serial whatever the thread
// count, and slower into the threads module's memory: V8 copies into a SharedArrayBuffer about 3×
// slower than into an ordinary one (28 against 70-90 GB/s on the benchmark VM), and the lines
// the helper thread read in the last call must first be taken back from its core. The kernel's
// own speed-up on threads is thus an upper bound on the call's.
import { median, pause } from './timing.mjs';

/**
 * Per-call µs of { copyIn, kernel, copyOut } for one instance on inputs [q, k, v] of `shape`;
 * `attentionRequest` and `withHeap` are the package's own (dist/arguments.js, dist/heap.js).
 */
function timePhases({ attentionRequest, withHeap }, attn, shape, [q, k, v], durationMs) {
  const module = attn.module;
  const tensor = (data) => ({ data, shape });
  const request = { ...attentionRequest(tensor(q), tensor(k), tensor(v), undefined), threads: attn.threads };
  const plan = module.planAttention(request);
  if (plan.error) throw new Error(plan.error.message);
  return withHeap(module, (heap) => {
    const pointers = {};
    for (const name of ['query', 'key', 'value', 'output']) pointers[name] = heap.alloc(4 * q.length, name);
    pointers.workspace = heap.alloc(plan.workspaceBytes.simd, 'workspace');
    const out = new Float32Array(q.length);
    // views made per call from the current buffer, as the package does (a heap that grows detaches);
    // the output is read by the package's own readFloat32, into one array as with options.out
    const view = (address) => new Float32Array(module.HEAPU8.buffer, address, q.length);
    const sums = { copyIn: 0, kernel: 0, copyOut: 0 };
    const call = (record) => {
      const t0 = performance.now();
      view(pointers.query).set(q);
      view(pointers.key).set(k);
      view(pointers.value).set(v);
      const t1 = performance.now();
      const error = module.runAttention(request, 'simd', pointers);
      if (error) throw new Error(error.message);
      const t2 = performance.now();
      heap.readFloat32(pointers.output, q.length, out);
      const t3 = performance.now();
      if (record) {
        sums.copyIn += t1 - t0;
        sums.kernel += t2 - t1;
        sums.copyOut += t3 - t2;
      }
    };
    for (let i = 0; i < 2; i++) call(false);
    let calls = 0;
    const start = performance.now();
    while (calls < 3 || performance.now() - start < durationMs) {
      call(true);
      calls++;
    }
    return Object.fromEntries(Object.entries(sums).map(([phase, ms]) => [phase, (1000 * ms) / calls]));
  });
}

/**
 * Medians over `rounds` interleaved rounds of each phase's µs per call on `one` (1 thread) and
 * `many` (every core), and the resulting speed-ups of the kernel alone and of the whole call.
 */
export async function callBreakdown({ one, many, shape, tensors, rounds = 5, durationMs = 300 }) {
  // dist/ is imported on first use, as in bench.mjs, which says how to build it when it is missing
  const lib = { ...(await import('../../dist/arguments.js')), ...(await import('../../dist/heap.js')) };
  const runs = { one: [], many: [] };
  for (let r = 0; r < rounds; r++) {
    for (const name of r % 2 ? ['one', 'many'] : ['many', 'one']) {
      await pause(20); // the other instance's helpers stop spinning
      runs[name].push(timePhases(lib, name === 'one' ? one : many, shape, tensors, durationMs));
    }
  }
  const medians = (list) => Object.fromEntries(Object.keys(list[0]).map((phase) => [phase, median(list.map((x) => x[phase]))]));
  const a = medians(runs.one), b = medians(runs.many);
  const total = (x) => x.copyIn + x.kernel + x.copyOut;
  return { oneThread: a, threads: many.threads, manyThreads: b, kernelSpeedup: a.kernel / b.kernel, callSpeedup: total(a) / total(b) };
}
