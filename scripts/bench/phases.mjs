// The phases of one SIMD call, timed on the package's raw core: copying the inputs into the wasm
// heap, the kernel, copying the output out.
import { product, throwIfError } from '../../dist/arguments.js';
import { CallRecord } from '../../dist/core-call.js';
import { withHeap } from '../../dist/heap.js';
import { loadCoreModule } from '../../dist/wasm.js';
import { callsFor, now } from './timing.mjs';

/**
 * Per-call µs of { copyIn, kernel, copyOut } on the raw core of `attn` (the package's own loader,
 * call record and heap), over back-to-back calls for `durationMs`: copying q, k, v into the heap,
 * the kernel (the one crossing runAttention, as the package makes it: the core reads the options,
 * plans, allocates its results and runs), reading the output into one array (as options.out
 * does), each timed apart from the others: here the copy in precedes the kernel, whereas the
 * package streams large inputs in while a threaded kernel runs. `options`: the call's attention
 * options; its document ids are copied into the heap once, before the timed calls (they are L
 * int32 each, against the tensors' L·E floats).
 */
export async function callPhases(attn, { q, k, v }, options = undefined, durationMs = 300) {
  const module = await loadCoreModule({ threads: attn.threads > 1, relaxedSimd: attn.relaxedSimd });
  const record = CallRecord.of(module);
  const inputs = [['query', q], ['key', k], ['value', v]];
  return withHeap(module, (heap) => {
    const addresses = Object.fromEntries(inputs.map(([name, x]) => [name, heap.alloc(x.data.byteLength, name)]));
    const documents = Object.fromEntries(['queryDocuments', 'keyDocuments'].filter((name) => options?.[name]).map((name) => [name, heap.copyIn(options[name].data, name)]));
    const describe = () => {
      record.begin(attn.threads);
      for (const [name, x] of inputs) record.tensor(name, addresses[name], x.shape);
      for (const [name, address] of Object.entries(documents)) record.tensor(name, address, options[name].shape, 'int32');
    };
    const out = new Float32Array(product([...q.shape.slice(0, -1), v.shape[v.shape.length - 1]]));
    const sums = { copyIn: 0, kernel: 0, copyOut: 0 };
    const call = () => {
      const t = [now()];
      // views made per call from the current buffer, as the package does (a grown heap detaches)
      for (const [name, x] of inputs) new Float32Array(module.HEAPU8.buffer, addresses[name], x.data.length).set(x.data);
      describe();
      t.push(now());
      const error = module.runAttention(options, 1, undefined);
      const results = record.results();
      try {
        throwIfError(error, 'the call breakdown');
        t.push(now());
        results.float32('output', out.length, out);
        t.push(now());
      } finally {
        results.free();
      }
      return t;
    };
    call();
    call();
    const { calls } = callsFor(() => {
      const t = call();
      sums.copyIn += t[1] - t[0];
      sums.kernel += t[2] - t[1];
      sums.copyOut += t[3] - t[2];
    }, durationMs, 3);
    return Object.fromEntries(Object.entries(sums).map(([phase, ms]) => [phase, (1000 * ms) / calls]));
  });
}

/** Workspace bytes of the SIMD forward of q, k, v with `options` on `attn`'s threads. */
export async function workspaceBytes(attn, { q, k, v }, options = undefined) {
  const module = await loadCoreModule({ threads: attn.threads > 1, relaxedSimd: attn.relaxedSimd });
  const record = CallRecord.of(module).begin(attn.threads);
  for (const [name, x] of [['query', q], ['key', k], ['value', v]]) record.tensor(name, 0, x.shape);
  const bytes = module.forwardWorkspaceBytes(options, 1);
  if (typeof bytes !== 'number') throwIfError(bytes, 'the workspace');
  return bytes;
}
