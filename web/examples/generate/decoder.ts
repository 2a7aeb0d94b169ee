/**
 * A small seeded decoder-only transformer built from sdpa-web's pieces, for generating with a KV
 * cache: token plus position embeddings, `layers` pre-norm blocks (RMSNorm →
 * grouped-query attention → residual, RMSNorm → GELU MLP → residual), a final RMSNorm and an
 * output head over a character vocabulary, decoded greedily.
 *
 * - Each block's attention is a `MultiheadAttention` module (`numKvHeads` < `numHeads`: GQA, no
 *   biases, Xavier weights from its seed); the MLP and head weights are `attn.xavierUniform`, the
 *   embeddings `attn.randomUniform`, and every projection is `attn.matmul`. RMSNorm, GELU and the
 *   residual adds are the few lines of JavaScript below.
 * - `generate` runs the cached path: the prompt is one call per layer (prefill), then each new token
 *   is projected once, its key and value appended to that layer's `KvCache`, and its query row
 *   attends over the cache in place (`isCausal: true`, `enableGqa: true`).
 * - `generateFull` is the same model without a cache: every step runs the whole sequence through
 *   each `MultiheadAttention` module with full causal attention, as a check on the cached path.
 *
 * Shared by the Node example (`main.ts`), its test and the demo page's KV-cache explainer.
 */
import {
  createAttention,
  createMultiheadAttention,
  type Attention,
  type BackendChoice,
  type KvCache,
  type KvCacheDType,
  type MultiheadAttention,
  type Tensor,
} from 'sdpa-web';

export interface DecoderConfig {
  /** One character per token id. */
  vocab: string;
  layers: number;
  /** d_model. */
  dModel: number;
  /** Query heads Hq and key/value heads Hkv (GQA: Hkv divides Hq); head dim E = dModel / Hq. */
  heads: number;
  kvHeads: number;
  /** Hidden width of the MLP. */
  ffnDim: number;
  /** Tokens each layer's cache holds: prompt plus generated. */
  maxLength: number;
  /** Seed of every weight (the library's mulberry32 streams). */
  seed: number;
}

const VOCAB = ' abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.';

/** The example's decoder: 4 layers, d_model 128, 8 query heads over 2 KV heads (E = 16), 64 tokens. */
export const DECODER_CONFIG: DecoderConfig = { vocab: VOCAB, layers: 4, dModel: 128, heads: 8, kvHeads: 2, ffnDim: 256, maxLength: 256, seed: 23 };

/** The demo page's: 2 layers, d_model 32, 4 query heads over 2 KV heads (E = 8). */
export const TINY_DECODER_CONFIG: DecoderConfig = { vocab: VOCAB, layers: 2, dModel: 32, heads: 4, kvHeads: 2, ffnDim: 64, maxLength: 128, seed: 7 };

/** One layer's weights, as the float32 numbers the model uses. */
export interface LayerWeights {
  /** The attention module's projections, PyTorch layout `[out, in]`: `[d, d]`, `[Hkv·E, d]`, `[Hkv·E, d]`, `[d, d]`. */
  wQ: Tensor;
  wK: Tensor;
  wV: Tensor;
  wO: Tensor;
  /** MLP: `[d, ffnDim]` and `[ffnDim, d]` (x·W). */
  w1: Tensor;
  w2: Tensor;
}

export interface DecoderWeights {
  /** `[vocab, d]`. */
  embedding: Tensor;
  /** Position embeddings `[maxLength, d]`, added to the token embeddings. */
  positions: Tensor;
  layers: LayerWeights[];
  /** Output head `[d, vocab]`. */
  head: Tensor;
}

/** What one attention call of the cached path saw and returned (for checks and the explainer). */
export interface AttentionEvent {
  layer: number;
  /** Position of the first of this call's query rows (0 for the prefill). */
  start: number;
  /** The call's queries `[1, Hq, n, E]`, and the keys and values it appended `[1, Hkv, n, E]`. */
  query: Tensor;
  key: Tensor;
  value: Tensor;
  /** Tokens in the layer's cache after the append (the call's Lk). */
  cacheLength: number;
  /** The call's output `[1, Hq, n, E]`, and its weights `[1, Hq, n, cacheLength]` when asked for. */
  output: Tensor;
  weights?: Tensor;
}

export interface GenerateOptions {
  /** Called after each layer's attention call. */
  onAttention?: (event: AttentionEvent) => void;
  /** Ask each call for its weights (the explainer's rows); off, a step takes the decode kernel. */
  returnWeights?: boolean;
}

