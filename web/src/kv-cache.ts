// The KV cache: keys [B, Hkv, maxLength, E] and values [B, Hkv, maxLength, Ev] allocated once in
// the wasm heap (CPU backends) or in two GPUBuffers (backend 'webgpu'); `append` writes new rows
// in place and attention calls read them in place (the core and the WebGPU kernels take the
// per-head strides maxLength·E and maxLength·Ev).
import type { AttentionRequest, SdpaModule } from './wasm/sdpa_core.mjs';
import { checkDtype, checkOptionNames, describe, KV_CACHE_APPEND_OPTION_NAMES, KV_CACHE_OPTION_NAMES, requestForShapes, tensorDtype } from './arguments.js';
import { anyNonFinite, float16Bits, fromFloat16, toFloat16 } from './float16.js';
import { formatBytes, HeapScope } from './heap.js';
import type { AttentionOptions, CpuTensor, DType, GpuBufferLike, KvCacheAppendOptions, KvCacheOptions, TensorInput } from './types.js';
import { checkGpuTensor, checkInput, GPU_USAGE, gpuTensorDtype, isGpuTensor, WebGPUError, type GpuState } from './webgpu.js';

/** The WebGPU calls the cache makes (the standard GPUDevice/GPUQueue API). */
interface GpuDeviceApi {
  createBuffer(descriptor: { size: number; usage: number }): GpuBufferLike;
  createCommandEncoder(): { copyBufferToBuffer(...args: unknown[]): void; finish(): unknown };
  queue: { writeBuffer(...args: unknown[]): void; submit(commands: unknown[]): void };
}

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
  readonly dtype: DType;
  /** @internal the module whose heap holds the cache */
  readonly module: SdpaModule;
  /** @internal heap byte addresses of the keys and the values (0 on the GPU) */
  readonly keyAddress: number = 0;
  readonly valueAddress: number = 0;
  /** @internal on backend 'webgpu': the device's state and the buffers of the keys and the values */
  readonly gpu: GpuState | undefined;
  readonly keyBuffer: GpuBufferLike | undefined;
  readonly valueBuffer: GpuBufferLike | undefined;
  private readonly held: Int32Array;
  /** Whether a float16 Inf or NaN was appended since the last reset (the decode kernel then widens). */
  private holdsNonFinite = false;
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
    this.dtype = options.dtype === undefined ? 'float32' : checkDtype('createKvCache: dtype', options.dtype);
    const bytesPerElement = this.dtype === 'float16' ? 2 : 4;
    const rows = this.batch * this.kvHeads * this.maxLength;
    for (const [name, dim] of [['keys', this.headDim], ['values', this.valueDim]] as const) {
      if (rows * dim > MAX_TENSOR_ELEMENTS) {
        throw new RangeError(`createKvCache: the ${name} [B, Hkv, maxLength, ${name === 'keys' ? 'E' : 'Ev'}] = [${this.batch}, ${this.kvHeads}, ${this.maxLength}, ${dim}] have more than 2^30 elements, more than wasm32 memory can hold`);
      }
    }
    const keyBytes = bytesPerElement * rows * this.headDim, valueBytes = bytesPerElement * rows * this.valueDim;
    this.module = module;
    this.held = new Int32Array(this.batch);
    if (gpu) {
      checkGpuUsable(gpu);
      const maxBufferSize = (gpu.device.limits as { maxBufferSize?: number }).maxBufferSize ?? 256 * 2 ** 20;
      if (Math.max(keyBytes, valueBytes) > maxBufferSize) {
        throw new RangeError(`createKvCache: the keys/values need ${formatBytes(Math.max(keyBytes, valueBytes))} in one GPUBuffer, more than this device's maxBufferSize (${formatBytes(maxBufferSize)})`);
      }
      // WebGPU zero-initializes new buffers. Sizes in whole 4-byte words: the kernels bind a
      // float16 cache's last half with the word it is in.
      const device = gpu.device as unknown as GpuDeviceApi;
      const usage = GPU_USAGE.STORAGE | GPU_USAGE.COPY_DST | GPU_USAGE.COPY_SRC;
      this.gpu = gpu;
      this.keyBuffer = device.createBuffer({ size: 4 * Math.ceil(keyBytes / 4), usage });
      this.valueBuffer = device.createBuffer({ size: 4 * Math.ceil(valueBytes / 4), usage });
      return;
    }
    HeapScope.checkTotal(keyBytes + valueBytes, 'this KV cache');
    this.keyAddress = module._malloc(keyBytes) >>> 0;
    this.valueAddress = this.keyAddress === 0 ? 0 : module._malloc(valueBytes) >>> 0;
    if (this.valueAddress === 0) {
      if (this.keyAddress !== 0) module._free(this.keyAddress);
      throw new RangeError(`out of WebAssembly memory: this KV cache needs ${formatBytes(keyBytes + valueBytes)}`);
    }
    module.HEAPU8.fill(0, this.keyAddress, this.keyAddress + keyBytes);
    module.HEAPU8.fill(0, this.valueAddress, this.valueAddress + valueBytes);
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
   * cache takes float32 GPU tensors.
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
    if (this.gpu) {
      this.appendGpu(key, value, n, lengths);
      return;
    }
    const keys = this.stored(key as CpuTensor), values = this.stored(value as CpuTensor);
    const half = this.dtype === 'float16';
    const heap = half ? this.module.HEAPU16 : this.module.HEAPF32;
    const bytes = half ? 2 : 4;
    for (let b = 0; b < this.batch; b++) {
      const added = lengths ? lengths[b]! : n;
      for (let h = 0; h < this.kvHeads; h++) {
        const head = b * this.kvHeads + h;
        for (const [data, dim, address] of [[keys, this.headDim, this.keyAddress], [values, this.valueDim, this.valueAddress]] as const) {
          const from = head * n * dim;
          const rows = data.subarray(from, from + added * dim);
          if (half && !this.holdsNonFinite) this.holdsNonFinite = anyNonFinite(rows as Uint16Array);
          heap.set(rows, address / bytes + (head * this.maxLength + this.held[b]!) * dim);
        }
      }
      this.held[b] = this.held[b]! + added;
    }
  }

  /** @internal Whether the float16 keys and values hold no Inf or NaN (the decode kernel reads them in place). */
  get finite(): boolean {
    return !this.holdsNonFinite;
  }

  /** An appended CPU tensor's data in the cache's element type (float16 rounded from float32, or widened). */
  private stored(tensor: CpuTensor): Float32Array | Uint16Array {
    const given = tensorDtype(tensor);
    if (given === this.dtype) return given === 'float16' ? float16Bits(tensor.data as Uint16Array) : (tensor.data as Float32Array);
    return this.dtype === 'float16' ? toFloat16(tensor.data as Float32Array) : fromFloat16(tensor.data as Uint16Array);
  }

  /** Forgets every token (the memory stays allocated). */
  reset(): void {
    this.checkUsable();
    this.held.fill(0);
    this.holdsNonFinite = false;
  }

  /** Frees the cache's memory (destroys its GPUBuffers). Later use, including a second `dispose()`, throws. */
  dispose(): void {
    if (this.disposed) throw new Error('sdpa-web: this KvCache was disposed');
    this.disposed = true;
    if (this.gpu) {
      this.keyBuffer!.destroy();
      this.valueBuffer!.destroy();
      return;
    }
    this.module._free(this.keyAddress);
    this.module._free(this.valueAddress);
  }

  /** @internal Throws when disposed, or when its GPU device was lost (its tokens with it). */
  checkUsable(): void {
    if (this.disposed) throw new Error('sdpa-web: this KvCache was disposed');
    if (this.gpu) checkGpuUsable(this.gpu);
  }

  /**
   * Each sequence's real rows, head by head, to its next free rows: writeBuffer straight from
   * CPU arrays (in the cache's element type), or one copyBufferToBuffer per head from GPU-resident
   * tensors. Both move whole 4-byte words, so a float16 cache takes them only where its rows
   * (E·2 or Ev·2 bytes) and the source keep every run on whole words: even E and Ev, a float16
   * source at an offset ≡ 0 (mod 4). Other runs, and float32 GPU tensors (rounded to float16),
   * go through the WebGPU context's writeFloat16 (write_float16.wgsl), at any element offset.
   */
  private appendGpu(key: TensorInput, value: TensorInput, n: number, lengths: Int32Array | readonly number[] | undefined): void {
    const device = this.gpu!.device as unknown as GpuDeviceApi;
    const half = this.dtype === 'float16';
    const bytes = half ? 2 : 4;
    let encoder: ReturnType<GpuDeviceApi['createCommandEncoder']> | undefined;
    for (const [tensor, dim, target] of [[key, this.headDim, this.keyBuffer!], [value, this.valueDim, this.valueBuffer!]] as const) {
      const gpuSource = isGpuTensor(tensor);
      const data = gpuSource ? undefined : this.stored(tensor as CpuTensor);
      const sourceBytes = tensorDtype(tensor) === 'float16' ? 2 : 4;
      const offset = gpuSource ? (tensor.offset ?? 0) : 0;
      // Runs the word-wise copies cannot take: [cache element, source element, count] triples.
      const runs: number[] = [];
      const wordWise = !half || (dim % 2 === 0 && (!gpuSource || (sourceBytes === 2 && offset % 4 === 0)));
      for (let b = 0; b < this.batch; b++) {
        const added = lengths ? lengths[b]! : n;
        if (added === 0) continue;
        for (let h = 0; h < this.kvHeads; h++) {
          const head = b * this.kvHeads + h;
          const from = head * n * dim, at = (head * this.maxLength + this.held[b]!) * dim;
          if (!wordWise) runs.push(at, from, added * dim);
          else if (gpuSource) (encoder ??= device.createCommandEncoder()).copyBufferToBuffer(tensor.buffer, offset + bytes * from, target, bytes * at, bytes * added * dim);
          else device.queue.writeBuffer(target, bytes * at, data!, from, added * dim);
        }
      }
      if (runs.length > 0) {
        const source = gpuSource ? { buffer: tensor.buffer, offset, float32: sourceBytes === 4 } : { array: data as Uint16Array };
        this.gpu!.context.writeFloat16(target, source, runs);
      }
    }
    if (encoder) device.queue.submit([encoder.finish()]);
    for (let b = 0; b < this.batch; b++) this.held[b] = this.held[b]! + (lengths ? lengths[b]! : n);
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
export function cacheOptions(cache: KvCache, query: TensorInput, options: AttentionOptions | undefined): AttentionOptions {
  cache.checkUsable();
  checkInput('query', query);
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
export function cacheRequest(where: string, query: TensorInput, cache: KvCache, options: AttentionOptions | undefined): AttentionRequest {
  const mapped = cacheOptions(cache, query, options);
  const { batch, kvHeads, headDim, valueDim, maxLength } = cache;
  const length = cache.length;
  const request = requestForShapes(where, query, [batch, kvHeads, length, headDim], [batch, kvHeads, length, valueDim], mapped);
  request.keyHeadStride = maxLength * headDim;
  request.valueHeadStride = maxLength * valueDim;
  request.queryType = tensorDtype(query);
  request.keyType = request.valueType = cache.dtype;
  request.keyValueFinite = cache.finite;
  return request;
}

/** A GPU cache's device must be the live one it was made on. */
function checkGpuUsable(gpu: GpuState): void {
  if (gpu.isLost) {
    throw new WebGPUError('device-lost', 'the GPU device holding this KvCache was lost, and its tokens with it: create a new cache (the next call re-initializes the device) and append the sequence again');
  }
  if (gpu.deleted) throw new Error('sdpa-web: the Attention instance that made this KvCache was disposed');
}
