// The KV-cache explainer's computation, DOM-free so the browser tests run it in Node too: the
// generation example's decoder (web/examples/generate, its tiny configuration) prefills a prompt
// and generates tokens with a KV cache per layer, asking each call for its weights; every call's
// query rows, appended keys and values, weights and output are kept for the page to step through.
import type { Attention } from 'sdpa-web';
import { Decoder, TINY_DECODER_CONFIG, type AttentionEvent, type DecoderConfig } from '../../../examples/generate/decoder';

export const KV_PROMPT = 'the cat sat on the mat.';
/** Tokens generated: the first from the prefill, then one per step. */
export const KV_TOKENS = 24;

export interface KvStep {
  /** Position of the step's first query row (0: the prefill) and its number of rows. */
  start: number;
  rows: number;
  /** Tokens in each layer's cache after this step's append. */
  cacheLength: number;
  /** The token fed in (the prefill: the prompt's last) and the token chosen from this step's logits. */
  input: number;
  next: number;
  /** Per layer: the call's event (queries, appended keys/values, weights, output). */
  layers: AttentionEvent[];
}

export interface KvRun {
  config: DecoderConfig;
  prompt: number[];
  tokens: number[];
  steps: KvStep[];
}

/** The run the explainer shows, computed by sdpa-web on `attn`. */
export async function kvCacheRun(attn: Attention): Promise<KvRun> {
  const decoder = await Decoder.create(TINY_DECODER_CONFIG, { attention: attn });
  try {
    const prompt = decoder.encode(KV_PROMPT);
    const events: AttentionEvent[] = [];
    const run = await decoder.generate(prompt, KV_TOKENS, { returnWeights: true, onAttention: (ev) => events.push(ev) });
    const layers = TINY_DECODER_CONFIG.layers;
    const steps: KvStep[] = [];
    for (let s = 0; s * layers < events.length; s++) {
      const own = events.slice(s * layers, (s + 1) * layers);
      steps.push({
        start: own[0]!.start,
        rows: own[0]!.query.shape[2]!,
        cacheLength: own[0]!.cacheLength,
        input: s === 0 ? prompt[prompt.length - 1]! : run.tokens[s - 1]!,
        next: run.tokens[s]!,
        layers: own,
      });
    }
    return { config: TINY_DECODER_CONFIG, prompt, tokens: run.tokens, steps };
  } finally {
    decoder.dispose();
  }
}

/** Row `row` of head `head` of a `[1, H, n, w]` tensor. */
export function headRow(t: { data: Float32Array; shape: readonly number[] }, head: number, row: number): number[] {
  const [, , n, w] = t.shape as [number, number, number, number];
  return Array.from(t.data.subarray((head * n + row) * w, (head * n + row + 1) * w));
}

/** The keys (or values) of KV head `kvHead` in a layer's cache after step `upTo`: `[length][E]`. */
export function cachedRows(run: KvRun, layer: number, kvHead: number, upTo: number, which: 'key' | 'value'): number[][] {
  const rows: number[][] = [];
  for (const step of run.steps.slice(0, upTo + 1)) {
    const t = step.layers[layer]![which];
    for (let r = 0; r < step.rows; r++) rows.push(headRow(t, kvHead, r));
  }
  return rows;
}
