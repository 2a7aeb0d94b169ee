// Checks of the tensors this layer copies into the wasm heap (is it a Float32Array, is the shape a
// list of non-negative integers, does the data length match) and of the options of the calls
// written in TypeScript (createAttention, the KV cache, the modules). The attention calls' options
// are read and checked by the C++ core (cpp/bindings/attention_options.def), as are shape rules
// (ranks, matching dims, broadcasting, GQA), so native and wasm callers get the same checks.
import type { CoreError, SdpaModule } from './wasm/sdpa_core.mjs';
import { isFloat16Array } from './float16.js';
import type {
  AttentionOptions,
  CpuTensor,
  CreateAttentionOptions,
  DocumentIds,
  DType,
  KvCacheDType,
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
} from './extras/types.js';

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

export const CREATE_ATTENTION_OPTION_NAMES = optionNames<CreateAttentionOptions>()([
  'backend', 'threads', 'relaxedSimd', 'gpuDevice', 'gpu', 'gpuLimits',
]);
export const GPU_LIMIT_NAMES = optionNames<GpuLimitCaps>()([
  'maxStorageBufferBindingSize', 'maxBufferSize', 'maxComputeWorkgroupsPerDimension',
  'maxComputeWorkgroupStorageSize', 'maxComputeInvocationsPerWorkgroup', 'shaderF16', 'subgroups', 'packedIntegerDotProduct',
  'prefillSplitKeys',
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
export const SELF_ATTENTION_FORWARD_OWN_OPTIONS = ['attnMask', 'isCausal', 'dropout'] as const;
export const SELF_ATTENTION_BACKWARD_OWN_OPTIONS = ['attnMask', 'isCausal'] as const;
export const MULTIHEAD_OPTION_NAMES = optionNames<MultiheadAttentionOptions>()([
  'embedDim', 'numHeads', 'numKvHeads', 'kdim', 'vdim', 'bias', 'batchFirst', 'weights', 'seed', 'backend',
]);
export const MULTIHEAD_WEIGHT_NAMES = optionNames<MultiheadAttentionWeights>()([
  'inProjWeight', 'inProjBias', 'qProjWeight', 'kProjWeight', 'vProjWeight',
  'qProjBias', 'kProjBias', 'vProjBias', 'outProjWeight', 'outProjBias',
]);
export const MULTIHEAD_FORWARD_OWN_OPTIONS = ['keyPaddingMask', 'attnMask', 'isCausal', 'needWeights', 'averageAttnWeights', 'dropout'] as const;

/** The options of the attention calls that the modules pass through (cpp/bindings/attention_options.def). */
export function variantOptionNames(module: Pick<SdpaModule, 'optionNames'>): readonly string[] {
  let names = variantNames.get(module);
  if (!names) {
    names = module.optionNames().modules;
    variantNames.set(module, names);
  }
  return names;
}
const variantNames = new WeakMap<object, readonly string[]>();

/** The variants' options of a module's options object, to pass through to the attention call. */
export function variantOptions(module: Pick<SdpaModule, 'optionNames'>, options: VariantOptions): VariantOptions {
  const picked: Record<string, unknown> = {};
  for (const name of variantOptionNames(module)) {
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

/**
 * Throws an error of the C++ core as the TypeError or RangeError it names, its placeholders
 * filled in (cpp/bindings/sdpa_core.d.mts CoreError) for the public call `where`.
 */
export function throwIfError(error: CoreError | null | undefined, where = 'this call'): void {
  if (!error) return;
  const closest = error.given !== undefined ? closestName(error.given, error.known ?? []) : undefined;
  const message = error.message
    .replace('{where}', where)
    .replace('{closest}', closest ? `; did you mean '${closest}'?` : '')
    .replace('{got}', () => describe(error.value))
    .replace('{value}', () => String(error.value));
  throw error.name === 'TypeError' ? new TypeError(message) : new RangeError(message);
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
const KV_CACHE_DTYPES: readonly KvCacheDType[] = [...DTYPES, 'int8', 'int4'];

/** `dtype` as an element type; a TypeError naming `name` and the closest known one otherwise. */
export function checkDtype(name: string, dtype: unknown): DType {
  if (dtype === 'float32' || dtype === 'float16') return dtype;
  const closest = typeof dtype === 'string' ? closestName(dtype, DTYPES) : undefined;
  throw new TypeError(`${name} must be 'float32' or 'float16'${closest ? `; did you mean '${closest}'?` : ''}; got ${describe(dtype)}`);
}

export function checkKvCacheDtype(name: string, dtype: unknown): KvCacheDType {
  if ((KV_CACHE_DTYPES as readonly unknown[]).includes(dtype)) return dtype as KvCacheDType;
  const closest = typeof dtype === 'string' ? closestName(dtype, KV_CACHE_DTYPES) : undefined;
  throw new TypeError(`${name} must be one of ${KV_CACHE_DTYPES.map((d) => `'${d}'`).join(', ')}${closest ? `; did you mean '${closest}'?` : ''}; got ${describe(dtype)}`);
}

/** The element type of a checked attention input, on the CPU or (`{ buffer, dtype? }`) the GPU. */
export function tensorDtype(tensor: TensorInput): DType {
  return tensor.dtype === 'float16' || ('data' in tensor && isFloat16Array(tensor.data)) ? 'float16' : 'float32';
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

/** Document ids: `{ data: Int32Array, shape }` with matching lengths (the shape is checked in the core). */
function checkDocuments(name: string, documents: unknown): { data: Int32Array; shape: readonly number[] } | undefined {
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

/**
 * The tensors of an attention call's options that this layer copies into the heap (the mask and
 * the document ids), their JS types checked; the core checks the rest of the options.
 */
export function optionTensors(options: unknown): { attnMask?: MaskTensor; queryDocuments?: DocumentIds; keyDocuments?: DocumentIds } {
  if (typeof options !== 'object' || options === null) return {};
  const { attnMask, queryDocuments, keyDocuments } = options as AttentionOptions;
  const tensors: { attnMask?: MaskTensor; queryDocuments?: DocumentIds; keyDocuments?: DocumentIds } = {};
  if (attnMask !== undefined && attnMask !== null) {
    checkTensor('attnMask', attnMask, 'mask');
    tensors.attnMask = attnMask;
  }
  const q = checkDocuments('queryDocuments', queryDocuments), k = checkDocuments('keyDocuments', keyDocuments);
  if (q) tensors.queryDocuments = q;
  if (k) tensors.keyDocuments = k;
  return tensors;
}
