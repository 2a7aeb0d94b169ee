// Checks of the JavaScript-level types of every argument (is it a Float32Array, is the shape a
// list of non-negative integers, does the data length match). Semantic shape rules (ranks,
// matching dims, broadcasting, GQA) live in the C++ core, so native and wasm callers get the
// same checks and messages.
import type { AttentionRequest, CoreError } from './wasm/sdpa_core.mjs';
import { isFloat16Array } from './float16.js';
import type {
  AttentionOptions,
  CpuTensor,
  CreateAttentionOptions,
  DType,
  GpuLimitCaps,
  KvCacheAppendOptions,
  KvCacheOptions,
  MaskTensor,
  Float16ArrayLike,
  SoftmaxOptions,
  TensorInput,
  TraceOptions,
  VariantOptions,
} from './types.js';
import type {
  BackwardOptions,
  DropoutOptions,
  MultiheadAttentionOptions,
  MultiheadAttentionWeights,
  MultiheadForwardOptions,
  ScoreOptions,
  SelfAttentionBackwardOptions,
  SelfAttentionForwardOptions,
  SelfAttentionOptions,
  UniformOptions,
} from './extras/gradient-types.js';

export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an Array';
  if (ArrayBuffer.isView(value)) return `a ${value.constructor.name}`;
  if (typeof value === 'object') return `an object with keys [${Object.keys(value).join(', ')}]`;
  return `${typeof value} ${String(value)}`;
}

// ---- option names -----------------------------------------------------------------------------
// A misspelled option (`isCasual: true`) would otherwise be ignored and give a silently wrong
// answer, so every options object the package takes is checked against the names of its type.

type MissingNames<T, N extends readonly unknown[]> = Exclude<keyof T, N[number]>;

/**
 * `optionNames<T>()([...])`: the names of T's options as a runtime list, checked at compile time
 * both ways: a name that is not a key of T, and a key of T left out of the list (reported as
 * `missingOptionNames: 'thatKey'`), are type errors. So an option added to an interface cannot be
 * forgotten here, where it would be rejected as unknown.
 */
function optionNames<T extends object>() {
  return <const N extends readonly (keyof T & string)[]>(
    names: N & ([MissingNames<T, N>] extends [never] ? unknown : { missingOptionNames: MissingNames<T, N> }),
  ): readonly string[] => names;
}