export interface Generation {
  prompt: number[];
  /** The generated token ids (greedy), the first from the prompt's last position. */
  tokens: number[];
  /** The logits `[vocab]` that chose the last token. */
  logits: Float32Array;
  /** Wall time of the prefill and of each later step, in ms. */
  prefillMs: number;
  stepMs: number[];
  /** Of each later step, the time in its attention calls (all layers), in ms. */
  attentionMs: number[];
}

interface Layer {
  mha: MultiheadAttention;
  /** xᵀ-side copies of the module's `[out, in]` weights: x·Wᵀ = x·(these). */
  wQt: Tensor;
  wKt: Tensor;
  wVt: Tensor;
  wOt: Tensor;
  w1: Tensor;
  w2: Tensor;
  cache: KvCache;
}

const now = (): number => (typeof performance !== 'undefined' ? performance.now() : Date.now());

function transpose(t: Tensor): Tensor {
  const [r, c] = t.shape as [number, number];
  const out = new Float32Array(r * c);
  for (let i = 0; i < r; i++) for (let j = 0; j < c; j++) out[j * r + i] = t.data[i * c + j]!;
  return { data: out, shape: [c, r] };
}

/** Rows `[n, d]` scaled to unit root-mean-square (RMSNorm without a gain; ε = 1e-5). */
export function rmsNorm(x: Float32Array, d: number): Float32Array {
  const out = new Float32Array(x.length);
  for (let r = 0; r < x.length / d; r++) {
    let ss = 0;
    for (let i = 0; i < d; i++) ss += x[r * d + i]! ** 2;
    const k = 1 / Math.sqrt(ss / d + 1e-5);
    for (let i = 0; i < d; i++) out[r * d + i] = x[r * d + i]! * k;
  }
  return out;
}

/** GELU, tanh form. */
export function gelu(x: number): number {
  return 0.5 * x * (1 + Math.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)));
}

/** `[1, n, H·E]` → `[1, H, n, E]`. */
function splitHeads(t: Tensor, heads: number): Tensor {
  const [, n, width] = t.shape as [number, number, number];
  const e = width / heads;
  const out = new Float32Array(t.data.length);
  for (let r = 0; r < n; r++) for (let h = 0; h < heads; h++) out.set(t.data.subarray(r * width + h * e, r * width + (h + 1) * e), (h * n + r) * e);
  return { data: out, shape: [1, heads, n, e] };
}

/** `[1, H, n, E]` → `[1, n, H·E]`. */
function mergeHeads(t: Tensor): Tensor {
  const [, heads, n, e] = t.shape as [number, number, number, number];
  const out = new Float32Array(t.data.length);
  for (let h = 0; h < heads; h++) for (let r = 0; r < n; r++) out.set(t.data.subarray((h * n + r) * e, (h * n + r + 1) * e), (r * heads + h) * e);
  return { data: out, shape: [1, n, heads * e] };
}

export function argmax(xs: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < xs.length; i++) if (xs[i]! > xs[best]!) best = i;
  return best;
}

function checkConfig(c: DecoderConfig): void {
  const whole = (name: string, x: number) => {
    if (!(Number.isSafeInteger(x) && x >= 1)) throw new RangeError(`DecoderConfig.${name} must be an integer ≥ 1; got ${x}`);
  };
  for (const name of ['layers', 'dModel', 'heads', 'kvHeads', 'ffnDim', 'maxLength'] as const) whole(name, c[name]);
  if (c.vocab.length < 2) throw new RangeError('DecoderConfig.vocab must hold at least 2 characters');
  if (c.dModel % c.heads !== 0) throw new RangeError(`DecoderConfig: heads (${c.heads}) must divide dModel (${c.dModel})`);
  if (c.heads % c.kvHeads !== 0) throw new RangeError(`DecoderConfig: kvHeads (${c.kvHeads}) must divide heads (${c.heads})`);
}

export class Decoder {
  readonly config: DecoderConfig;
  /** The engine of the cached path (the modules' full path runs on their own CPU engines). */
  readonly attn: Attention;
  readonly weights: DecoderWeights;
  private readonly layers: Layer[];
  private readonly ownsAttention: boolean;
  /** Tokens in the caches. */
  private position = 0;
  /** Time in attention calls since the step began. */
  private attentionMs = 0;

