// The page's side of the heavy-work worker (workers/heavy.worker.ts): one worker, started on first
// use, and a promise per request.
import type { StatsRow } from './compute';
import type { Float16Precision, PrecisionResult } from './explainers';

/** A precision-lab engine: its name in the table, how it computes, and why it cannot run here. */
export interface EngineInfo {
  name: string;
  short: string;
  how: string;
  gpu: boolean;
  reason?: string;
}

export interface HeavyOps {
  engines(args?: undefined): Promise<EngineInfo[]>;
  /** Every engine's error on the seeded inputs [length × 64] (undefined where one cannot run), and float16 storage's. */
  precision(args: { length: number; scale: number; withFloat16: boolean }): Promise<{ results: (PrecisionResult | undefined)[]; float16?: Float16Precision }>;
  /** The median time (ms) of self-attention [n × headDim] on `backend`, after a warm-up. */
  bench(args: { backend: string; n: number; headDim: number }): Promise<{ ms: number }>;
  /** The score statistics of `samples` random queries and keys of dimension `dk` (a worked example's run), on `backend`. */
  scoreStats(args: { backend: string; dk: number; samples: number; seed: number }): Promise<StatsRow>;
}

let worker: Worker | undefined;
let next = 0;
const pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void; progress?(done: number): void }>();

/** Run `op` in the worker; `progress`, where given, hears the share done as the worker reports it. */
export function heavy<K extends keyof HeavyOps>(op: K, args?: Parameters<HeavyOps[K]>[0], progress?: (done: number) => void): ReturnType<HeavyOps[K]> {
  if (!worker) {
    worker = new Worker(new URL('../workers/heavy.worker.ts', import.meta.url), { type: 'module' });
    worker.onmessage = (e: MessageEvent<{ id: number; result?: unknown; error?: string; progress?: number }>) => {
      const p = pending.get(e.data.id);
      if (e.data.progress !== undefined) {
        p?.progress?.(e.data.progress);
        return;
      }
      pending.delete(e.data.id);
      if (e.data.error !== undefined) p?.reject(new Error(e.data.error));
      else p?.resolve(e.data.result);
    };
    worker.onerror = (e) => {
      for (const p of pending.values()) p.reject(new Error(`the worker failed: ${e.message}`));
      pending.clear();
    };
  }
  const id = next++;
  const done = new Promise((resolve, reject) => pending.set(id, { resolve, reject, progress }));
  worker.postMessage({ id, op, args });
  return done as ReturnType<HeavyOps[K]>;
}
