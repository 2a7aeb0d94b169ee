// The backward pass of attention (the 'scalar'/'simd' kernels and the float64 reference) through
// the call record: the tensors copied in, one crossing into the core (which reads the options,
// including the forward's, and checks the shapes), the gradients copied out.
import { checkTensor, optionTensors, product } from '../arguments.js';
import { readResults, type CallResults } from '../core-call.js';
import type { Engine } from '../engine.js';
import { backendIndex } from '../engine.js';
import { withHeap } from '../heap.js';
import type { AttentionGradients, AttentionGradients64, BackwardOptions } from './types.js';
import type { Tensor } from '../types.js';
import type { SdpaModule } from '../wasm/sdpa_core.mjs';

type Gradients<D> = {
  dQuery: { data: D; shape: number[] };
  dKey: { data: D; shape: number[] };
  dValue: { data: D; shape: number[] };
  dAttnMask?: { data: D; shape: number[] };
  dSinks?: { data: D; shape: number[] };
};

/** One backward call: the inputs copied in, `call`, the gradients read back as `read` says. */
function backwardCall<D>(
  engine: Engine,
  where: string,
  tensors: { query: Tensor; key: Tensor; value: Tensor; dOutput: Tensor },
  options: BackwardOptions | undefined,
  call: (module: SdpaModule) => ReturnType<SdpaModule['runAttentionBackward']>,
  read: (results: CallResults, name: 'dQuery' | 'dKey' | 'dValue' | 'dMask' | 'dSinks', length: number) => D,
): Gradients<D> {
  for (const [name, tensor] of Object.entries(tensors)) checkTensor(name, tensor);
  const masks = optionTensors(options);
  const forward = typeof options === 'object' && options !== null ? options : {};
  for (const name of ['output', 'logSumExp'] as const) {
    if (forward[name] !== undefined && forward[name] !== null) checkTensor(name, forward[name]);
  }
  const { module, record } = engine;
  return withHeap(module, (heap) => {
    record.begin();
    for (const name of ['query', 'key', 'value', 'dOutput'] as const) record.copyIn(heap, name, tensors[name]);
    record.copyIn(heap, 'attnMask', masks.attnMask);
    record.copyIn(heap, 'queryDocuments', masks.queryDocuments);
    record.copyIn(heap, 'keyDocuments', masks.keyDocuments);
    record.copyIn(heap, 'output', forward.output);
    record.copyIn(heap, 'logSumExp', forward.logSumExp);
    return readResults(record, where, () => call(module), (results) => {
      const gradient = (name: 'dQuery' | 'dKey' | 'dValue' | 'dMask' | 'dSinks', shape: readonly number[]) => ({
        data: read(results, name, product(shape)),
        shape: [...shape],
      });
      const sinks = options?.sinks;
      return {
        dQuery: gradient('dQuery', tensors.query.shape),
        dKey: gradient('dKey', tensors.key.shape),
        dValue: gradient('dValue', tensors.value.shape),
        ...(results.has('dMask') ? { dAttnMask: gradient('dMask', masks.attnMask!.shape) } : {}),
        ...(results.has('dSinks') ? { dSinks: gradient('dSinks', [sinks!.length]) } : {}),
      };
    });
  });
}

export function attentionBackward(engine: Engine, query: Tensor, key: Tensor, value: Tensor, dOutput: Tensor, options?: BackwardOptions): AttentionGradients {
  const backend = backendIndex(engine.cpuBackend);
  return backwardCall(engine, 'scaledDotProductAttentionBackward', { query, key, value, dOutput }, options,
    (m) => m.runAttentionBackward(options, backend), (results, name, n) => results.float32(name, n));
}

/** The float64 analytic gradients; the reference recomputes the forward itself (a given output/logSumExp is not used). */
export function referenceAttentionBackward(engine: Engine, query: Tensor, key: Tensor, value: Tensor, dOutput: Tensor, options?: BackwardOptions): AttentionGradients64 {
  return backwardCall(engine, 'referenceAttentionBackward', { query, key, value, dOutput }, options,
    (m) => m.referenceAttentionBackward64(options), (results, name, n) => results.float64(name, n));
}