export const ATTENTION_OPTION_NAMES = optionNames<AttentionOptions>()([
  'attnMask', 'isCausal', 'scale', 'softcap', 'keyLengths', 'window', 'alibi', 'alibiSlopes', 'sinks',
  'queryDocuments', 'keyDocuments', 'enableGqa', 'returnScores', 'returnWeights', 'returnLogSumExp', 'out',
  'outputLocation', 'outputDtype',
]);
export const BACKWARD_OPTION_NAMES = optionNames<BackwardOptions>()([
  'attnMask', 'isCausal', 'scale', 'softcap', 'keyLengths', 'window', 'alibi', 'alibiSlopes', 'sinks',
  'queryDocuments', 'keyDocuments', 'enableGqa', 'output', 'logSumExp', 'returnAttnMaskGrad',
]);
export const TRACE_OPTION_NAMES = optionNames<TraceOptions>()([
  'attnMask', 'isCausal', 'scale', 'softcap', 'keyLengths', 'window', 'alibi', 'alibiSlopes', 'sinks',
  'queryDocuments', 'keyDocuments', 'enableGqa', 'batch', 'head', 'row',
]);
export const WINDOW_OPTION_NAMES = optionNames<NonNullable<AttentionOptions['window']>>()(['left', 'right']);
export const CREATE_ATTENTION_OPTION_NAMES = optionNames<CreateAttentionOptions>()([
  'backend', 'threads', 'relaxedSimd', 'gpuDevice', 'gpu', 'gpuLimits',
]);
export const GPU_LIMIT_NAMES = optionNames<GpuLimitCaps>()([
  'maxStorageBufferBindingSize', 'maxBufferSize', 'maxComputeWorkgroupsPerDimension',
  'maxComputeWorkgroupStorageSize', 'maxComputeInvocationsPerWorkgroup', 'shaderF16',
]);
export const KV_CACHE_OPTION_NAMES = optionNames<KvCacheOptions>()(['batch', 'kvHeads', 'maxLength', 'headDim', 'valueDim', 'dtype']);
export const KV_CACHE_APPEND_OPTION_NAMES = optionNames<KvCacheAppendOptions>()(['lengths']);
export const SOFTMAX_OPTION_NAMES = optionNames<SoftmaxOptions>()(['temperature']);
export const UNIFORM_OPTION_NAMES = optionNames<UniformOptions>()(['low', 'high', 'offset']);
export const DROPOUT_OPTION_NAMES = optionNames<DropoutOptions>()(['p', 'seed']);
/** One list for every `kind`: a parameter only another kind uses is a known name (and is ignored). */
export const SCORE_OPTION_NAMES = optionNames<ScoreOptions>()(['kind', 'w', 'w1', 'w2', 'v', 'scale']);
export const SELF_ATTENTION_OPTION_NAMES = optionNames<SelfAttentionOptions>()(['dModel', 'dK', 'dV', 'seed', 'weights', 'backend']);
export const SELF_ATTENTION_WEIGHT_NAMES = optionNames<NonNullable<SelfAttentionOptions['weights']>>()(['wQ', 'wK', 'wV']);
/** The variants' options, which the modules pass through (see {@link variantOptions}). */
export const VARIANT_OPTION_NAMES = optionNames<VariantOptions>()([
  'softcap', 'keyLengths', 'window', 'alibi', 'alibiSlopes', 'sinks', 'queryDocuments', 'keyDocuments',
]);
export const SELF_ATTENTION_FORWARD_OPTION_NAMES = optionNames<SelfAttentionForwardOptions>()([
  'attnMask', 'isCausal', 'dropout', ...VARIANT_OPTION_NAMES as VariantName[],
]);
export const SELF_ATTENTION_BACKWARD_OPTION_NAMES = optionNames<SelfAttentionBackwardOptions>()([
  'attnMask', 'isCausal', ...VARIANT_OPTION_NAMES as VariantName[],
]);
export const MULTIHEAD_OPTION_NAMES = optionNames<MultiheadAttentionOptions>()([
  'embedDim', 'numHeads', 'numKvHeads', 'kdim', 'vdim', 'bias', 'batchFirst', 'weights', 'seed', 'backend',
]);
export const MULTIHEAD_WEIGHT_NAMES = optionNames<MultiheadAttentionWeights>()([
  'inProjWeight', 'inProjBias', 'qProjWeight', 'kProjWeight', 'vProjWeight',
  'qProjBias', 'kProjBias', 'vProjBias', 'outProjWeight', 'outProjBias',
]);
export const MULTIHEAD_FORWARD_OPTION_NAMES = optionNames<MultiheadForwardOptions>()([
  'keyPaddingMask', 'attnMask', 'isCausal', 'needWeights', 'averageAttnWeights', 'dropout', ...VARIANT_OPTION_NAMES as VariantName[],
]);

type VariantName = keyof VariantOptions;

/** The variants' options of a module's options object, to pass through to the attention call. */
export function variantOptions(options: VariantOptions): VariantOptions {
  const picked: Record<string, unknown> = {};
  for (const name of VARIANT_OPTION_NAMES) {
    if ((options as Record<string, unknown>)[name] !== undefined) picked[name] = (options as Record<string, unknown>)[name];
  }
  return picked as VariantOptions;
}

/**
 * Throws a TypeError for the first own key of `options` that is not in `known`, naming it, the
 * closest known name when one is close, and every known name; `where` names the call or object
 * (`'scaledDotProductAttention'`, `'createAttention options.gpuLimits'`). Keys are checked
 * whatever their value: `{ isCasual: undefined }` is a typo too (PyTorch rejects unknown keyword
 * arguments the same way).
 */
export function checkOptionNames(where: string, options: object, known: readonly string[]): void {
  for (const name of Object.keys(options)) {
    if (known.includes(name)) continue;
    const closest = closestName(name, known);
    const hint = closest === undefined ? '' : `; did you mean '${closest}'?`;
    throw new TypeError(`unknown option '${name}' of ${where}${hint} (known: ${known.join(', ')})`);
  }
}

