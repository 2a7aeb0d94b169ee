// The backward pass, PRNG-based building blocks (Xavier init, dropout) and score functions, as
// functions of the wasm module; the Attention class (index.ts) exposes them as methods. Argument
// checks here cover only JS types; shapes and values are validated by the C++ core.
import type { BackwardRequest, CoreError, ScoreRequest, SdpaModule } from './wasm/sdpa_core.mjs';
import { attentionRequest, checkBoolean, checkTensor, describe, product, throwIfError } from './arguments.js';
import { HeapScope, withHeap } from './heap.js';
import type {
  AttentionGradients,
  AttentionGradients64,
  BackwardOptions,
  DropoutOptions,
  ScoreGradients,
  ScoreOptions,
  ScoreResult,
} from './gradient-types.js';
import type { CpuBackendName, Tensor } from './types.js';

function checkNumber(name: string, value: unknown): number {
  if (typeof value !== 'number') throw new TypeError(`${name} must be a number; got ${describe(value)}`);
  return value;
}

function backwardArguments(query: Tensor, key: Tensor, value: Tensor, dOutput: Tensor, options: BackwardOptions | undefined) {
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    throw new TypeError(`options must be an object; got ${describe(options)}`);
  }
  const { output, logSumExp, returnAttnMaskGrad, ...forwardOptions } = options ?? {};
  const request = attentionRequest(query, key, value, { ...forwardOptions, returnWeights: false });
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
  return { request, backward, output: hasOutput ? output! : undefined, logSumExp: hasLse ? logSumExp! : undefined, mask: forwardOptions.attnMask ?? undefined };
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
  if (args.output) pointers.output = heap.copyIn(args.output.data, 'output');
  if (args.logSumExp) pointers.lse = heap.copyIn(args.logSumExp.data, 'logSumExp');
  return pointers;
}

