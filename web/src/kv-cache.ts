// The KV cache: keys [B, Hkv, maxLength, E] and values [B, Hkv, maxLength, Ev] allocated once in
// the wasm heap; `append` writes new rows in place and attention calls read them in place (the
// core takes the per-head strides maxLength·E and maxLength·Ev).
import type { AttentionRequest, SdpaModule } from './wasm/sdpa_core.mjs';
import { checkOptionNames, checkTensor, describe, KV_CACHE_APPEND_OPTION_NAMES, KV_CACHE_OPTION_NAMES, requestForShapes } from './arguments.js';
import { formatBytes, HeapScope } from './heap.js';
import type { AttentionOptions, KvCacheAppendOptions, KvCacheOptions, Tensor } from './types.js';

/** Largest element count of one tensor (cpp/core/problem.h kMaxTensorElements). */
const MAX_TENSOR_ELEMENTS = 2 ** 30;


/**
 * A key/value cache for generation, created by `attn.createKvCache`: preallocated once, grown
 * by {@link KvCache.append}, read in place by `attn.scaledDotProductAttention(query, cache)`.
 */
export class KvCache {
  /** B, Hkv, maxLength, E, Ev. */
  readonly batch: number;
  readonly kvHeads: number;
  readonly maxLength: number;
  readonly headDim: number;
  readonly valueDim: number;
  /** @internal the module whose heap holds the cache */
  readonly module: SdpaModule;
  /** @internal heap byte addresses of the keys and the values */
  readonly keyAddress: number;
  readonly valueAddress: number;
  private readonly held: Int32Array;
  private disposed = false;

