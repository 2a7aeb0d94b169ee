// The backward pass of attention (the 'scalar'/'simd' kernels and the float64 reference), as
// functions of the wasm module; the Attention class exposes them as methods. Argument checks here
// cover only JS types; shapes and values are validated by the C++ core.
import type { BackwardRequest, CoreError, SdpaModule } from '../wasm/sdpa_core.mjs';
import { attentionRequest, BACKWARD_OPTION_NAMES, checkBoolean, checkOptionNames, checkTensor, describe, product, throwIfError } from '../arguments.js';
import { HeapScope, tensorBytes, withHeap } from '../heap.js';
import type { AttentionGradients, AttentionGradients64, BackwardOptions } from './gradient-types.js';
import type { CpuBackendName, Tensor } from '../types.js';

function backwardArguments(where: string, query: Tensor, key: Tensor, value: Tensor, dOutput: Tensor, options: BackwardOptions | undefined) {
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    throw new TypeError(`options must be an object; got ${describe(options)}`);
  }
  if (options !== undefined) checkOptionNames(where, options, BACKWARD_OPTION_NAMES);
  const { output, logSumExp, returnAttnMaskGrad, ...forwardOptions } = options ?? {};
  const request = attentionRequest(where, query, key, value, { ...forwardOptions, returnWeights: false });
  checkTensor('dOutput', dOutput);
  const hasOutput = output !== undefined && output !== null;
  const hasLse = logSumExp !== undefined && logSumExp !== null;
  if (hasOutput !== hasLse) {
    throw new TypeError('output and logSumExp (from a forward call with returnLogSumExp: true) must be passed together, or neither');
  }
  if (hasOutput) {
    checkTensor('output', output);
    checkTensor('logSumExp', logSumExp);
  }
  const backward: BackwardRequest = {
    dOutputShape: dOutput.shape,
    returnAttnMaskGrad: checkBoolean('returnAttnMaskGrad', returnAttnMaskGrad),
  };
  if (hasOutput) {
    backward.outputShape = output!.shape;
    backward.lseShape = logSumExp!.shape;
  }
  return {
    request,
    backward,
    output: hasOutput ? output! : undefined,
    logSumExp: hasLse ? logSumExp! : undefined,
    mask: forwardOptions.attnMask ?? undefined,
    queryDocuments: forwardOptions.queryDocuments ?? undefined,
    keyDocuments: forwardOptions.keyDocuments ?? undefined,
    sinks: request.sinks === undefined ? 0 : request.sinks.length,
  };
}

/** Copies the inputs of a backward call into the heap. */
function copyBackwardInputs(heap: HeapScope, query: Tensor, key: Tensor, value: Tensor, dOutput: Tensor, args: BackwardArguments) {
  const pointers: Record<string, number> = {
    query: heap.copyIn(query.data, 'query'),
    key: heap.copyIn(key.data, 'key'),
    value: heap.copyIn(value.data, 'value'),
    dOutput: heap.copyIn(dOutput.data, 'dOutput'),
  };
  if (args.mask) pointers.mask = heap.copyIn(args.mask.data, 'attnMask');
  if (args.queryDocuments) pointers.queryDocuments = heap.copyIn(args.queryDocuments.data, 'queryDocuments');
  if (args.keyDocuments) pointers.keyDocuments = heap.copyIn(args.keyDocuments.data, 'keyDocuments');
  if (args.output) pointers.output = heap.copyIn(args.output.data, 'output');
  if (args.logSumExp) pointers.lse = heap.copyIn(args.logSumExp.data, 'logSumExp');
  return pointers;
}

type BackwardArguments = ReturnType<typeof backwardArguments>;

/** How one precision is allocated and read back. */
interface Precision<D extends Float32Array | Float64Array> {
  bytes: 4 | 8;
  read(heap: HeapScope, address: number, length: number): D;
}
const FLOAT32: Precision<Float32Array> = { bytes: 4, read: (heap, address, n) => heap.readFloat32(address, n) };
const FLOAT64: Precision<Float64Array> = { bytes: 8, read: (heap, address, n) => heap.readFloat64(address, n) };

