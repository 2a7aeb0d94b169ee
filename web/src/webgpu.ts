// WebGPU devices: acquiring one (navigator.gpu or a given `gpu`), sharing a device's C++ context
// between instances, and the typed error of the WebGPU backend.
import type { SdpaModule, WebGpuAttention, WebGpuSource } from './wasm/sdpa_core.mjs';
import { checkDtype, checkShape, checkTensor, describe, tensorDtype } from './arguments.js';
import { float16Bits } from './float16.js';
import type { CreateAttentionOptions, DType, GpuBufferLike, GpuDeviceLike, GpuLike, GpuTensor, TensorInput, WebGPUErrorKind } from './types.js';

/** GPUBufferUsage flags (fixed by the WebGPU spec). */
export const GPU_USAGE = { MAP_READ: 0x1, COPY_SRC: 0x4, COPY_DST: 0x8, STORAGE: 0x80 } as const;

/**
 * A fault of the WebGPU backend: no device could be had (`'unavailable'`), the device was lost
 * (`'device-lost'`, e.g. `device.destroy()` during a call), or the call raised a validation,
 * out-of-memory or internal error (caught with error scopes). The call rejects with it; the next
 * call re-initializes (a new device from `gpu`/`navigator.gpu` after a loss) or, for
 * `backend: 'auto'` instances, falls back to SIMD.
 */
export class WebGPUError extends Error {
  override name = 'WebGPUError';
  constructor(
    readonly kind: WebGPUErrorKind,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`sdpa-web (WebGPU, ${kind}): ${message}`, options);
  }
}

/**
 * A device and its C++ context (compiled pipelines, in-flight calls), shared by every instance
 * on that device with the same `gpuLimits` (so pipelines compile once per device, not per
 * instance) and deleted when the last of them lets go.
 */
export interface GpuState {
  device: GpuDeviceLike;
  context: WebGpuAttention;
  /** Rejects with a 'device-lost' WebGPUError when the device is lost. */
  lost: Promise<never>;
  isLost: boolean;
  refs: number;
  deleted: boolean;
  /** Its key in gpuStates (the caps). */
  key: string;
  /** The library requested this device (not a `gpuDevice` from the caller): destroyed with the state. */
  owned: boolean;
}

const gpuStates = new WeakMap<object, Map<string, GpuState>>();

export function acquireGpu(module: SdpaModule, device: GpuDeviceLike, caps: CreateAttentionOptions['gpuLimits'], owned: boolean, gpu: GpuLike | undefined): GpuState {
  const key = JSON.stringify(caps ?? {});
  let perDevice = gpuStates.get(device);
  if (!perDevice) gpuStates.set(device, (perDevice = new Map()));
  let state = perDevice.get(key);
  if (!state || state.isLost) {
    const fresh: GpuState = {
      device,
      context: new module.WebGpuAttention(device, { ...caps, packedIntegerDotProduct: caps?.packedIntegerDotProduct !== false && hasPackedIntegerDot(gpu) }),
      lost: undefined as unknown as Promise<never>,
      isLost: false,
      refs: 0,
      deleted: false,
      key,
      owned,
    };
    fresh.lost = device.lost.then((info) => {
      fresh.isLost = true;
      if (perDevice.get(key) === fresh) perDevice.delete(key);
      throw new WebGPUError('device-lost', `the GPU device was lost (${info?.reason ?? 'unknown'}): ${info?.message ?? ''}`);
    });
    fresh.lost.catch(() => undefined); // observed by every call's race; never unhandled
    perDevice.set(key, fresh);
    state = fresh;
  }
  state.refs++;
  return state;
}

export function releaseGpu(state: GpuState): void {
  if (--state.refs > 0 || state.deleted) return;
  state.deleted = true;
  const perDevice = gpuStates.get(state.device);
  if (perDevice?.get(state.key) === state) perDevice.delete(state.key);
  state.context.delete();
  if (state.owned && !state.isLost) state.device.destroy();
}

/** A device, or why none can be had (a sentence for `fallbackReason` and errors). */
export type DeviceOrReason = { device: GpuDeviceLike; reason?: undefined } | { device?: undefined; reason: string };

/** Whether WGSL has dot4I8Packed on `gpu` (the packed_4x8_integer_dot_product language feature). */
function hasPackedIntegerDot(gpu: GpuLike | undefined): boolean {
  const features = (gpu as { wgslLanguageFeatures?: { has(name: string): boolean } } | undefined)?.wgslLanguageFeatures;
  return features?.has('packed_4x8_integer_dot_product') ?? false;
}