  /** @internal use `attn.createKvCache` */
  constructor(module: SdpaModule, options: KvCacheOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new TypeError(`createKvCache options must be an object { batch, kvHeads, maxLength, headDim, valueDim? }; got ${describe(options)}`);
    }
    checkOptionNames('createKvCache', options, KV_CACHE_OPTION_NAMES);
    const size = (name: keyof KvCacheOptions, value: unknown): number => {
      if (typeof value !== 'number') throw new TypeError(`createKvCache: ${name} must be a number; got ${describe(value)}`);
      if (!(Number.isSafeInteger(value) && value >= 1)) throw new RangeError(`createKvCache: ${name} must be an integer ≥ 1; got ${value}`);
      return value;
    };
    this.batch = size('batch', options.batch);
    this.kvHeads = size('kvHeads', options.kvHeads);
    this.maxLength = size('maxLength', options.maxLength);
    this.headDim = size('headDim', options.headDim);
    this.valueDim = options.valueDim === undefined ? this.headDim : size('valueDim', options.valueDim);
    const rows = this.batch * this.kvHeads * this.maxLength;
    for (const [name, dim] of [['keys', this.headDim], ['values', this.valueDim]] as const) {
      if (rows * dim > MAX_TENSOR_ELEMENTS) {
        throw new RangeError(`createKvCache: the ${name} [B, Hkv, maxLength, ${name === 'keys' ? 'E' : 'Ev'}] = [${this.batch}, ${this.kvHeads}, ${this.maxLength}, ${dim}] have more than 2^30 elements, more than wasm32 memory can hold`);
      }
    }
    const keyBytes = 4 * rows * this.headDim, valueBytes = 4 * rows * this.valueDim;
    HeapScope.checkTotal(keyBytes + valueBytes, 'this KV cache');
    this.module = module;
    this.keyAddress = module._malloc(keyBytes) >>> 0;
    this.valueAddress = this.keyAddress === 0 ? 0 : module._malloc(valueBytes) >>> 0;
    if (this.valueAddress === 0) {
      if (this.keyAddress !== 0) module._free(this.keyAddress);
      throw new RangeError(`out of WebAssembly memory: this KV cache needs ${formatBytes(keyBytes + valueBytes)}`);
    }
    module.HEAPU8.fill(0, this.keyAddress, this.keyAddress + keyBytes);
    module.HEAPU8.fill(0, this.valueAddress, this.valueAddress + valueBytes);
    this.held = new Int32Array(this.batch);
  }

  /** Tokens held: the longest sequence's when the batch is ragged (see {@link KvCache.lengths}). */
  get length(): number {
    this.checkUsable();
    let longest = 0;
    for (const n of this.held) longest = Math.max(longest, n);
    return longest;
  }

  /** Tokens held by each sequence `[B]` (a copy). */
  get lengths(): Int32Array {
    this.checkUsable();
    return this.held.slice();
  }

  /** Whether the sequences hold different numbers of tokens. */
  get ragged(): boolean {
    this.checkUsable();
    return this.held.some((n) => n !== this.held[0]);
  }

  /**
   * Appends key `[B, Hkv, n, E]` and value `[B, Hkv, n, Ev]` (n ≥ 1: a prompt, then a token at a
   * time) after each sequence's tokens, written in place. `lengths` (ragged batches): how many of
   * the n rows of each sequence are real. Past `maxLength` it is a RangeError and nothing is written.
   */
  append(key: Tensor, value: Tensor, options?: KvCacheAppendOptions): void {
    this.checkUsable();
    checkTensor('key', key);
    checkTensor('value', value);
    const n = key.shape[2];
    const expect = (name: string, shape: readonly number[], dim: number, dimName: string) => {
      if (shape.length !== 4 || shape[0] !== this.batch || shape[1] !== this.kvHeads || shape[2] !== n || shape[3] !== dim) {
        throw new RangeError(`${name} must have shape [B, Hkv, n, ${dimName}] = [${this.batch}, ${this.kvHeads}, n, ${dim}] (n ≥ 1, the same for key and value); got [${shape.join(', ')}]`);
      }
    };
    expect('key', key.shape, this.headDim, 'E');
    expect('value', value.shape, this.valueDim, 'Ev');
    if (n === undefined || n < 1) throw new RangeError(`key/value must append n ≥ 1 rows; got shape [${key.shape.join(', ')}]`);
    if (options !== undefined && (typeof options !== 'object' || options === null)) {
      throw new TypeError(`append options must be an object { lengths? }; got ${describe(options)}`);
    }
    if (options) checkOptionNames('KvCache.append', options, KV_CACHE_APPEND_OPTION_NAMES);
    const lengths = this.appendLengths(n, options?.lengths);
    for (let b = 0; b < this.batch; b++) {
      const added = lengths ? lengths[b]! : n;
      if (this.held[b]! + added > this.maxLength) {
        throw new RangeError(`KvCache.append: sequence ${b} holds ${this.held[b]} tokens; ${added} more would pass maxLength = ${this.maxLength} (nothing was written)`);
      }
    }
    const heap = this.module.HEAPF32;
    for (let b = 0; b < this.batch; b++) {
      const added = lengths ? lengths[b]! : n;
      for (let h = 0; h < this.kvHeads; h++) {
        const head = b * this.kvHeads + h;
        for (const [data, dim, address] of [[key.data, this.headDim, this.keyAddress], [value.data, this.valueDim, this.valueAddress]] as const) {
          const from = head * n * dim;
          heap.set(data.subarray(from, from + added * dim), address / 4 + (head * this.maxLength + this.held[b]!) * dim);
        }
      }
      this.held[b] = this.held[b]! + added;
    }
  }

  /** Forgets every token (the memory stays allocated). */
  reset(): void {
    this.checkUsable();
    this.held.fill(0);
  }

  /** Frees the cache's memory. Later use, including a second `dispose()`, throws. */
  dispose(): void {
    this.checkUsable();
    this.disposed = true;
    this.module._free(this.keyAddress);
    this.module._free(this.valueAddress);
  }

  /** @internal Throws when disposed. */
  checkUsable(): void {
    if (this.disposed) throw new Error('sdpa-web: this KvCache was disposed');
  }

  /** @internal The held keys and values as dense tensors [B, Hkv, length, E|Ev] (copies; rows past a sequence's length are zeros). */
  denseTensors(): { key: Tensor; value: Tensor } {
    const length = this.length;
    const copy = (address: number, dim: number): Tensor => {
      const data = new Float32Array(this.batch * this.kvHeads * length * dim);
      const heap = this.module.HEAPF32;
      for (let b = 0; b < this.batch; b++) {
        for (let h = 0; h < this.kvHeads; h++) {
          const head = b * this.kvHeads + h;
          const from = address / 4 + head * this.maxLength * dim;
          data.set(heap.subarray(from, from + this.held[b]! * dim), head * length * dim);
        }
      }
      return { data, shape: [this.batch, this.kvHeads, length, dim] };
    };
    return { key: copy(this.keyAddress, this.headDim), value: copy(this.valueAddress, this.valueDim) };
  }

  private appendLengths(n: number, lengths: unknown): Int32Array | readonly number[] | undefined {
    if (lengths === undefined || lengths === null) return undefined;
    if (!(lengths instanceof Int32Array) && !Array.isArray(lengths)) {
      throw new TypeError(`lengths must be an Int32Array or number[] [B] of rows to append per sequence; got ${describe(lengths)}`);
    }
    if (lengths.length !== this.batch) throw new RangeError(`lengths must hold one count per sequence: ${this.batch} (B); got ${lengths.length}`);
    for (let b = 0; b < this.batch; b++) {
      const x: unknown = lengths[b];
      if (typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x > n) {
        throw new RangeError(`lengths[${b}] must be an integer in [0, n = ${n}]; got ${String(x)}`);
      }
    }
    return lengths as Int32Array | readonly number[];
  }
}