function inputBytes(tensors: readonly ({ data: ArrayBufferView } | undefined)[]): number {
  return tensors.reduce((n, t) => n + (t ? t.data.byteLength : 0), 0);
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
    inputBytes([query, key, value, dOutput, args.mask, args.output, args.logSumExp]) +
      precision.bytes * sizes.reduce((a, b) => a + b) +
      workspaceBytes,
    what,
  );
  return withHeap(module, (heap) => {
    const pointers = copyBackwardInputs(heap, query, key, value, dOutput, args);
    pointers.dQuery = heap.alloc(precision.bytes * sizes[0]!, 'dQuery');
    pointers.dKey = heap.alloc(precision.bytes * sizes[1]!, 'dKey');
    pointers.dValue = heap.alloc(precision.bytes * sizes[2]!, 'dValue');
    if (wantMask) pointers.dMask = heap.alloc(precision.bytes * sizes[3]!, 'dAttnMask');
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
  const args = backwardArguments(query, key, value, dOutput, options);
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
  const args = { ...backwardArguments(query, key, value, dOutput, options), output: undefined, logSumExp: undefined };
  const plan = module.planAttentionBackward(args.request, args.backward);
  throwIfError(plan.error);
  return backwardCall(module, { query, key, value, dOutput }, args, FLOAT64, plan.workspaceBytes.reference64, 'float64 reference backward', (pointers) =>
    module.referenceAttentionBackward64(args.request, args.backward, pointers),
  );
}

export function xavierUniform(module: SdpaModule, shape: readonly [number, number], seed: number, offset = 0): Tensor {
  if (!Array.isArray(shape) || shape.length !== 2) throw new TypeError(`shape must be [rows, cols]; got ${describe(shape)}`);
  const [rows, cols] = [checkNumber('shape[0]', shape[0]), checkNumber('shape[1]', shape[1])];
  checkNumber('seed', seed);
  checkNumber('offset', offset);
  if (!(Number.isSafeInteger(offset) && offset >= 0)) throw new RangeError(`offset must be a non-negative integer; got ${offset}`);
  throwIfError(module.xavierUniform(rows, cols, seed, offset, undefined));
  return withHeap(module, (heap) => {
    const output = heap.alloc(4 * rows * cols, 'output');
    throwIfError(module.xavierUniform(rows, cols, seed, offset, { output }));
    return { data: heap.readFloat32(output, rows * cols), shape: [rows, cols] };
  });
}

export function checkDropout(options: unknown): DropoutOptions {
  if (typeof options !== 'object' || options === null) throw new TypeError(`dropout must be an object { p, seed }; got ${describe(options)}`);
  const { p, seed } = options as DropoutOptions;
  return { p: checkNumber('dropout.p', p), seed: checkNumber('dropout.seed', seed) };
}

/** Inverted dropout of every element of x (row-major index = draw index). */
export function dropout(module: SdpaModule, x: Tensor, options: DropoutOptions): Tensor {
  checkTensor('x', x);
  const { p, seed } = checkDropout(options);
  throwIfError(module.dropout(x.data.length, p, seed, undefined));
  return withHeap(module, (heap) => {
    const pointers = { x: heap.copyIn(x.data, 'x'), output: heap.alloc(x.data.byteLength, 'output') };
    throwIfError(module.dropout(x.data.length, p, seed, pointers));
    return { data: heap.readFloat32(pointers.output, x.data.length), shape: [...x.shape] };
  });
}

const SCORE_KINDS = ['dot', 'scaled-dot', 'multiplicative', 'additive'] as const;
const SCORE_PARAMS = ['w', 'w1', 'w2', 'v'] as const;

function scoreRequest(query: Tensor, key: Tensor, options: ScoreOptions): ScoreRequest {
  checkTensor('query', query);
  checkTensor('key', key);
  if (typeof options !== 'object' || options === null) throw new TypeError(`options must be an object { kind, ... }; got ${describe(options)}`);
  if (!SCORE_KINDS.includes(options.kind)) {
    throw new TypeError(`kind must be ${SCORE_KINDS.map((k) => `'${k}'`).join(', ')}; got ${describe(options.kind)}`);
  }
  for (const name of SCORE_PARAMS) if (options[name] !== undefined) checkTensor(name, options[name]);
  if (options.scale !== undefined && options.scale !== null) checkNumber('scale', options.scale);
  return {
    kind: options.kind,
    queryShape: query.shape,
    keyShape: key.shape,
    wShape: options.w?.shape ?? [],
    w1Shape: options.w1?.shape ?? [],
    w2Shape: options.w2?.shape ?? [],
    vShape: options.v?.shape ?? [],
    scale: options.scale ?? undefined,
  };
}

function copyScoreInputs(heap: HeapScope, query: Tensor, key: Tensor, options: ScoreOptions): Record<string, number> {
  const pointers: Record<string, number> = { query: heap.copyIn(query.data, 'query'), key: heap.copyIn(key.data, 'key') };
  for (const name of SCORE_PARAMS) {
    const t = options[name];
    if (t) pointers[name] = heap.copyIn(t.data, name);
  }
  return pointers;
}

/** Scores and their softmax, computed by the float32 scalar reference. */
export function attentionScores(module: SdpaModule, query: Tensor, key: Tensor, options: ScoreOptions): ScoreResult {
  const request = scoreRequest(query, key, options);
  const plan = module.planScores(request);
  throwIfError(plan.error);
  const n = product(plan.scoresShape);
  const params = SCORE_PARAMS.map((name) => options[name]);
  HeapScope.checkTotal(inputBytes([query, key, ...params]) + 8 * n + plan.workspaceBytes, 'attentionScores');
  return withHeap(module, (heap) => {
    const pointers = copyScoreInputs(heap, query, key, options);
    pointers.scores = heap.alloc(4 * n, 'scores');
    pointers.workspace = heap.alloc(plan.workspaceBytes, 'the score workspace');
    throwIfError(module.runScores(request, pointers));
    const weights = heap.alloc(4 * n, 'weights');
    throwIfError(module.softmax(plan.scoresShape, 1, { x: pointers.scores, output: weights }));
    return {
      scores: { data: heap.readFloat32(pointers.scores, n), shape: plan.scoresShape },
      weights: { data: heap.readFloat32(weights, n), shape: plan.scoresShape },
    };
  });
}

/** Gradients of the scores given dScores `[..., Lq, Lk]`. */
export function attentionScoresBackward(module: SdpaModule, query: Tensor, key: Tensor, dScores: Tensor, options: ScoreOptions): ScoreGradients {
  const request = scoreRequest(query, key, options);
  const plan = module.planScores(request);
  throwIfError(plan.error);
  checkTensor('dScores', dScores);
  if (dScores.shape.length !== plan.scoresShape.length || dScores.shape.some((d, i) => d !== plan.scoresShape[i])) {
    throw new RangeError(`dScores must have the scores' shape [${plan.scoresShape.join(', ')}] ([..., Lq, Lk]); got [${dScores.shape.join(', ')}]`);
  }
  const params = SCORE_PARAMS.map((name) => options[name]);
  HeapScope.checkTotal(2 * inputBytes([query, key, ...params]) + dScores.data.byteLength + plan.workspaceBytes, 'attentionScoresBackward');
  return withHeap(module, (heap) => {
    const pointers = copyScoreInputs(heap, query, key, options);
    pointers.dScores = heap.copyIn(dScores.data, 'dScores');
    pointers.dQuery = heap.alloc(query.data.byteLength, 'dQuery');
    pointers.dKey = heap.alloc(key.data.byteLength, 'dKey');
    const params = { w: 'dW', w1: 'dW1', w2: 'dW2', v: 'dV' } as const;
    const kinds = options.kind === 'multiplicative' ? (['w'] as const) : options.kind === 'additive' ? (['w1', 'w2', 'v'] as const) : ([] as const);
    for (const name of kinds) pointers[params[name]] = heap.alloc(options[name]!.data.byteLength, params[name]);
    pointers.workspace = heap.alloc(plan.workspaceBytes, 'the score workspace');
    throwIfError(module.runScoresBackward(request, pointers));
    const result: ScoreGradients = {
      dQuery: { data: heap.readFloat32(pointers.dQuery, query.data.length), shape: [...query.shape] },
      dKey: { data: heap.readFloat32(pointers.dKey, key.data.length), shape: [...key.shape] },
    };
    for (const name of kinds) {
      const t = options[name]!;
      result[params[name]] = { data: heap.readFloat32(pointers[params[name]]!, t.data.length), shape: [...t.shape] };
    }
    return result;
  });
}
