// The one place that chooses what an instance runs on: the backend (WebGPU, SIMD, scalar), and
// the wasm build (single-thread or pthreads, SIMD128 or relaxed SIMD) that this realm can load.
import { checkBoolean, checkOptionNames, CREATE_ATTENTION_OPTION_NAMES, describe, GPU_LIMIT_NAMES } from './arguments.js';
import { checkRelaxedSimdOption, relaxedSimdUnavailableReason } from './relaxed-simd.js';
import { checkThreadsOption, coreCount, threadsUnavailableReason } from './threads.js';
import type { BackendChoice, BackendInfo, BackendName, CreateAttentionOptions, GpuDeviceLike } from './types.js';
import { loadCoreModule } from './wasm.js';
import type { SdpaModule } from './wasm/sdpa_core.mjs';
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

/** What an instance runs on: the chosen backend (and device), the loaded module, its threads and build. */
export interface EngineChoice extends Chosen {
  module: SdpaModule;
  /** The `threads` option (undefined: every core). */
  threads: number | undefined;
  relaxedSimd: boolean;
  /** `options` with its backend choice made explicit. */
  options: CreateAttentionOptions & { backend: BackendChoice };
}

/**
 * Checks createAttention's options, chooses the backend, and loads the wasm build it runs:
 * the pthreads module only for the simd backend and only when its pool would have more than one
 * thread; relaxed SIMD where the engine has it unless `relaxedSimd: false`. Every reason a
 * faster choice was not taken goes into `fallbackReason`.
 */
export async function chooseEngine(options: CreateAttentionOptions): Promise<EngineChoice> {
  if (typeof options !== 'object' || options === null) throw new TypeError(`options must be an object; got ${describe(options)}`);
  checkOptionNames('createAttention', options, CREATE_ATTENTION_OPTION_NAMES);
  const { gpuLimits } = options;
  if (typeof gpuLimits === 'object' && gpuLimits !== null) {
    checkOptionNames('createAttention options.gpuLimits', gpuLimits, GPU_LIMIT_NAMES);
    if (gpuLimits.shaderF16 !== undefined) checkBoolean('gpuLimits.shaderF16', gpuLimits.shaderF16);
    if (gpuLimits.subgroups !== undefined) checkBoolean('gpuLimits.subgroups', gpuLimits.subgroups);
    if (gpuLimits.packedIntegerDotProduct !== undefined) checkBoolean('gpuLimits.packedIntegerDotProduct', gpuLimits.packedIntegerDotProduct);
    const splitKeys: unknown = gpuLimits.prefillSplitKeys;
    if (splitKeys !== undefined) {
      if (typeof splitKeys !== 'number') throw new TypeError(`gpuLimits.prefillSplitKeys must be a number; got ${describe(splitKeys)}`);
      if (!Number.isInteger(splitKeys) || splitKeys < 1) {
        throw new RangeError(`gpuLimits.prefillSplitKeys must be a positive integer; got ${splitKeys}`);
      }
    }
  }
  const backend = options.backend ?? 'auto';
  const threads = checkThreadsOption(options.threads);
  const relaxedRequested = checkRelaxedSimdOption(options.relaxedSimd);
  const chosen = await chooseBackend(backend, options);
  const noRelaxed = relaxedRequested === false ? undefined : relaxedSimdUnavailableReason();
  const relaxedSimd = relaxedRequested !== false && !noRelaxed;
  // Saying why only matters when relaxed SIMD was asked for.
  const relaxedReason = relaxedRequested && noRelaxed ? `running the SIMD128 build: ${noRelaxed}` : undefined;
  const engine = async (build: { threads: boolean; relaxedSimd: boolean }, reason?: string): Promise<EngineChoice> => ({
    ...chosen,
    module: await loadCoreModule(build),
    threads,
    relaxedSimd,
    fallbackReason: joinReasons(chosen.fallbackReason, relaxedReason, reason),
    options: { ...options, backend },
  });
  if (chosen.backend !== 'simd' || threads === 1 || coreCount() === 1) return engine({ threads: false, relaxedSimd });
  const unavailable = threadsUnavailableReason();
  if (unavailable) return engine({ threads: false, relaxedSimd }, `running on 1 thread: ${unavailable}`);
  try {
    return await engine({ threads: true, relaxedSimd });
  } catch (cause) {
    return engine({ threads: false, relaxedSimd }, `running on 1 thread: the threads module failed to load (${String(cause)})`);
  }
}

function joinReasons(...reasons: (string | undefined)[]): string | undefined {
  const present = reasons.filter((r): r is string => Boolean(r));
  return present.length ? present.join('; ') : undefined;
}