export function gpuSource(options: CreateAttentionOptions): GpuLike | undefined {
  if (options.gpu !== undefined) return options.gpu ?? undefined;
  return (globalThis as { navigator?: { gpu?: GpuLike } }).navigator?.gpu ?? undefined;
}

/**
 * A GPUDevice from `gpu` (default navigator.gpu), or why none can be had. Unless
 * `allowSoftware`, a software fallback adapter (e.g. SwiftShader: WebGPU emulated on the CPU, one
 * to two orders of magnitude slower than the SIMD backend) counts as none.
 */
export async function requestDevice(gpu: GpuLike | undefined, allowSoftware: boolean): Promise<DeviceOrReason> {
  if (!gpu) return { reason: 'navigator.gpu is not available (no WebGPU in this runtime; browsers need a secure context)' };
  let adapter;
  try {
    adapter = await gpu.requestAdapter();
  } catch (cause) {
    return { reason: `navigator.gpu.requestAdapter() failed: ${String(cause)}` };
  }
  if (!adapter) return { reason: 'navigator.gpu.requestAdapter() returned null (no WebGPU adapter here)' };
  if (!allowSoftware && (adapter.info?.isFallbackAdapter || adapter.isFallbackAdapter)) {
    const name = adapter.info?.description || adapter.info?.architecture || 'unnamed';
    return {
      reason: `the only WebGPU adapter is a software fallback (${name}), slower than the SIMD backend; pass backend: 'webgpu' to use it anyway`,
    };
  }
  try {
    // Larger buffers mean fewer split dispatches and more workgroup memory larger key tiles: ask
    // for what the adapter can give. 'shader-f16' lets the kernels read float16 storage directly;
    // 'subgroups' lets the decode kernel combine its lanes' statistics without workgroup memory.
    const limits = adapter.limits as Record<string, number>;
    const requiredLimits: Record<string, number> = {};
    for (const name of ['maxStorageBufferBindingSize', 'maxBufferSize', 'maxComputeWorkgroupStorageSize']) {
      if (typeof limits[name] === 'number') requiredLimits[name] = limits[name];
    }
    const requiredFeatures = ['shader-f16', 'subgroups'].filter((name) => adapter.features?.has(name));
    return { device: await adapter.requestDevice({ requiredLimits, requiredFeatures }) };
  } catch (cause) {
    return { reason: `GPUAdapter.requestDevice() failed: ${String(cause)}` };
  }
}

/** Whether `promise` settles (either way) within `ms` milliseconds: tells a device loss from another readback failure. */
export function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  return Promise.race([promise.then(() => true, () => true), timeout]).finally(() => clearTimeout(timer));
}

/** Whether `x` is a GPU-resident tensor `{ buffer, shape, offset? }` (rather than `{ data, shape }`). */
export function isGpuTensor(x: unknown): x is GpuTensor {
  return typeof x === 'object' && x !== null && 'buffer' in x && !('data' in x);
}

function usageNames(usage: number): string {
  const names = Object.entries(GPU_USAGE).filter(([, bit]) => usage & bit).map(([name]) => name);
  return names.length ? names.join(' | ') : 'none of MAP_READ, COPY_SRC, COPY_DST, STORAGE';
}

/** `buffer` is a GPUBuffer with every usage bit of `need`; a TypeError naming `name` otherwise. */
export function checkGpuBuffer(name: string, buffer: unknown, need: number): GpuBufferLike {
  const b = buffer as GpuBufferLike | null;
  if (typeof b !== 'object' || b === null || typeof b.size !== 'number' || typeof b.usage !== 'number' || typeof b.destroy !== 'function') {
    throw new TypeError(`${name} must be a GPUBuffer; got ${describe(buffer)}`);
  }
  if ((b.usage & need) !== need) {
    throw new TypeError(`${name} needs GPUBufferUsage ${usageNames(need)}; it was created with ${usageNames(b.usage)}`);
  }
  return b;
}

/**
 * Checks a GPU-resident tensor `{ buffer, shape, offset?, dtype? }`: a STORAGE buffer (plus
 * `usage`) holding the shape's elements from an offset aligned to the element size (float32 4
 * bytes, float16 2); a float16 tensor's buffer must also reach the 4-byte word its last half is
 * in (the kernels bind whole words). Returns its byte offset.
 */
