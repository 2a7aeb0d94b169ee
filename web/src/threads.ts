// Threads for the 'simd' backend: whether this JS realm can run the pthreads module
// (sdpa_core_mt: WebAssembly threads on web workers, which need SharedArrayBuffer, i.e.
// cross-origin isolation in browsers), how many cores there are, and its loader. The only code
// that knows about sdpa_core_mt; createAttention asks here and falls back to one thread when
// told why.
import type { SdpaModule } from './wasm/sdpa_core.mjs';
import { describe } from './arguments.js';
import { oncePerBuild } from './relaxed-simd.js';

/** Upper bound on the preloaded worker pool (threads beyond the core count do not help). */
const MAX_THREADS = 16;

interface NodeProcessLike {
  versions?: { node?: string };
  getBuiltinModule?: (name: string) => unknown;
}

function nodeProcess(): NodeProcessLike | undefined {
  const p = (globalThis as { process?: NodeProcessLike }).process;
  return typeof p?.versions?.node === 'string' ? p : undefined;
}

/** Logical cores of this machine (navigator.hardwareConcurrency, or Node's os module). */
export function coreCount(): number {
  const nav = (globalThis as { navigator?: { hardwareConcurrency?: number } }).navigator;
  let n = nav?.hardwareConcurrency;
  if (!n) {
    const os = nodeProcess()?.getBuiltinModule?.('os') as { availableParallelism?: () => number; cpus?: () => unknown[] } | undefined;
    n = os?.availableParallelism?.() ?? os?.cpus?.().length;
  }
  return Math.max(1, Math.min(MAX_THREADS, Math.floor(n ?? 1)));
}

/** Why threads cannot run in this realm, or undefined when they can. */
export function threadsUnavailableReason(): string | undefined {
  if (typeof SharedArrayBuffer !== 'function') {
    return 'SharedArrayBuffer is unavailable (the page is not cross-origin isolated: serve it with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp)';
  }
  const isolated = (globalThis as { crossOriginIsolated?: boolean }).crossOriginIsolated;
  if (isolated === false) {
    return 'the page is not cross-origin isolated (serve it with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp)';
  }
  if (typeof Worker !== 'function' && !nodeProcess()) return 'this JavaScript environment has no Worker';
  return undefined;
}

/** Validates the `threads` option: undefined (every core) or a positive integer. */
export function checkThreadsOption(threads: unknown): number | undefined {
  if (threads === undefined) return undefined;
  if (typeof threads !== 'number' || !Number.isSafeInteger(threads) || threads < 1) {
    throw new RangeError(`threads must be a positive integer; got ${describe(threads)}`);
  }
  return threads;
}

/** A worker pool that fails to start (e.g. its script cannot load) never settles: give up then. */
const LOAD_TIMEOUT_MS = 20_000;

/**
 * The pthreads module (its relaxed-SIMD build when `relaxed`), instantiated once per realm with
 * coreCount() − 1 preloaded workers (the calling thread is the last one). Under Node its workers
 * are unref'd so they never keep the process alive.
 */
export const loadThreadedModule = oncePerBuild(async (relaxed): Promise<SdpaModule> => {
  const { default: create } = relaxed ? await import('./wasm/sdpa_core_mt_relaxed.mjs') : await import('./wasm/sdpa_core_mt.mjs');
  const cores = coreCount();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`its ${cores - 1} web workers did not start within ${LOAD_TIMEOUT_MS / 1000} s`)), LOAD_TIMEOUT_MS);
  });
  const module = await Promise.race([create({ sdpaWorkers: cores - 1 }), timeout]).finally(() => clearTimeout(timer));
  module.setMaxThreads(cores);
  if (nodeProcess()) {
    const pthread = (module as unknown as { PThread?: { unusedWorkers?: { unref?: () => void }[] } }).PThread;
    for (const worker of pthread?.unusedWorkers ?? []) worker.unref?.();
  }
  return module;
});