/** Lower case without '_' and '-', so that PyTorch's `is_causal` and `IsCausal` find `isCausal`. */
function normalizeName(name: string): string {
  return name.toLowerCase().replace(/[_-]/g, '');
}

/**
 * The known name closest to `name`: the smallest edit distance (Damerau–Levenshtein, adjacent
 * swaps counting 1, between the normalized names), when that distance is at most
 * max(2, ⌊length/3⌋) of the known name and short of rewriting the whole name, or when the known
 * name contains it (`mask` → `attnMask`); undefined when none is that close.
 */
export function closestName(name: string, known: readonly string[]): string | undefined {
  const a = normalizeName(name);
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const b = normalizeName(candidate);
    const distance = editDistance(a, b);
    const close = distance <= Math.max(2, Math.floor(b.length / 3)) && distance < Math.max(a.length, b.length);
    const contained = a.length >= 3 && b.includes(a);
    if ((close || contained) && distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

/** Optimal-string-alignment distance: insertions, deletions, substitutions and adjacent swaps. */
function editDistance(a: string, b: string): number {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => {
    const row = new Array<number>(b.length + 1).fill(0);
    row[0] = i;
    return row;
  });
  for (let j = 0; j <= b.length; j++) rows[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(rows[i - 1]![j]! + 1, rows[i]![j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      rows[i]![j] = d;
    }
  }
  return rows[a.length]![b.length]!;
}

export function product(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** Throws a validation error of the C++ core as the TypeError or RangeError it names. */
export function throwIfError(error: CoreError | null): void {
  if (error) throw error.name === 'TypeError' ? new TypeError(error.message) : new RangeError(error.message);
}

export function checkShape(name: string, shape: unknown): number {
  if (!Array.isArray(shape)) {
    throw new TypeError(`${name}.shape must be an array of dimension sizes; got ${describe(shape)}`);
  }
  let elements = 1;
  for (const d of shape) {
    if (typeof d !== 'number' || !Number.isSafeInteger(d) || d < 0) {
      throw new RangeError(`${name}.shape must hold non-negative integers; got [${shape.join(', ')}]`);
    }
    elements *= d;
  }
  return elements;
}

/** 'input': an attention input, float32 or float16 (`{ data: Uint16Array | Float16Array, shape, dtype: 'float16' }`). */
type DataKind = 'float32' | 'mask' | 'input';

const DTYPES: readonly DType[] = ['float32', 'float16'];

/** `dtype` as an element type; a TypeError naming `name` and the closest known one otherwise. */
export function checkDtype(name: string, dtype: unknown): DType {
  if (dtype === 'float32' || dtype === 'float16') return dtype;
  const closest = typeof dtype === 'string' ? closestName(dtype, DTYPES) : undefined;
  throw new TypeError(`${name} must be 'float32' or 'float16'${closest ? `; did you mean '${closest}'?` : ''}; got ${describe(dtype)}`);
}

/** The element type of a checked attention input, on the CPU or (`{ buffer, dtype? }`) the GPU. */
export function tensorDtype(tensor: TensorInput): DType {
  return tensor.dtype === 'float16' || ('data' in tensor && isFloat16Array(tensor.data)) ? 'float16' : 'float32';
}

/** `request` with the element types of its (checked) query, key and value. */
export function withInputTypes(request: AttentionRequest, query: TensorInput, key: TensorInput, value: TensorInput): AttentionRequest {
  request.queryType = tensorDtype(query);
  request.keyType = tensorDtype(key);
  request.valueType = tensorDtype(value);
  return request;
}

export function checkTensor(name: string, tensor: unknown, kind: DataKind = 'float32'): void {
  if (typeof tensor !== 'object' || tensor === null || !('data' in tensor) || !('shape' in tensor)) {
    const expected = kind === 'mask' ? '{ data: Uint8Array | Float32Array, shape }'
      : kind === 'input' ? "{ data: Float32Array, shape } or { data: Uint16Array | Float16Array, shape, dtype: 'float16' }"
        : '{ data: Float32Array, shape }';
    throw new TypeError(`${name} must be a tensor ${expected}; got ${describe(tensor)}`);
  }
  const { data, shape } = tensor as { data: unknown; shape: unknown };
  const half = data instanceof Uint16Array || isFloat16Array(data);
  if (kind === 'input') {
    const given = (tensor as { dtype?: unknown }).dtype;
    const dtype = given === undefined ? (isFloat16Array(data) ? 'float16' : 'float32') : checkDtype(`${name}.dtype`, given);
    if (dtype === 'float16' && !half) {
      throw new TypeError(`${name}.data must be a Uint16Array of float16 bit patterns (toFloat16 makes them) or a Float16Array, as ${name}.dtype is 'float16'; got ${describe(data)}`);
    }
    if (dtype === 'float32' && !(data instanceof Float32Array)) {
      const hint = data instanceof Uint16Array ? ` (for float16 bit patterns pass ${name}.dtype: 'float16')` : '';
      throw new TypeError(`${name}.data must be a Float32Array${hint}; got ${describe(data)}`);
    }
  } else if (!(data instanceof Float32Array || (kind === 'mask' && data instanceof Uint8Array))) {
    const expected = kind === 'mask' ? 'a Uint8Array (bool mask, 1 = may attend) or Float32Array (additive mask)' : 'a Float32Array';
    const hint = half ? ' (float16 tensors are for scaledDotProductAttention and KV caches; widen with fromFloat16)' : '';
    throw new TypeError(`${name}.data must be ${expected}${hint}; got ${describe(data)}`);
  }
  const elements = checkShape(name, shape);
  const length = (data as ArrayLike<number>).length;
  if (elements !== length) {
    throw new RangeError(
      `${name}.data has ${length} elements but shape [${(shape as number[]).join(', ')}] needs ${elements}`,
    );
  }
}

export function checkNumber(name: string, value: unknown): number {
  if (typeof value !== 'number') throw new TypeError(`${name} must be a number; got ${describe(value)}`);
  return value;
}

export function checkBoolean(name: string, value: unknown): boolean {
  if (value === undefined) return false;
  if (typeof value !== 'boolean') throw new TypeError(`${name} must be a boolean; got ${describe(value)}`);
  return value;
}

/**
 * `options.out` as a destination for `elements` output values of `shape` and `dtype` (a
 * Float32Array; a Uint16Array or Float16Array for float16), or undefined when absent; a
 * TypeError/RangeError naming it otherwise.
 */
export function checkOut<D extends DType>(out: unknown, elements: number, shape: readonly number[], dtype: D): (D extends 'float16' ? Uint16Array | Float16ArrayLike : Float32Array) | undefined;
export function checkOut(out: unknown, elements: number, shape: readonly number[], dtype: DType): Float32Array | Uint16Array | Float16ArrayLike | undefined {
  if (out === undefined || out === null) return undefined;
  const ok = dtype === 'float16' ? out instanceof Uint16Array || isFloat16Array(out) : out instanceof Float32Array;
  if (!ok) {
    const expected = dtype === 'float16' ? 'a Uint16Array or Float16Array (the output is float16)' : 'a Float32Array';
    throw new TypeError(`out must be ${expected} of ${elements} elements (the output [${shape.join(', ')}]); got ${describe(out)}`);
  }
  const length = (out as ArrayLike<number>).length;
  if (length !== elements) {
    throw new RangeError(`out has ${length} elements but the output [${shape.join(', ')}] needs ${elements}`);
  }
  return out as Float32Array | Uint16Array | Float16ArrayLike;
}

/** `options.outputDtype`, defaulting to the query's element type. */
export function outputDtype(option: unknown, queryDtype: DType): DType {
  return option === undefined || option === null ? queryDtype : checkDtype('outputDtype', option);
}

/**
 * Validates the JS types of one attention call and its option names, and builds the core's
 * request; `where` names the call in errors.
 */
export function attentionRequest(
  where: string,
  query: CpuTensor,
  key: CpuTensor,
  value: CpuTensor,
  options: AttentionOptions | undefined,
  float16 = false,
): AttentionRequest {
  const kind = float16 ? 'input' : 'float32';
  checkTensor('query', query, kind);
  checkTensor('key', key, kind);
  checkTensor('value', value, kind);
  const location: unknown = options?.outputLocation;
  if (location !== undefined && location !== null && location !== 'cpu') {
    throw new TypeError(`${where} returns CPU arrays: outputLocation must be 'cpu' (or absent); 'gpu' is for scaledDotProductAttention on backend 'webgpu'; got ${describe(location)}`);
  }
  const request = requestForShapes(where, query, key.shape, value.shape, options);
  return float16 ? withInputTypes(request, query, key, value) : request;
}

/**
 * {@link attentionRequest} for key/value given by their shapes (a KV cache's); the query is
 * already checked.
 */
export function requestForShapes(
  where: string,
  query: { shape: readonly number[] },
  keyShape: readonly number[],
  valueShape: readonly number[],
  options: AttentionOptions | undefined,
): AttentionRequest {
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    throw new TypeError(`options must be an object; got ${describe(options)}`);
  }
  if (options !== undefined) checkOptionNames(where, options, ATTENTION_OPTION_NAMES);
  const { attnMask, isCausal, scale, softcap, enableGqa, returnWeights, returnScores, outputDtype: dtype } = options ?? {};
  if (dtype !== undefined && dtype !== null) checkDtype('outputDtype', dtype);
  let maskKind: AttentionRequest['maskKind'] = 'none';
  if (attnMask !== undefined && attnMask !== null) {
    checkTensor('attnMask', attnMask, 'mask');
    maskKind = (attnMask as MaskTensor).data instanceof Uint8Array ? 'bool' : 'additive';
  }
  const { causal, causalOffset } = causalRequest(isCausal);
  if (scale !== undefined && scale !== null && typeof scale !== 'number') {
    throw new TypeError(`scale must be a number; got ${describe(scale)}`);
  }
  if (softcap !== undefined) checkNumber('softcap', softcap);
  if (softcap !== undefined && !(Number.isFinite(softcap) && softcap >= 0)) {
    throw new RangeError(`softcap must be a finite number > 0 (0 = off); got ${softcap}`);
  }
  return {
    queryShape: query.shape,
    keyShape,
    valueShape,
    maskKind,
    maskShape: attnMask?.shape ?? [],
    causal,
    causalOffset,
    scale: scale ?? undefined,
    softcap,
    ...variantRequest(options ?? {}),
    returnScores: scoreStage(returnScores),
    enableGqa: checkBoolean('enableGqa', enableGqa),
    returnWeights: checkBoolean('returnWeights', returnWeights),
  };
}

/** `returnScores` as the core's stage name; a TypeError naming it otherwise. */
function scoreStage(stage: unknown): NonNullable<AttentionRequest['returnScores']> {
  if (stage === undefined) return 'none';
  if (stage === 'scaled' || stage === 'softcapped' || stage === 'masked') return stage;
  throw new TypeError(`returnScores must be 'scaled', 'softcapped' or 'masked'; got ${describe(stage)}`);
}

/** A per-batch or per-head option: typed array `type` data, its length checked in the core. */
function checkArray<T extends Int32Array | Float32Array>(name: string, value: unknown, type: new (n: number) => T, expected: string): T | undefined {
  if (value === undefined || value === null) return undefined;
  if (!(value instanceof type)) throw new TypeError(`${name} must be ${expected}; got ${describe(value)}`);
  return value;
}

/** Document ids: `{ data: Int32Array, shape }` with matching lengths (the shape is checked in the core). */
export function checkDocuments(name: string, documents: unknown): { data: Int32Array; shape: readonly number[] } | undefined {
  if (documents === undefined || documents === null) return undefined;
  if (typeof documents !== 'object' || !('data' in documents) || !('shape' in documents)) {
    throw new TypeError(`${name} must be document ids { data: Int32Array, shape }; got ${describe(documents)}`);
  }
  const { data, shape } = documents as { data: unknown; shape: unknown };
  if (!(data instanceof Int32Array)) throw new TypeError(`${name}.data must be an Int32Array; got ${describe(data)}`);
  const elements = checkShape(name, shape);
  if (elements !== data.length) {
    throw new RangeError(`${name}.data has ${data.length} elements but shape [${(shape as number[]).join(', ')}] needs ${elements}`);
  }
  return documents as { data: Int32Array; shape: readonly number[] };
}

/** keyLengths, window, ALiBi, sinks and documents as the core's request fields (their JS types checked here). */
function variantRequest(options: AttentionOptions): Partial<AttentionRequest> {
  const request: Partial<AttentionRequest> = {};
  const keyLengths = checkArray('keyLengths', options.keyLengths, Int32Array, 'an Int32Array [B] of key lengths');
  if (keyLengths) request.keyLengths = keyLengths;
  const { window } = options;
  if (window !== undefined && window !== null) {
    if (typeof window !== 'object' || Array.isArray(window)) {
      throw new TypeError(`window must be { left?: n, right?: n }; got ${describe(window)}`);
    }
    checkOptionNames('window', window, WINDOW_OPTION_NAMES);
    for (const side of ['left', 'right'] as const) {
      const n = window[side];
      if (n === undefined) continue;
      if (typeof n !== 'number') throw new TypeError(`window.${side} must be a number; got ${describe(n)}`);
      if (!(Number.isInteger(n) && n >= 0)) throw new RangeError(`window.${side} must be a non-negative integer (0 = this position only); got ${n}`);
      request[side === 'left' ? 'windowLeft' : 'windowRight'] = Math.min(n, 2 ** 53);
    }
  }
  if (options.alibi !== undefined) request.alibi = checkBoolean('alibi', options.alibi);
  const slopes = checkArray('alibiSlopes', options.alibiSlopes, Float32Array, 'a Float32Array [Hq] of ALiBi slopes');
  if (slopes) request.alibiSlopes = slopes;
  const sinks = checkArray('sinks', options.sinks, Float32Array, 'a Float32Array [Hq] of sink logits');
  if (sinks) request.sinks = sinks;
  const queryDocuments = checkDocuments('queryDocuments', options.queryDocuments);
  const keyDocuments = checkDocuments('keyDocuments', options.keyDocuments);
  if ((queryDocuments === undefined) !== (keyDocuments === undefined)) {
    throw new TypeError('queryDocuments and keyDocuments go together: pass both (for self-attention, the same ids twice) or neither');
  }
  if (queryDocuments && keyDocuments) {
    request.queryDocumentsShape = queryDocuments.shape;
    request.keyDocumentsShape = keyDocuments.shape;
  }
  return request;
}

/** `options.isCausal` as the core's request fields; a TypeError/RangeError naming it otherwise. */
function causalRequest(isCausal: unknown): Pick<AttentionRequest, 'causal' | 'causalOffset'> {
  if (isCausal === undefined || isCausal === false) return { causal: 'none', causalOffset: 0 };
  if (isCausal === true || isCausal === 'top-left') return { causal: 'top-left', causalOffset: 0 };
  if (isCausal === 'bottom-right') return { causal: 'bottom-right', causalOffset: 0 };
  if (typeof isCausal === 'object' && isCausal !== null && !Array.isArray(isCausal) && !ArrayBuffer.isView(isCausal)) {
    checkOptionNames('isCausal', isCausal, ['offset']);
  }
  if (typeof isCausal === 'object' && isCausal !== null && 'offset' in isCausal) {
    const { offset } = isCausal as { offset: unknown };
    if (typeof offset !== 'number') throw new TypeError(`isCausal.offset must be an integer number; got ${describe(offset)}`);
    if (!Number.isInteger(offset)) throw new RangeError(`isCausal.offset must be an integer; got ${offset}`);
    // Beyond ±2^53 an offset acts as ±2^53 (past -Lq no row sees a key, past Lk every row sees all).
    return { causal: 'offset', causalOffset: Math.min(Math.max(offset, -(2 ** 53)), 2 ** 53) };
  }
  throw new TypeError(`isCausal must be false, true, 'top-left', 'bottom-right' or { offset: n }; got ${describe(isCausal)}`);
}
