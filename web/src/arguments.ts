// Checks of the JavaScript-level types of every argument (is it a Float32Array, is the shape a
// list of non-negative integers, does the data length match). Semantic shape rules (ranks,
// matching dims, broadcasting, GQA) live in the C++ core, so native and wasm callers get the
// same checks and messages.
import type { AttentionRequest, CoreError } from './wasm/sdpa_core.mjs';
import type { AttentionOptions, MaskTensor, Tensor } from './types.js';

export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an Array';
  if (ArrayBuffer.isView(value)) return `a ${value.constructor.name}`;
  if (typeof value === 'object') return `an object with keys [${Object.keys(value).join(', ')}]`;
  return `${typeof value} ${String(value)}`;
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

type DataKind = 'float32' | 'mask';

export function checkTensor(name: string, tensor: unknown, kind: DataKind = 'float32'): void {
  if (typeof tensor !== 'object' || tensor === null || !('data' in tensor) || !('shape' in tensor)) {
    const expected = kind === 'mask' ? '{ data: Uint8Array | Float32Array, shape }' : '{ data: Float32Array, shape }';
    throw new TypeError(`${name} must be a tensor ${expected}; got ${describe(tensor)}`);
  }
  const { data, shape } = tensor as { data: unknown; shape: unknown };
  const ok = data instanceof Float32Array || (kind === 'mask' && data instanceof Uint8Array);
  if (!ok) {
    const expected = kind === 'mask' ? 'a Uint8Array (bool mask, 1 = may attend) or Float32Array (additive mask)' : 'a Float32Array';
    throw new TypeError(`${name}.data must be ${expected}; got ${describe(data)}`);
  }
  const elements = checkShape(name, shape);
  if (elements !== data.length) {
    throw new RangeError(
      `${name}.data has ${data.length} elements but shape [${(shape as number[]).join(', ')}] needs ${elements}`,
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
 * `options.out` as a destination for `elements` output floats of `shape`, or undefined when
 * absent; a TypeError/RangeError naming it otherwise.
 */
export function checkOut(out: unknown, elements: number, shape: readonly number[]): Float32Array | undefined {
  if (out === undefined || out === null) return undefined;
  if (!(out instanceof Float32Array)) {
    throw new TypeError(`out must be a Float32Array of ${elements} elements (the output [${shape.join(', ')}]); got ${describe(out)}`);
  }
  if (out.length !== elements) {
    throw new RangeError(`out has ${out.length} elements but the output [${shape.join(', ')}] needs ${elements}`);
  }
  return out;
}

/** Validates the JS types of one attention call and builds the core's request. */
export function attentionRequest(
  query: Tensor,
  key: Tensor,
  value: Tensor,
  options: AttentionOptions | undefined,
): AttentionRequest {
  checkTensor('query', query);
  checkTensor('key', key);
  checkTensor('value', value);
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    throw new TypeError(`options must be an object; got ${describe(options)}`);
  }
  const { attnMask, isCausal, scale, enableGqa, returnWeights } = options ?? {};
  let maskKind: AttentionRequest['maskKind'] = 'none';
  if (attnMask !== undefined && attnMask !== null) {
    checkTensor('attnMask', attnMask, 'mask');
    maskKind = (attnMask as MaskTensor).data instanceof Uint8Array ? 'bool' : 'additive';
  }
  const { causal, causalOffset } = causalRequest(isCausal);
  if (scale !== undefined && scale !== null && typeof scale !== 'number') {
    throw new TypeError(`scale must be a number; got ${describe(scale)}`);
  }
  return {
    queryShape: query.shape,
    keyShape: key.shape,
    valueShape: value.shape,
    maskKind,
    maskShape: attnMask?.shape ?? [],
    causal,
    causalOffset,
    scale: scale ?? undefined,
    enableGqa: checkBoolean('enableGqa', enableGqa),
    returnWeights: checkBoolean('returnWeights', returnWeights),
  };
}

/** `options.isCausal` as the core's request fields; a TypeError/RangeError naming it otherwise. */
function causalRequest(isCausal: unknown): Pick<AttentionRequest, 'causal' | 'causalOffset'> {
  if (isCausal === undefined || isCausal === false) return { causal: 'none', causalOffset: 0 };
  if (isCausal === true || isCausal === 'top-left') return { causal: 'top-left', causalOffset: 0 };
  if (isCausal === 'bottom-right') return { causal: 'bottom-right', causalOffset: 0 };
  if (typeof isCausal === 'object' && isCausal !== null && !Array.isArray(isCausal) && 'offset' in isCausal) {
    const { offset } = isCausal as { offset: unknown };
    if (typeof offset !== 'number') throw new TypeError(`isCausal.offset must be an integer number; got ${describe(offset)}`);
    if (!Number.isInteger(offset)) throw new RangeError(`isCausal.offset must be an integer; got ${offset}`);
    // Beyond ±2^53 an offset acts as ±2^53 (past -Lq no row sees a key, past Lk every row sees all).
    return { causal: 'offset', causalOffset: Math.min(Math.max(offset, -(2 ** 53)), 2 ** 53) };
  }
  throw new TypeError(`isCausal must be false, true, 'top-left', 'bottom-right' or { offset: n }; got ${describe(isCausal)}`);
}
