// Where a KvCache's keys [B, Hkv, maxLength, E] and values [B, Hkv, maxLength, Ev] live, one class
// per place: the wasm heap (CPU backends) or two GPUBuffers (backend 'webgpu'). Each writes
// appended rows in its element format and tells a call where to read them in place (the core and
// the WebGPU kernels take the per-head strides maxLength·E and maxLength·Ev; an int8/int4 cache
// holds the format of cpp/core/kv_cache_format.h, read whole).
import { tensorDtype } from './arguments.js';
import type { CallRecord } from './core-call.js';
import { float16Bits, fromFloat16, toFloat16 } from './float16.js';
import { formatBytes, HeapScope, withHeap } from './heap.js';
import type { CpuTensor, DType, GpuBufferLike, KvCacheDType, TensorInput } from './types.js';
import { GPU_USAGE, isGpuTensor, WebGPUError, type GpuState } from './webgpu.js';
import type { SdpaModule, WebGpuSources } from './wasm/sdpa_core.mjs';

/** The cache's fixed shape and element type. */
export interface CacheShape {
  batch: number;
  kvHeads: number;
  maxLength: number;
  headDim: number;
  valueDim: number;
  dtype: KvCacheDType;
}

/**
 * Rows to append: for sequence b, rows [0, added(b)) of each head of key `[B, Hkv, n, E]` and value
 * `[B, Hkv, n, Ev]` go after the `held[b]` rows it holds.
 */
export interface AppendRows {
  key: TensorInput;
  value: TensorInput;
  n: number;
  added: (b: number) => number;
  held: Int32Array;
}

export interface KvStorage {
  /** The module (its heap or its WebGPU context) the cache belongs to. */
  readonly module: SdpaModule;
  /** The GPU device's state, for a cache in GPU memory. */
  readonly gpu: GpuState | undefined;
  write(rows: AppendRows): void;
  /**
   * Describes the keys and values of the first `length` positions as a call's key and value in
   * `record`, read in place (on the GPU, from the buffers it puts into `sources`).
   */
  describeIn(record: CallRecord, sources: WebGpuSources | undefined, length: number): void;
  /** Whether the cached keys and values hold no Inf or NaN since the last reset (float16 decode reads them in place). */
  readonly finite: boolean;
  reset(): void;
  /** Throws when the storage can no longer be used (its device lost). */
  checkUsable(): void;
  dispose(): void;
}

/** Whether a cache of `dtype` holds int8/int4 blocks (docs/kv-cache-formats.md). */
export function isQuantized(dtype: KvCacheDType): dtype is 'int8' | 'int4' {
  return dtype === 'int8' || dtype === 'int4';
}

/** Bytes of the keys and of the values. */
export function storageBytes(shape: CacheShape): { key: number; value: number } {
  const { dtype } = shape;
  if (isQuantized(dtype)) {
    // cpp/core/kv_cache_format.h: rows in tiles of 4 keys, blocks of 32 with a float32 scale each.
    const rows = shape.batch * shape.kvHeads * Math.ceil(shape.maxLength / 4) * 4;
    const blockBytes = (dtype === 'int8' ? 32 : 16) + 4;
    return { key: rows * Math.ceil(shape.headDim / 32) * blockBytes, value: rows * Math.ceil(shape.valueDim / 32) * blockBytes };
  }
  const rows = shape.batch * shape.kvHeads * shape.maxLength;
  const bytes = dtype === 'float16' ? 2 : 4;
  return { key: bytes * rows * shape.headDim, value: bytes * rows * shape.valueDim };
}

/** An appended CPU tensor's data in a float cache's element type (float16 rounded from float32, or widened). */
function stored(tensor: CpuTensor, dtype: DType): Float32Array | Uint16Array {
  const given = tensorDtype(tensor);
  if (given === dtype) return given === 'float16' ? float16Bits(tensor.data as Uint16Array) : (tensor.data as Float32Array);
  return dtype === 'float16' ? toFloat16(tensor.data as Float32Array) : fromFloat16(tensor.data as Uint16Array);
}

/** Keys and values in the wasm heap, zeroed, read in place by the CPU kernels. */
export class HeapKvStorage implements KvStorage {
  readonly gpu = undefined;
  private readonly keyAddress: number;
  private readonly valueAddress: number;
  /** Whether a float16 Inf or NaN was appended since the last reset (the decode kernel then widens). */
  private holdsNonFinite = false;

