// The KV cache of generation: its shape, the tokens each sequence holds, and appending, over a
// storage class per place (kv-cache-storage.ts: the wasm heap or GPU buffers) that holds the keys
// and values and that attention calls read in place.
import type { SdpaModule, WebGpuSources } from './wasm/sdpa_core.mjs';
import { checkKvCacheDtype, checkOptionNames, describe, KV_CACHE_APPEND_OPTION_NAMES, KV_CACHE_OPTION_NAMES } from './arguments.js';
import type { CallRecord } from './core-call.js';
import { GpuKvStorage, HeapKvStorage, storageBytes, type KvStorage } from './kv-cache-storage.js';
import type { AttentionOptions, BackendName, KvCacheAppendOptions, KvCacheDType, KvCacheOptions, TensorInput } from './types.js';
import { checkGpuTensor, checkInput, GPU_USAGE, gpuTensorDtype, isGpuTensor, type GpuState } from './webgpu.js';

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
  /** Element type of the cached keys and values. */
  readonly dtype: KvCacheDType;
  /** Bytes the keys and values occupy (int8/int4: levels and scales, docs/kv-cache-formats.md). */
  readonly bytes: number;
  private readonly storage: KvStorage;
  private readonly held: Int32Array;
  private disposed = false;

  /** @internal use `attn.createKvCache` */
  constructor(module: SdpaModule, options: KvCacheOptions, gpu?: GpuState) {
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
    this.dtype = options.dtype === undefined ? 'float32' : checkKvCacheDtype('createKvCache: dtype', options.dtype);
    const rows = this.batch * this.kvHeads * this.maxLength;
    for (const [name, dim] of [['keys', this.headDim], ['values', this.valueDim]] as const) {
      if (rows * dim > MAX_TENSOR_ELEMENTS) {
        throw new RangeError(`createKvCache: the ${name} [B, Hkv, maxLength, ${name === 'keys' ? 'E' : 'Ev'}] = [${this.batch}, ${this.kvHeads}, ${this.maxLength}, ${dim}] have more than 2^30 elements, more than wasm32 memory can hold`);
      }
    }
    const bytes = storageBytes(this);
    this.bytes = bytes.key + bytes.value;
    this.held = new Int32Array(this.batch);
    this.storage = gpu ? new GpuKvStorage(module, this, gpu) : new HeapKvStorage(module, this);
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
   * On backend 'webgpu' key/value may be GPU-resident tensors (copied on the GPU; their buffers
   * need `COPY_SRC`); CPU arrays are written straight from the caller's array. A float16 GPU
   * cache takes float16 GPU tensors (copied) and float32 ones (rounded on the GPU); a float32 GPU
   * cache takes float32 GPU tensors; an int8/int4 GPU cache takes either, quantized on the GPU.
   */
  append(key: TensorInput, value: TensorInput, options?: KvCacheAppendOptions): void {
    this.checkUsable();
    for (const [name, tensor] of [['key', key], ['value', value]] as const) {
      if (isGpuTensor(tensor)) {
        if (!this.gpu) throw new TypeError(`${name} is a GPU-resident tensor { buffer, shape }; this KvCache is in wasm memory (a CPU backend's): pass { data: Float32Array, shape }`);
        checkGpuTensor(name, tensor, GPU_USAGE.COPY_SRC);
        if (this.dtype === 'float32' && gpuTensorDtype(name, tensor) === 'float16') {
          throw new TypeError(`${name} is a float16 GPU tensor and this KvCache holds float32: append float32 (or create the cache with dtype: 'float16')`);
        }
      } else {
        checkInput(name, tensor);
      }
    }
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
    const added = (b: number) => (lengths ? lengths[b]! : n);
    this.storage.write({ key, value, n, added, held: this.held });
    for (let b = 0; b < this.batch; b++) this.held[b] = this.held[b]! + added(b);
  }

  /** Forgets every token (the memory stays allocated). */
  reset(): void {
    this.checkUsable();
    this.held.fill(0);
    this.storage.reset();
  }

  /** Frees the cache's memory (destroys its GPUBuffers). Later use, including a second `dispose()`, throws. */
  dispose(): void {
    if (this.disposed) throw new Error('sdpa-web: this KvCache was disposed');
    this.disposed = true;
    this.storage.dispose();
  }

  /** @internal Throws when disposed, or when its GPU device was lost (its tokens with it). */
  checkUsable(): void {
    if (this.disposed) throw new Error('sdpa-web: this KvCache was disposed');
    this.storage.checkUsable();
  }

  /** @internal The GPU device's state of a cache in GPU memory (undefined in the wasm heap). */
  get gpu(): GpuState | undefined {
    return this.storage.gpu;
  }

  /**
   * @internal This cache, when a call of an instance on `module` with `backend` may read it: made
   * by that module, in the heap for a CPU backend, on the GPU for 'webgpu'; a TypeError otherwise.
   */
  ownedBy(module: SdpaModule, backend: BackendName): this {
    const onGpu = backend === 'webgpu';
    if (!this.gpu) this.checkUsable(); // a GPU cache of a lost device is checked once the device is live
    if (onGpu !== Boolean(this.gpu)) {
      throw new TypeError(
        onGpu
          ? "sdpa-web: this KvCache is in wasm memory (a CPU backend's); backend 'webgpu' reads a cache made by its own createKvCache"
          : `sdpa-web: this KvCache is in GPU memory (backend 'webgpu'); this instance uses '${backend}': create the cache with its createKvCache`,
      );
    }
    if (this.storage.module !== module) {
      throw new TypeError('sdpa-web: this KvCache belongs to another wasm module (an Attention instance with another build): create it with this instance\'s createKvCache');
    }
    return this;
  }

  /** @internal Describes the cache as a call's key and value in `record` (and, on the GPU, `sources`). */
  describeIn(record: CallRecord, sources?: WebGpuSources): void {
    this.storage.describeIn(record, sources, this.length);
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
export function cacheOptions(cache: KvCache, query: TensorInput, options: AttentionOptions | undefined): AttentionOptions | undefined {
  cache.checkUsable();
  checkInput('query', query);
  if (query.shape.length !== 4) {
    throw new RangeError(`query must have shape [B, Hq, Lq, E] with a KV cache; got [${query.shape.join(', ')}]`);
  }
  if (typeof options !== 'object' || options === null) return options; // the core names what is wrong
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