  private constructor(config: DecoderConfig, attn: Attention, ownsAttention: boolean, mhas: MultiheadAttention[], cacheDtype: KvCacheDType) {
    const { dModel: d, heads, kvHeads, ffnDim, maxLength, seed, vocab } = config;
    this.config = config;
    this.attn = attn;
    this.ownsAttention = ownsAttention;
    const e = d / heads;
    this.layers = mhas.map((mha, l) => {
      const w = mha.weights;
      return {
        mha,
        wQt: transpose(w.wQ), wKt: transpose(w.wK), wVt: transpose(w.wV), wOt: transpose(w.wO),
        w1: attn.xavierUniform([d, ffnDim], seed + 1000 * (l + 1) + 1),
        w2: attn.xavierUniform([ffnDim, d], seed + 1000 * (l + 1) + 2),
        cache: attn.createKvCache({ batch: 1, kvHeads, maxLength, headDim: e, dtype: cacheDtype }),
      };
    });
    this.weights = {
      embedding: attn.randomUniform([vocab.length, d], seed),
      positions: attn.randomUniform([maxLength, d], seed + 2),
      layers: this.layers.map(({ mha, w1, w2 }) => ({ wQ: mha.weights.wQ, wK: mha.weights.wK, wV: mha.weights.wV, wO: mha.weights.wO, w1, w2 })),
      head: attn.xavierUniform([d, vocab.length], seed + 1),
    };
  }

  /**
   * A decoder of `config` whose cached path runs on `attention` (not disposed with the decoder)
   * or on a new instance of `backend` (default 'auto'), with KV caches of `cacheDtype` (default
   * 'float32'). The full path's modules run on 'scalar' when that is the backend, else on 'simd'.
   */
  static async create(config: DecoderConfig, options: { attention?: Attention; backend?: BackendChoice; cacheDtype?: KvCacheDType } = {}): Promise<Decoder> {
    checkConfig(config);
    const attn = options.attention ?? (await createAttention({ backend: options.backend ?? 'auto' }));
    const moduleBackend = (options.attention?.backend ?? options.backend) === 'scalar' ? 'scalar' : 'simd';
    const mhas = await Promise.all(Array.from({ length: config.layers }, (_, l) => createMultiheadAttention({
      embedDim: config.dModel, numHeads: config.heads, numKvHeads: config.kvHeads, bias: false, batchFirst: true,
      seed: config.seed + 1000 * (l + 1), backend: moduleBackend,
    })));
    return new Decoder(config, attn, !options.attention, mhas, options.cacheDtype ?? 'float32');
  }

  /** Characters → token ids (a character outside the vocabulary is a RangeError naming it). */
  encode(text: string): number[] {
    return [...text].map((ch) => {
      const id = this.config.vocab.indexOf(ch);
      if (id < 0) throw new RangeError(`'${ch}' is not in the decoder's vocabulary (${JSON.stringify(this.config.vocab)})`);
      return id;
    });
  }

  decode(tokens: readonly number[]): string {
    return tokens.map((t) => this.config.vocab[t]).join('');
  }

  /** Bytes the layers' KV caches hold. */
  get cacheBytes(): number {
    return this.layers.reduce((sum, layer) => sum + layer.cache.bytes, 0);
  }

  /** Greedy generation of `count` tokens after `prompt` with the KV caches (emptied first). */
  async generate(prompt: readonly number[], count: number, options: GenerateOptions = {}): Promise<Generation> {
    this.checkLengths(prompt, count);
    for (const layer of this.layers) layer.cache.reset();
    this.position = 0;
    let t0 = now();
    let logits = await this.forwardCached(prompt, options);
    const prefillMs = now() - t0;
    const tokens = [argmax(logits)];
    const stepMs: number[] = [];
    const attentionMs: number[] = [];
    while (tokens.length < count) {
      this.attentionMs = 0;
      t0 = now();
      logits = await this.forwardCached([tokens[tokens.length - 1]!], options);
      stepMs.push(now() - t0);
      attentionMs.push(this.attentionMs);
      tokens.push(argmax(logits));
    }
    return { prompt: [...prompt], tokens, logits, prefillMs, stepMs, attentionMs };
  }

  /**
   * The same greedy generation without a cache: each step recomputes full causal attention over
   * the whole sequence (`attentionMs` stays empty: the modules' calls are not timed apart).
   */
  generateFull(prompt: readonly number[], count: number): Generation {
    this.checkLengths(prompt, count);
    const tokens: number[] = [];
    const ms: number[] = [];
    let logits = new Float32Array(0);
    const vocab = this.config.vocab.length;
    while (tokens.length < count) {
      const t0 = now();
      const all = this.logitsFull([...prompt, ...tokens]);
      logits = all.slice(all.length - vocab);
      ms.push(now() - t0);
      tokens.push(argmax(logits));
    }
    return { prompt: [...prompt], tokens, logits, prefillMs: ms[0]!, stepMs: ms.slice(1), attentionMs: [] };
  }