  constructor(readonly module: SdpaModule, private readonly shape: CacheShape) {
    const bytes = storageBytes(shape);
    HeapScope.checkTotal(bytes.key + bytes.value, 'this KV cache');
    this.keyAddress = module._malloc(bytes.key) >>> 0;
    this.valueAddress = this.keyAddress === 0 ? 0 : module._malloc(bytes.value) >>> 0;
    if (this.valueAddress === 0) {
      if (this.keyAddress !== 0) module._free(this.keyAddress);
      throw new RangeError(`out of WebAssembly memory: this KV cache needs ${formatBytes(bytes.key + bytes.value)}`);
    }
    module.HEAPU8.fill(0, this.keyAddress, this.keyAddress + bytes.key);
    module.HEAPU8.fill(0, this.valueAddress, this.valueAddress + bytes.value);
  }

  get finite(): boolean {
    return !this.holdsNonFinite;
  }

  write(rows: AppendRows): void {
    if (isQuantized(this.shape.dtype)) this.writeQuantized(rows, this.shape.dtype);
    else this.writeFloat(rows, this.shape.dtype);
  }

  /**
   * Copies each (batch, KV head)'s new rows into a float32 cache straight from the caller's float32
   * array; float16 rows, or any rows of a float16 cache, go through the heap to the core, which
   * copies, rounds or widens them and says whether a stored half is Inf or NaN.
   */
  private writeFloat({ key, value, n, added, held }: AppendRows, dtype: DType): void {
    const { batch, kvHeads, maxLength, headDim, valueDim } = this.shape;
    const toHalf = dtype === 'float16';
    for (const [tensor, dim, address] of [[key, headDim, this.keyAddress], [value, valueDim, this.valueAddress]] as const) {
      const source = tensor as CpuTensor;
      const fromHalf = tensorDtype(source) === 'float16';
      if (!toHalf && !fromHalf) {
        const data = source.data as Float32Array;
        for (let b = 0; b < batch; b++) {
          for (let h = 0; h < kvHeads; h++) {
            const head = b * kvHeads + h;
            this.module.HEAPF32.set(data.subarray(head * n * dim, (head * n + added(b)) * dim), address / 4 + (head * maxLength + held[b]!) * dim);
          }
        }
        continue;
      }
      withHeap(this.module, (heap) => {
        const from = heap.copyIn(fromHalf ? float16Bits(source.data as Uint16Array) : source.data, 'the appended rows');
        const elementBytes = fromHalf ? 2 : 4;
        for (let b = 0; b < batch; b++) {
          if (added(b) === 0) continue;
          const nonFinite = this.module.storeKvRows(toHalf, fromHalf, address, maxLength, dim, from + b * kvHeads * n * dim * elementBytes, n, b * kvHeads, kvHeads, held[b]!, added(b));
          if (nonFinite) this.holdsNonFinite = true;
        }
      });
    }
  }

  /** Quantizes each (batch, KV head)'s new rows into the cache (the core's quantizer, from the rows copied into the heap). */
  private writeQuantized({ key, value, n, added, held }: AppendRows, dtype: 'int8' | 'int4'): void {
    const { batch, kvHeads, maxLength, headDim, valueDim } = this.shape;
    withHeap(this.module, (heap) => {
      for (const [tensor, dim, address] of [[key, headDim, this.keyAddress], [value, valueDim, this.valueAddress]] as const) {
        const source = tensor as CpuTensor;
        const half = tensorDtype(source) === 'float16';
        const data = half ? float16Bits(source.data as Uint16Array) : source.data;
        const from = heap.copyIn(data, 'the appended rows');
        for (let b = 0; b < batch; b++) {
          if (added(b) === 0) continue;
          this.module.quantizeKvRows(dtype === 'int4', address, batch * kvHeads, maxLength, dim, from + b * kvHeads * n * dim * (half ? 2 : 4), half, n, b * kvHeads, kvHeads, held[b]!, added(b));
        }
      }
    });
  }

