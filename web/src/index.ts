// PLACEHOLDER (infra): replaced by the core
// Stand-in for the lead's TypeScript API so that the build, the Vite demo, the
// Node tests and the pack test can run end to end. It loads the wasm module
// (for `version`) and implements the documented contract with a tiny plain-JS
// reference so the pack test exercises the real call shape.
import createSdpaModule from './wasm/sdpa_core.mjs';

export type Backend = 'auto' | 'simd' | 'scalar';

export interface Tensor {
  data: Float32Array;
  shape: number[];
}

export interface AttentionOptions {
  returnWeights?: boolean;
}

export interface AttentionResult {
  output: Tensor;
  weights?: Tensor;
}

export interface Attention {
  readonly version: string;
  readonly backend: Backend;
  scaledDotProductAttention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    options?: AttentionOptions,
  ): Promise<AttentionResult>;
  dispose(): void;
}

export interface CreateAttentionOptions {
  backend?: Backend;
}

export async function createAttention(options: CreateAttentionOptions = {}): Promise<Attention> {
  const module = await createSdpaModule();
  const version = module.version();
  const backend = options.backend ?? 'auto';
  return {
    version,
    backend,
    async scaledDotProductAttention(query, key, value, opts = {}) {
      // 2-D only: query [Lq, E], key [S, E], value [S, Ev].
      const [lq, e] = query.shape as [number, number];
      const [s] = key.shape as [number];
      const ev = value.shape[1] as number;
      const out = new Float32Array(lq * ev);
      const w = new Float32Array(lq * s);
      const scale = 1 / Math.sqrt(e);
      for (let i = 0; i < lq; i++) {
        let max = -Infinity;
        for (let j = 0; j < s; j++) {
          let dot = 0;
          for (let k = 0; k < e; k++) dot += query.data[i * e + k]! * key.data[j * e + k]!;
          w[i * s + j] = dot * scale;
          max = Math.max(max, w[i * s + j]!);
        }
        let sum = 0;
        for (let j = 0; j < s; j++) sum += w[i * s + j] = Math.exp(w[i * s + j]! - max);
        for (let j = 0; j < s; j++) {
          const p = (w[i * s + j]! /= sum);
          for (let k = 0; k < ev; k++) out[i * ev + k]! += p * value.data[j * ev + k]!;
        }
      }
      const result: AttentionResult = { output: { data: out, shape: [lq, ev] } };
      if (opts.returnWeights) result.weights = { data: w, shape: [lq, s] };
      return result;
    },
    dispose() {},
  };
}
