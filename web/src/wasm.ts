// Loading the wasm builds: the single-thread module here, the pthreads module through
// threads.ts; each build (SIMD128, relaxed SIMD) is instantiated once per JS realm and shared by
// every Attention instance.
import createSdpaModule from './wasm/sdpa_core.mjs';
import type { SdpaModule } from './wasm/sdpa_core.mjs';
import { oncePerBuild } from './relaxed-simd.js';
import { loadThreadedModule } from './threads.js';

/**
 * The single-thread wasm module (its relaxed-SIMD build when `relaxed`), instantiated once per
 * JS realm and shared by every Attention instance.
 */
const loadModule = oncePerBuild(async (relaxed): Promise<SdpaModule> => {
  try {
    return await (relaxed ? (await import('./wasm/sdpa_core_relaxed.mjs')).default() : createSdpaModule());
  } catch (cause) {
    // The loader's own errors name the file it could not fetch or read, with its URL or path.
    if (cause instanceof Error && cause.message.startsWith('sdpa-web:')) throw cause;
    throw new Error(`sdpa-web: could not instantiate its WebAssembly module (it needs wasm SIMD128): ${String(cause)}`, { cause });
  }
});

/**
 * The shared instance of one build: the single-thread module when `threads` is false, the
 * pthreads module with its preloaded worker pool when true; its relaxed-SIMD build when
 * `relaxedSimd`. For callers that need the raw module beside the package (benchmark diagnostics).
 */
export function loadCoreModule(build: { threads: boolean; relaxedSimd: boolean }): Promise<SdpaModule> {
  return build.threads ? loadThreadedModule(build.relaxedSimd) : loadModule(build.relaxedSimd);
}