  describeIn(record: CallRecord, _sources: WebGpuSources | undefined, length: number): void {
    const { batch, kvHeads, maxLength, headDim, valueDim, dtype } = this.shape;
    record.tensor('key', this.keyAddress, [batch, kvHeads, length, headDim], dtype);
    record.tensor('value', this.valueAddress, [batch, kvHeads, length, valueDim], dtype);
    record.cache({ key: maxLength * headDim, value: maxLength * valueDim }, this.finite);
  }

  reset(): void {
    this.holdsNonFinite = false;
  }

  checkUsable(): void {}

  dispose(): void {
    this.module._free(this.keyAddress);
    this.module._free(this.valueAddress);
  }
}

/** The WebGPU calls the GPU storage makes (the standard GPUDevice/GPUQueue API). */
interface GpuDeviceApi {
  createBuffer(descriptor: { size: number; usage: number }): GpuBufferLike;
  createCommandEncoder(): { copyBufferToBuffer(...args: unknown[]): void; finish(): unknown };
  queue: { writeBuffer(...args: unknown[]): void; submit(commands: unknown[]): void };
}

/** Keys and values in two GPUBuffers of the instance's device, zeroed, read in place by the WebGPU kernels. */
export class GpuKvStorage implements KvStorage {
  readonly finite = true;
  private readonly keyBuffer: GpuBufferLike;
  private readonly valueBuffer: GpuBufferLike;

  constructor(readonly module: SdpaModule, private readonly shape: CacheShape, readonly gpu: GpuState) {
    checkGpuUsable(gpu);
    const bytes = storageBytes(shape);
    const limits = gpu.device.limits as { maxBufferSize?: number; maxStorageBufferBindingSize?: number };
    const maxBufferSize = limits.maxBufferSize ?? 256 * 2 ** 20;
    if (Math.max(bytes.key, bytes.value) > maxBufferSize) {
      throw new RangeError(`createKvCache: the keys/values need ${formatBytes(Math.max(bytes.key, bytes.value))} in one GPUBuffer, more than this device's maxBufferSize (${formatBytes(maxBufferSize)})`);
    }
    // The kernels bind an int8/int4 cache's keys (values) whole: levels and scales of every head.
    const maxBinding = limits.maxStorageBufferBindingSize ?? 128 * 2 ** 20;
    if (isQuantized(shape.dtype) && Math.max(bytes.key, bytes.value) > maxBinding) {
      throw new RangeError(`createKvCache: the ${shape.dtype} keys/values need ${formatBytes(Math.max(bytes.key, bytes.value))} in one storage binding, more than this device's maxStorageBufferBindingSize (${formatBytes(maxBinding)})`);
    }
    // WebGPU zero-initializes new buffers. Sizes in whole 4-byte words: the kernels bind a
    // float16 cache's last half with the word it is in.
    const device = gpu.device as unknown as GpuDeviceApi;
    const usage = GPU_USAGE.STORAGE | GPU_USAGE.COPY_DST | GPU_USAGE.COPY_SRC;
    this.keyBuffer = device.createBuffer({ size: 4 * Math.ceil(bytes.key / 4), usage });
    this.valueBuffer = device.createBuffer({ size: 4 * Math.ceil(bytes.value / 4), usage });
  }

  /**
   * Each sequence's real rows, head by head, to its next free rows: writeBuffer straight from
   * CPU arrays (in the cache's element type), or one copyBufferToBuffer per head from GPU-resident
   * tensors. Both move whole 4-byte words, so a float16 cache takes them only where its rows
   * (E·2 or Ev·2 bytes) and the source keep every run on whole words: even E and Ev, a float16
   * source at an offset ≡ 0 (mod 4). Other runs, and float32 GPU tensors (rounded to float16),
   * go through the WebGPU context's writeFloat16 (write_float16.wgsl), at any element offset.
   */
  write(rows: AppendRows): void {
    if (isQuantized(this.shape.dtype)) this.writeQuantized(rows, this.shape.dtype);
    else this.writeFloat(rows, this.shape.dtype);
  }

