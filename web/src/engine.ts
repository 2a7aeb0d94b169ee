// What the call paths (cpu-calls, webgpu-calls, reference-calls) share of one Attention instance.
import type { CallRecord } from './core-call.js';
import type { BackendName, CpuBackendName } from './types.js';
import type { SdpaModule } from './wasm/sdpa_core.mjs';

export interface Engine {
  readonly module: SdpaModule;
  /** The module's call record (core-call.ts). */
  readonly record: CallRecord;
  /** The backend in use (an 'auto' instance whose GPU is lost for good moves to 'simd'). */
  readonly backend: BackendName;
  /** The CPU kernels for CPU-only work (the sync API, the backward): 'scalar' on a scalar instance, else 'simd'. */
  readonly cpuBackend: CpuBackendName;
  /** Most threads a call runs on (see Attention.threads). */
  readonly threads: number;
  /** The `threads` option as the core takes it (0: every thread of the pool); the core picks each call's count. */
  readonly requestedThreads: number;
}

/** The core's index of a CPU backend. */
export function backendIndex(backend: CpuBackendName): 0 | 1 {
  return backend === 'scalar' ? 0 : 1;
}