/**
 * The options of a call of `query` (checked: [B, Hq, Lq, E]) on `cache` as for dense key/value tensors of its `length` tokens:
 * `isCausal: true` is `'bottom-right'` (the queries are the newest positions), and the key
 * lengths are the sequences' lengths when ragged, or the caller's `keyLengths` (each at most its
 * sequence's length).
 */
export function cacheOptions(cache: KvCache, query: Tensor, options: AttentionOptions | undefined): AttentionOptions {
  cache.checkUsable();
  checkTensor('query', query);
  if (query.shape.length !== 4) {
    throw new RangeError(`query must have shape [B, Hq, Lq, E] with a KV cache; got [${query.shape.join(', ')}]`);
  }
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    throw new TypeError(`options must be an object; got ${describe(options)}`);
  }
  const held = cache.lengths;
  const mapped: AttentionOptions = { ...options };
  if (mapped.isCausal === true) mapped.isCausal = 'bottom-right';
  const keyLengths = options?.keyLengths;
  if (keyLengths instanceof Int32Array) {
    for (let b = 0; b < Math.min(keyLengths.length, held.length); b++) {
      if (keyLengths[b]! > held[b]!) {
        throw new RangeError(`keyLengths[${b}] = ${keyLengths[b]} is more than the ${held[b]} tokens sequence ${b} of the KV cache holds`);
      }
    }
  } else if ((keyLengths === undefined || keyLengths === null) && cache.ragged) {
    mapped.keyLengths = held;
  }
  return mapped;
}

/** The core's request for a call on `cache` (read in place through its head strides). */
export function cacheRequest(where: string, query: Tensor, cache: KvCache, options: AttentionOptions | undefined): AttentionRequest {
  const mapped = cacheOptions(cache, query, options);
  const { batch, kvHeads, headDim, valueDim, maxLength } = cache;
  const length = cache.length;
  const request = requestForShapes(where, query, [batch, kvHeads, length, headDim], [batch, kvHeads, length, valueDim], mapped);
  request.keyHeadStride = maxLength * headDim;
  request.valueHeadStride = maxLength * valueDim;
  return request;
}