  /** Logits `[L·vocab]` at every position of `tokens`, each layer's attention computed over the whole sequence. */
  logitsFull(tokens: readonly number[]): Float32Array {
    const n = tokens.length;
    const x = this.embed(tokens, 0);
    for (const layer of this.layers) {
      const xn: Tensor = { data: rmsNorm(x, this.config.dModel), shape: [1, n, this.config.dModel] };
      const { output } = layer.mha.forward(xn, xn, xn, { isCausal: true, needWeights: false });
      for (let i = 0; i < x.length; i++) x[i]! += output.data[i]!;
      this.mlp(layer, x, n);
    }
    return this.logits(x, n);
  }

  /** Frees the caches, the modules and the engine the decoder created. */
  dispose(): void {
    for (const layer of this.layers) {
      layer.cache.dispose();
      layer.mha.dispose();
    }
    if (this.ownsAttention) this.attn.dispose();
  }

  private checkLengths(prompt: readonly number[], count: number): void {
    if (prompt.length < 1) throw new RangeError('the prompt must hold at least one token');
    if (!(Number.isSafeInteger(count) && count >= 1)) throw new RangeError(`count must be an integer ≥ 1; got ${count}`);
    if (prompt.length + count - 1 > this.config.maxLength) {
      throw new RangeError(`${prompt.length} prompt tokens and ${count} generated need ${prompt.length + count - 1} cache rows; maxLength is ${this.config.maxLength}`);
    }
    for (const t of prompt) {
      if (!(Number.isInteger(t) && t >= 0 && t < this.config.vocab.length)) throw new RangeError(`token ids must be integers in [0, ${this.config.vocab.length}); got ${t}`);
    }
  }

  /** Token embeddings plus the positions from `start`: `[n·d]`. */
  private embed(tokens: readonly number[], start: number): Float32Array {
    const d = this.config.dModel;
    const { embedding, positions } = this.weights;
    const x = new Float32Array(tokens.length * d);
    tokens.forEach((t, r) => {
      for (let i = 0; i < d; i++) x[r * d + i] = embedding.data[t * d + i]! + positions.data[(start + r) * d + i]!;
    });
    return x;
  }

  /** x += W2·gelu(W1·rmsNorm(x)), in place, for `n` rows. */
  private mlp(layer: Layer, x: Float32Array, n: number): void {
    const d = this.config.dModel;
    const hidden = this.attn.matmul({ data: rmsNorm(x, d), shape: [n, d] }, layer.w1);
    for (let i = 0; i < hidden.data.length; i++) hidden.data[i] = gelu(hidden.data[i]!);
    const out = this.attn.matmul(hidden, layer.w2).data;
    for (let i = 0; i < x.length; i++) x[i]! += out[i]!;
  }

  /** The head's logits of every row of x `[n·d]`: `[n·vocab]`. */
  private logits(x: Float32Array, n: number): Float32Array {
    const d = this.config.dModel;
    return this.attn.matmul({ data: rmsNorm(x, d), shape: [n, d] }, this.weights.head).data;
  }

  /** The cached path for new tokens at the caches' end: returns the last one's logits `[vocab]`. */
  private async forwardCached(tokens: readonly number[], options: GenerateOptions): Promise<Float32Array> {
    const { dModel: d, heads, kvHeads } = this.config;
    const n = tokens.length, start = this.position;
    const a = this.attn;
    const x = this.embed(tokens, start);
    for (const [l, layer] of this.layers.entries()) {
      const xn: Tensor = { data: rmsNorm(x, d), shape: [1, n, d] };
      const query = splitHeads(a.matmul(xn, layer.wQt), heads);
      const key = splitHeads(a.matmul(xn, layer.wKt), kvHeads);
      const value = splitHeads(a.matmul(xn, layer.wVt), kvHeads);
      layer.cache.append(key, value);
      const t0 = now();
      const { output, weights } = await a.scaledDotProductAttention(query, layer.cache, { isCausal: true, enableGqa: true, returnWeights: options.returnWeights ?? false });
      this.attentionMs += now() - t0;
      options.onAttention?.({ layer: l, start, query, key, value, cacheLength: layer.cache.length, output, weights });
      const projected = a.matmul(mergeHeads(output), layer.wOt).data;
      for (let i = 0; i < x.length; i++) x[i]! += projected[i]!;
      this.mlp(layer, x, n);
    }
    this.position += n;
    return this.logits(x.subarray((n - 1) * d), 1);
  }
}
