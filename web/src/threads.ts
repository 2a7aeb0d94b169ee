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

/** A worker that never starts and never reports an error (not seen) is given up on after this. */
const LOAD_TIMEOUT_MS = 20_000;

/** A pthread worker as the module holds it: a web Worker, or a Node worker_threads Worker. */
interface PoolWorker {
  addEventListener?: (type: 'error', listener: (e: { message?: string; filename?: string; lineno?: number }) => void) => void;
  on?: (event: 'error', listener: (e: unknown) => void) => void;
  terminate?: () => void;
  unref?: () => void;
}

interface ThreadedModuleArg {
  [key: string]: unknown;
  sdpaWorkers: number;
  /** Set by the module's factory, synchronously: its worker pool and the URL each worker imports. */
  PThread?: { unusedWorkers?: PoolWorker[] };
  mainScriptUrlOrBlob?: string;
}

/**
 * Rejects as soon as one of the pool's workers reports an error (its script or the module it
 * imports failed to load or run), with what it said and which module it was importing.
 */
function firstWorkerError(arg: ThreadedModuleArg): Promise<never> {
  return new Promise<never>((_, reject) => {
    const fail = (what: string) =>
      reject(
        new Error(
          `a web worker of the threads module failed to start: ${what} (each worker imports ${arg.mainScriptUrlOrBlob ?? 'the threads module'}, ` +
            'which must be that module alone: a bundler that inlines it into the app bundle needs code splitting, e.g. esbuild --splitting)',
        ),
      );
    for (const worker of arg.PThread?.unusedWorkers ?? []) {
      if (typeof worker.addEventListener === 'function') {
        worker.addEventListener('error', (e) => fail(`${e.message ?? 'error'}${e.filename ? ` (${e.filename}:${e.lineno ?? 0})` : ''}`));
      } else {
        worker.on?.('error', (e) => fail(String(e)));
      }
    }
  });
}

/**
 * The pthreads module (its relaxed-SIMD build when `relaxed`), instantiated once per realm with
 * coreCount() − 1 preloaded workers (the calling thread is the last one). A worker that fails
 * to start rejects the load at once, and the pool is shut down. Under Node its workers are
 * unref'd so they never keep the process alive.
 */
export const loadThreadedModule = oncePerBuild(async (relaxed): Promise<SdpaModule> => {
  const { default: create } = relaxed ? await import('./wasm/sdpa_core_mt_relaxed.mjs') : await import('./wasm/sdpa_core_mt.mjs');
  const cores = coreCount();
  const arg: ThreadedModuleArg = { sdpaWorkers: cores - 1 };
  const loading = create(arg);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`its ${cores - 1} web workers did not start within ${LOAD_TIMEOUT_MS / 1000} s`)), LOAD_TIMEOUT_MS);
  });
  let module: SdpaModule;
  try {
    module = await Promise.race([loading, firstWorkerError(arg), timeout]);
  } catch (cause) {
    for (const worker of arg.PThread?.unusedWorkers ?? []) worker.terminate?.();
    loading.catch(() => undefined); // abandoned: a later rejection is no one's to handle
    throw cause;
  } finally {
    clearTimeout(timer);
  }
  module.setMaxThreads(cores);
  if (nodeProcess()) {
    for (const worker of arg.PThread?.unusedWorkers ?? []) worker.unref?.();
  }
  return module;
});
