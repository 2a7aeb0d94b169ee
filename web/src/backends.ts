// The backend choice: which backends this build knows, and which one an instance runs on.
import { describe } from './arguments.js';
import type { BackendChoice, BackendInfo, BackendName, CreateAttentionOptions, GpuDeviceLike } from './types.js';
import { gpuSource, requestDevice, WebGPUError, type DeviceOrReason } from './webgpu.js';

/** The backends this build knows, fastest first. */
const BACKENDS: readonly BackendName[] = ['webgpu', 'simd', 'scalar'];

/** What {@link chooseBackend} picked: the backend, and for WebGPU the device. */
export interface Chosen {
  backend: BackendName;
  fallbackReason?: string;
  device?: GpuDeviceLike;
  /** `device` was requested here (not handed in), so the instance destroys it when done. */
  ownsDevice?: boolean;
  /** Why WebGPU is not available (when it was probed and failed). */
  webgpuReason?: string;
}

/**
 * The one place that picks a backend. `'auto'` takes the first of `BACKENDS` that can run:
 * WebGPU when a device can be had (the given `gpuDevice`, or one from a hardware adapter of
 * navigator.gpu: a software fallback adapter is slower than SIMD), else SIMD.
 */
export async function chooseBackend(choice: BackendChoice, options: CreateAttentionOptions): Promise<Chosen> {
  if (choice !== 'auto' && !BACKENDS.includes(choice)) {
    throw new TypeError(`backend must be 'auto', ${BACKENDS.map((b) => `'${b}'`).join(', ')}; got ${describe(choice)}`);
  }
  if (choice === 'webgpu' || choice === 'auto') {
    const got: DeviceOrReason = options.gpuDevice
      ? { device: options.gpuDevice }
      : await requestDevice(gpuSource(options), choice === 'webgpu');
    if (got.device) return { backend: 'webgpu', device: got.device, ownsDevice: !options.gpuDevice };
    if (choice === 'webgpu') throw new WebGPUError('unavailable', `backend 'webgpu' is not available: ${got.reason}`);
    return { backend: 'simd', fallbackReason: `WebGPU is not available: ${got.reason}`, webgpuReason: got.reason };
  }
  return { backend: choice };
}

/**
 * Every backend this build knows, whether it can run here, and why not, for an instance on
 * `current` (`webgpuReason`: why WebGPU failed when it was probed).
 */
export function backendInfos(current: BackendName, webgpuReason: string | undefined, options: CreateAttentionOptions): BackendInfo[] {
  return BACKENDS.map((name): BackendInfo => {
    if (name !== 'webgpu') return { name, available: true };
    if (current === 'webgpu') return { name, available: true };
    if (webgpuReason) return { name, available: false, reason: webgpuReason };
    return gpuSource(options)
      ? { name, available: true, reason: 'navigator.gpu is present (no adapter requested: this instance uses a CPU backend)' }
      : { name, available: false, reason: 'navigator.gpu is not available' };
  });
}
