// The phases of one SIMD call, timed on the package's raw core: copying the inputs into the wasm
// heap, the kernel, copying the output out.
import { attentionRequest, product } from '../../dist/arguments.js';
import { withHeap } from '../../dist/heap.js';
import { loadCoreModule } from '../../dist/wasm.js';
import { callsFor, now } from './timing.mjs';

/**
 * Per-call µs of { copyIn, kernel, copyOut } on the raw core of `attn` (the package's own loader,
 * request and heap), over back-to-back calls for `durationMs`: copying q, k, v into the heap, the
 * kernel (runAttention, as the package calls it), reading the output into one array (as
 * options.out does), each timed apart from the others: here the copy in precedes the kernel,
 * whereas the package streams large inputs in while a threaded kernel runs. `options`: the
 * call's attention options; its document ids are copied into the heap once, before the timed
 * calls (they are L int32 each, against the tensors' L·E floats).
 */
export async function callPhases(attn, { q, k, v }, options = undefined, durationMs = 300) {
  const module = await loadCoreModule({ threads: attn.threads > 1, relaxedSimd: attn.relaxedSimd });
  const request = { ...attentionRequest('the call breakdown', q, k, v, options), threads: attn.threads };
  const plan = module.planAttention(request);
  if (plan.error) throw new Error(plan.error.message);
  const inputs = [['query', q], ['key', k], ['value', v]];
  const outputSize = product(plan.outputShape);
  return withHeap(module, (heap) => {
    const p = Object.fromEntries(inputs.map(([name, x]) => [name, heap.alloc(x.data.byteLength, name)]));
    p.output = heap.alloc(4 * outputSize, 'output');
    p.workspace = heap.alloc(plan.workspaceBytes.simd, 'workspace');
    for (const name of ['queryDocuments', 'keyDocuments']) if (options?.[name]) p[name] = heap.copyIn(options[name].data, name);
    const out = new Float32Array(outputSize);
    const sums = { copyIn: 0, kernel: 0, copyOut: 0 };
    const call = () => {
      const t = [now()];
      // views made per call from the current buffer, as the package does (a grown heap detaches)
      for (const [name, x] of inputs) new Float32Array(module.HEAPU8.buffer, p[name], x.data.length).set(x.data);
      t.push(now());
      const error = module.runAttention(request, 'simd', p, undefined);
      if (error) throw new Error(error.message);
      t.push(now());
      heap.readFloat32(p.output, outputSize, out);
      t.push(now());
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