/** One backward call: size check, allocations, `run`, and the gradients read back in `precision`. */
function backwardCall<D extends Float32Array | Float64Array>(
  module: SdpaModule,
  tensors: { query: Tensor; key: Tensor; value: Tensor; dOutput: Tensor },
  args: BackwardArguments,
  precision: Precision<D>,
  workspaceBytes: number,
  what: string,
  run: (pointers: Record<string, number>) => CoreError | null,
) {
  const { query, key, value, dOutput } = tensors;
  const wantMask = args.backward.returnAttnMaskGrad;
  const sizes = [product(query.shape), product(key.shape), product(value.shape), wantMask ? product(args.mask!.shape) : 0];
  HeapScope.checkTotal(
    tensorBytes([query, key, value, dOutput, args.mask, args.output, args.logSumExp, args.queryDocuments, args.keyDocuments]) +
      precision.bytes * (sizes.reduce((a, b) => a + b) + args.sinks) +
      workspaceBytes,
    what,
  );
  return withHeap(module, (heap) => {
    const pointers = copyBackwardInputs(heap, query, key, value, dOutput, args);
    pointers.dQuery = heap.alloc(precision.bytes * sizes[0]!, 'dQuery');
    pointers.dKey = heap.alloc(precision.bytes * sizes[1]!, 'dKey');
    pointers.dValue = heap.alloc(precision.bytes * sizes[2]!, 'dValue');
    if (wantMask) pointers.dMask = heap.alloc(precision.bytes * sizes[3]!, 'dAttnMask');
    if (args.request.sinks) pointers.dSinks = heap.alloc(precision.bytes * args.sinks, 'dSinks');
    pointers.workspace = heap.alloc(workspaceBytes, `the ${what} workspace`);
    throwIfError(run(pointers));
    const gradient = (address: number, length: number, shape: readonly number[]) => ({
      data: precision.read(heap, address, length),
      shape: [...shape],
    });
    return {
      dQuery: gradient(pointers.dQuery, sizes[0]!, query.shape),
      dKey: gradient(pointers.dKey, sizes[1]!, key.shape),
      dValue: gradient(pointers.dValue, sizes[2]!, value.shape),
      ...(wantMask ? { dAttnMask: gradient(pointers.dMask!, sizes[3]!, args.mask!.shape) } : {}),
      ...(args.request.sinks ? { dSinks: gradient(pointers.dSinks!, args.sinks, [args.sinks]) } : {}),
    };
  });
}

export function attentionBackward(
  module: SdpaModule,
  backend: CpuBackendName,
  query: Tensor,
  key: Tensor,
  value: Tensor,
  dOutput: Tensor,
  options?: BackwardOptions,
): AttentionGradients {
  const args = backwardArguments('scaledDotProductAttentionBackward', query, key, value, dOutput, options);
  const plan = module.planAttentionBackward(args.request, args.backward);
  throwIfError(plan.error);
  return backwardCall(module, { query, key, value, dOutput }, args, FLOAT32, plan.workspaceBytes[backend], `${backend} backward`, (pointers) =>
    module.runAttentionBackward(args.request, args.backward, backend, pointers),
  );
}

export function referenceAttentionBackward(
  module: SdpaModule,
  query: Tensor,
  key: Tensor,
  value: Tensor,
  dOutput: Tensor,
  options?: BackwardOptions,
): AttentionGradients64 {
  // The float64 reference recomputes the forward itself: a given output/logSumExp is not used.
  const args = { ...backwardArguments('referenceAttentionBackward', query, key, value, dOutput, options), output: undefined, logSumExp: undefined };
  const plan = module.planAttentionBackward(args.request, args.backward);
  throwIfError(plan.error);
  return backwardCall(module, { query, key, value, dOutput }, args, FLOAT64, plan.workspaceBytes.reference64, 'float64 reference backward', (pointers) =>
    module.referenceAttentionBackward64(args.request, args.backward, pointers),
  );
}