export function checkGpuTensor(name: string, tensor: GpuTensor, usage = 0): number {
  checkGpuBuffer(`${name}.buffer`, tensor.buffer, GPU_USAGE.STORAGE | usage);
  const elements = checkShape(name, tensor.shape);
  const size = gpuTensorDtype(name, tensor) === 'float16' ? 2 : 4;
  const offset = tensor.offset ?? 0;
  if (typeof offset !== 'number' || !Number.isSafeInteger(offset) || offset < 0 || offset % size !== 0) {
    const what = size === 2 ? 'a multiple of 2 (a float16 tensor)' : 'a multiple of 4';
    throw new RangeError(`${name}.offset must be a byte offset ≥ 0 and ${what}; got ${String(offset)}`);
  }
  const end = size === 2 ? Math.ceil((offset + 2 * elements) / 4) * 4 : offset + 4 * elements;
  if (end > tensor.buffer.size) {
    const words = size === 2 && end > offset + 2 * elements ? ' (to the end of its last 4-byte word: WebGPU binds whole words)' : '';
    throw new RangeError(
      `${name}: shape [${tensor.shape.join(', ')}] needs ${end - offset} bytes from offset ${offset}${words}, past the end of its ${tensor.buffer.size}-byte buffer`,
    );
  }
  return offset;
}

/** A GPU tensor's element type (`dtype`, default float32); a TypeError naming `name.dtype` otherwise. */
export function gpuTensorDtype(name: string, tensor: GpuTensor): DType {
  return tensor.dtype === undefined ? 'float32' : checkDtype(`${name}.dtype`, tensor.dtype);
}

/** Checks a call's input: a CPU tensor, or a GPU-resident one. */
export function checkInput(name: string, tensor: TensorInput): void {
  if (isGpuTensor(tensor)) checkGpuTensor(name, tensor);
  else checkTensor(name, tensor, 'input');
}

/**
 * Where the WebGPU glue finds a checked input: straight from the caller's array (a float16 one's
 * bits), or its buffer in place.
 */
export function inputSource(tensor: TensorInput): WebGpuSource {
  if (isGpuTensor(tensor)) return { buffer: tensor.buffer, offset: tensor.offset ?? 0 };
  return { array: tensorDtype(tensor) === 'float16' ? float16Bits(tensor.data as Uint16Array) : (tensor.data as Float32Array) };
}

/** On a CPU backend: a GPU-resident input is a TypeError naming the backend. */
export function checkCpuInputs(backend: string, query: unknown, key: unknown, value: unknown): void {
  const name = isGpuTensor(query) ? 'query' : isGpuTensor(key) ? 'key' : isGpuTensor(value) ? 'value' : undefined;
  if (name) {
    throw new TypeError(`${name} is a GPU-resident tensor { buffer, shape }, which only backend 'webgpu' reads; this instance uses '${backend}': pass { data: Float32Array, shape }`);
  }
}

/**
 * The GPU device of one Attention instance: its shared state (acquireGpu), re-initialized after a
 * loss with a new device from `gpu`/navigator.gpu. When none can be had, `live()` rejects on a
 * 'webgpu' instance and, on an 'auto' one, reports the reason to `onGiveUp` (which moves the
 * instance to SIMD) and resolves to undefined.
 */
export class GpuSession {
  private state: GpuState | undefined;
  /** A pending re-initialization after a device loss (shared by concurrent calls). */
  private reinit: Promise<GpuState> | undefined;
  private closed = false;

  constructor(
    private readonly module: SdpaModule,
    private readonly options: CreateAttentionOptions & { backend: string },
    device: GpuDeviceLike,
    owned: boolean,
    private readonly onGiveUp: (reason: string) => void,
  ) {
    this.state = acquireGpu(module, device, options.gpuLimits, owned, gpuSource(options));
  }

  /** The device's state when it is live, else undefined (no waiting). */
  get current(): GpuState | undefined {
    return this.state && !this.state.isLost ? this.state : undefined;
  }

  async live(): Promise<GpuState | undefined> {
    if (this.state && !this.state.isLost) return this.state;
    this.reinit ??= (async () => {
      const lost = this.state;
      this.state = undefined;
      if (lost) releaseGpu(lost);
      const got = await requestDevice(gpuSource(this.options), this.options.backend === 'webgpu');
      if (!got.device) throw new WebGPUError('unavailable', `the GPU device was lost and no new one can be had: ${got.reason}`);
      if (this.closed) {
        got.device.destroy();
        throw new Error('sdpa-web: this Attention instance was disposed');
      }
      return acquireGpu(this.module, got.device, this.options.gpuLimits, true, gpuSource(this.options));
    })().finally(() => {
      this.reinit = undefined;
    });
    try {
      this.state = await this.reinit;
      return this.state;
    } catch (error) {
      if (this.options.backend !== 'auto' || !(error instanceof WebGPUError)) throw error;
      this.onGiveUp(error.message);
      return undefined;
    }
  }

  /** Lets go of the device (a device the library requested is destroyed with its last user). */
  close(): void {
    this.closed = true;
    if (this.state) releaseGpu(this.state);
    this.state = undefined;
  }
}
