// WebGPU devices: acquiring one (navigator.gpu or a given `gpu`), sharing a device's C++ context
// between instances, and the typed error of the WebGPU backend.
import type { SdpaModule, WebGpuAttention } from './wasm/sdpa_core.mjs';
import type { CreateAttentionOptions, GpuDeviceLike, GpuLike, WebGPUErrorKind } from './types.js';

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

export function acquireGpu(module: SdpaModule, device: GpuDeviceLike, caps: CreateAttentionOptions['gpuLimits'], owned: boolean): GpuState {
  const key = JSON.stringify(caps ?? {});
  let perDevice = gpuStates.get(device);
  if (!perDevice) gpuStates.set(device, (perDevice = new Map()));
  let state = perDevice.get(key);
  if (!state || state.isLost) {
    const fresh: GpuState = {
      device,
      context: new module.WebGpuAttention(device, caps),
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
    // for what the adapter can give.
    const limits = adapter.limits as Record<string, number>;
    const requiredLimits: Record<string, number> = {};
    for (const name of ['maxStorageBufferBindingSize', 'maxBufferSize', 'maxComputeWorkgroupStorageSize']) {
      if (typeof limits[name] === 'number') requiredLimits[name] = limits[name];
    }
    return { device: await adapter.requestDevice({ requiredLimits }) };
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