  /** Rows quantized on the GPU (kv_quantize.wgsl), keys and values in one submission: CPU arrays uploaded as they are, GPU tensors read in place. */
  private writeQuantized({ key, value, n, added, held }: AppendRows, dtype: 'int8' | 'int4'): void {
    const { batch, kvHeads, maxLength, headDim, valueDim } = this.shape;
    const writes = ([[key, headDim, this.keyBuffer], [value, valueDim, this.valueBuffer]] as const).map(([tensor, dim, destination]) => {
      const float16 = tensorDtype(tensor) === 'float16';
      const source = isGpuTensor(tensor)
        ? { buffer: tensor.buffer, offset: tensor.offset ?? 0 }
        : { array: float16 ? float16Bits((tensor as CpuTensor).data as Uint16Array) : ((tensor as CpuTensor).data as Float32Array) };
      return { destination, source, float16, dim };
    });
    const addedRows = Array.from({ length: batch }, (_, b) => added(b));
    this.gpu.context.writeQuantized(writes, { int4: dtype === 'int4', kvHeads, n, maxLength, held: Array.from(held), added: addedRows });
  }

  private writeFloat({ key, value, n, added, held }: AppendRows, dtype: DType): void {
    const { batch, kvHeads, maxLength, headDim, valueDim } = this.shape;
    const device = this.gpu.device as unknown as GpuDeviceApi;
    const half = dtype === 'float16';
    const bytes = half ? 2 : 4;
    let encoder: ReturnType<GpuDeviceApi['createCommandEncoder']> | undefined;
    const halfWrites: Parameters<GpuState['context']['writeFloat16']>[0] = [];
    for (const [tensor, dim, target] of [[key, headDim, this.keyBuffer], [value, valueDim, this.valueBuffer]] as const) {
      const gpuSource = isGpuTensor(tensor);
      const data = gpuSource ? undefined : stored(tensor as CpuTensor, dtype);
      const sourceBytes = tensorDtype(tensor) === 'float16' ? 2 : 4;
      const offset = gpuSource ? (tensor.offset ?? 0) : 0;
      // Runs the word-wise copies cannot take: [cache element, source element, count] triples.
      const runs: number[] = [];
      const wordWise = !half || (dim % 2 === 0 && (!gpuSource || (sourceBytes === 2 && offset % 4 === 0)));
      for (let b = 0; b < batch; b++) {
        if (added(b) === 0) continue;
        for (let h = 0; h < kvHeads; h++) {
          const head = b * kvHeads + h;
          const from = head * n * dim, at = (head * maxLength + held[b]!) * dim;
          if (!wordWise) runs.push(at, from, added(b) * dim);
          else if (gpuSource) (encoder ??= device.createCommandEncoder()).copyBufferToBuffer(tensor.buffer, offset + bytes * from, target, bytes * at, bytes * added(b) * dim);
          else device.queue.writeBuffer(target, bytes * at, data!, from, added(b) * dim);
        }
      }
      if (runs.length > 0) {
        const source = gpuSource ? { buffer: tensor.buffer, offset, float32: sourceBytes === 4 } : { array: data as Uint16Array };
        halfWrites.push({ destination: target, source, runs });
      }
    }
    if (encoder) device.queue.submit([encoder.finish()]);
    if (halfWrites.length > 0) this.gpu.context.writeFloat16(halfWrites);
  }

  describeIn(record: CallRecord, sources: WebGpuSources | undefined, length: number): void {
    const { batch, kvHeads, maxLength, headDim, valueDim, dtype } = this.shape;
    record.tensor('key', 0, [batch, kvHeads, length, headDim], dtype);
    record.tensor('value', 0, [batch, kvHeads, length, valueDim], dtype);
    record.cache({ key: maxLength * headDim, value: maxLength * valueDim }, true);
    sources!.key = { buffer: this.keyBuffer, offset: 0 };
    sources!.value = { buffer: this.valueBuffer, offset: 0 };
  }

  reset(): void {}

  checkUsable(): void {
    checkGpuUsable(this.gpu);
  }

  dispose(): void {
    this.keyBuffer.destroy();
    this.valueBuffer.destroy();
  }
}

/** A GPU cache's device must be the live one it was made on. */
function checkGpuUsable(gpu: GpuState): void {
  if (gpu.isLost) {
    throw new WebGPUError('device-lost', 'the GPU device holding this KvCache was lost, and its tokens with it: create a new cache (the next call re-initializes the device) and append the sequence again');
  }
  if (gpu.deleted) throw new Error('sdpa-web: the Attention instance that made this KvCache was disposed');
}
