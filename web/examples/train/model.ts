/**
 * The training lab's model and trainer: a tiny attention-only transformer learning a task of
 * `tasks.ts`, forward and backward through sdpa-web, trained by Adam. Shared by the demo page's
 * training worker and its Node test.
 *
 * The model, for a sequence of LENGTH token ids:
 * - input x_i = [token embedding E[t_i] (TOKEN_DIM, learnt) ; one-hot of position i (LENGTH)],
 *   d = TOKEN_DIM + LENGTH wide;
 * - `layers` residual attention layers: x ← x + concat_h(attention_h(x·W_Q, x·W_K, x·W_V))·W_O, with
 *   `heads` causal heads of HEAD_DIM (`attn.scaledDotProductAttentionSync` on `[B, H, L, E]`,
 *   backward by `attn.scaledDotProductAttentionBackwardSync`);
 * - a read-out to the vocabulary, logits = x·W_U + b_U, and the mean cross-entropy over the task's
 *   query positions.
 * The dense layers are `attn.matmul` calls (their transposes and the cross-entropy are loops below).
 * Weights are `attn.xavierUniform` draws (embedding: `attn.randomUniform`) of the seed's stream,
 * biases 0, so a seed gives the same model everywhere.
 */
import type { Attention, Tensor } from 'sdpa-web';
import { LENGTH, queryPositions, rightKey, sampleSequences, VOCAB, type TaskName } from './tasks.js';

export const TOKEN_DIM = 16;
export const HEAD_DIM = 8;
/** Width of the residual stream: token embedding and one-hot position. */
export const MODEL_DIM = TOKEN_DIM + LENGTH;
/** Sequences per training step. */
export const BATCH = 32;
/**
 * The training target puts 1 − LABEL_SMOOTHING on the answer and spreads LABEL_SMOOTHING over the
 * vocabulary. With one-hot targets the loss falls to zero as soon as the answer wins, by growing
 * the read-out, while the attention stays blurred; smoothed targets bound the logits, so the loss
 * keeps falling only by sharpening the attention onto the right key. The reported loss is the plain
 * cross-entropy of the answer, which then settles near −ln(1 − LABEL_SMOOTHING·(1 − 1/vocabulary)),
 * 0.092 for 8 tokens.
 */
export const LABEL_SMOOTHING = 0.1;
/** The reported loss's floor under label smoothing: the model answering with the target's confidence. */
export const LOSS_FLOOR = -Math.log(1 - LABEL_SMOOTHING * (1 - 1 / VOCAB.length));
/** Held-out sequences the loss and the pattern are measured on (drawn from another stream). */
export const HELD_OUT = 64;

export interface LabConfig {
  task: TaskName;
  /** Attention heads per layer, 1–4. */
  heads: number;
  /** Attention layers, 1–2. */
  layers: number;
  /** Adam's step size, in (0, 1). */
  learningRate: number;
  /** Integer in [0, 2^32): the weights and every batch. */
  seed: number;
}

/** A named parameter tensor (row-major; matrices applied as x·W). */
export interface Parameter {
  name: string;
  shape: [number, number];
  data: Float32Array;
}

/** Throws a RangeError/TypeError naming the field that is out of range. */
export function checkConfig(config: LabConfig): LabConfig {
  if (typeof config !== 'object' || config === null) throw new TypeError('config must be an object { task, heads, layers, learningRate, seed }');
  const { task, heads, layers, learningRate, seed } = config;
  if (task !== 'copy' && task !== 'induction') throw new RangeError(`task must be 'copy' or 'induction'; got ${String(task)}`);
  if (!Number.isInteger(heads) || heads < 1 || heads > 4) throw new RangeError(`heads must be an integer from 1 to 4; got ${String(heads)}`);
  if (!Number.isInteger(layers) || layers < 1 || layers > 2) throw new RangeError(`layers must be 1 or 2; got ${String(layers)}`);
  if (typeof learningRate !== 'number' || !(learningRate > 0 && learningRate < 1)) throw new RangeError(`learningRate must be a number in (0, 1); got ${String(learningRate)}`);
  if (!Number.isInteger(seed) || seed < 0 || seed >= 2 ** 32) throw new RangeError(`seed must be an integer in [0, 2^32); got ${String(seed)}`);
  return config;
}

/** The names and shapes of the model's parameters, in order. */
export function parameterShapes(heads: number, layers: number): { name: string; shape: [number, number] }[] {
  const inner = heads * HEAD_DIM;
  const shapes: { name: string; shape: [number, number] }[] = [{ name: 'embedding', shape: [VOCAB.length, TOKEN_DIM] }];
  for (let l = 1; l <= layers; l++) {
    for (const w of ['wQ', 'wK', 'wV']) shapes.push({ name: `layer${l}.${w}`, shape: [MODEL_DIM, inner] });
    shapes.push({ name: `layer${l}.wO`, shape: [inner, MODEL_DIM] });
  }
  shapes.push({ name: 'readout', shape: [MODEL_DIM, VOCAB.length] }, { name: 'readoutBias', shape: [1, VOCAB.length] });
  return shapes;
}

/**
 * The model's parameters, initialised from `seed`'s stream, each tensor from its own draws (in
 * order): the embedding U(−1, 1), the matrices Xavier-uniform, the read-out bias 0.
 */
export function initParameters(attn: Attention, heads: number, layers: number, seed: number): Parameter[] {
  let offset = 0;
  return parameterShapes(heads, layers).map(({ name, shape }) => {
    const data =
      name === 'readoutBias'
        ? new Float32Array(shape[1])
        : name === 'embedding'
          ? attn.randomUniform(shape, seed, { low: -1, high: 1, offset }).data
          : attn.xavierUniform(shape, seed, offset).data;
    offset += data.length;
    return { name, shape, data };
  });
}

/** a `[rows, cols]` transposed to `[cols, rows]`, keeping only its first `keepRows` rows. */
function transpose(a: Float32Array, rows: number, cols: number, keepRows = rows): Float32Array {
  const t = new Float32Array(cols * keepRows);
  for (let r = 0; r < keepRows; r++) for (let c = 0; c < cols; c++) t[c * keepRows + r] = a[r * cols + c]!;
  return t;
}

/** [B·L, H·E] (rows of tokens) ↔ [B, H, L, E] (the attention layout). */
function splitHeads(x: Float32Array, count: number, heads: number): Float32Array {
  const y = new Float32Array(x.length);
  for (let b = 0; b < count; b++) {
    for (let t = 0; t < LENGTH; t++) {
      for (let h = 0; h < heads; h++) {
        const from = ((b * LENGTH + t) * heads + h) * HEAD_DIM;
        y.set(x.subarray(from, from + HEAD_DIM), ((b * heads + h) * LENGTH + t) * HEAD_DIM);
      }
    }
  }
  return y;
}

function mergeHeads(y: Float32Array, count: number, heads: number): Float32Array {
  const x = new Float32Array(y.length);
  for (let b = 0; b < count; b++) {
    for (let h = 0; h < heads; h++) {
      for (let t = 0; t < LENGTH; t++) {
        const from = ((b * heads + h) * LENGTH + t) * HEAD_DIM;
        x.set(y.subarray(from, from + HEAD_DIM), ((b * LENGTH + t) * heads + h) * HEAD_DIM);
      }
    }
  }
  return x;
}

interface LayerCache {
  input: Float32Array;
  q: Tensor;
  k: Tensor;
  v: Tensor;
  output: Tensor;
  logSumExp: Tensor;
  merged: Float32Array;
  weights?: Tensor;
}

/** A batch's (or shard's) summed answer cross-entropy and its training-loss gradients. */
export interface ShardGradients {
  lossSum: number;
  /** One per parameter, in the model's `params` order. */
  gradients: Float32Array[];
}

/** The model's reply to one sequence. */
export interface Answer {
  /** The most likely token at each position. */
  predicted: number[];
  /** Its probability. */
  confidence: number[];
  /** Attention weights `[layer][head]`, each `tokens.length × tokens.length` row-major. */
  weights: Float32Array[][];
}

export interface ForwardResult {
  /** `[count, LENGTH, vocabulary]`. */
  logits: Float32Array;
  /** Each layer's attention weights `[count, heads, LENGTH, LENGTH]`, when asked for. */
  weights: Tensor[];
}

/** The model with its parameters: forward, loss and gradients on a batch of sequences. */
export class TinyTransformer {
  readonly params: Parameter[];

  constructor(
    readonly attn: Attention,
    readonly heads: number,
    readonly layers: number,
    params: Parameter[],
  ) {
    this.params = params;
  }

  private param(name: string): Float32Array {
    return this.params.find((p) => p.name === name)!.data;
  }

  /** y[n, dout] = x[n, din]·w[din, dout], by `attn.matmul`. */
  private linear(x: Float32Array, n: number, din: number, w: Float32Array, dout: number): Float32Array {
    return this.attn.matmul({ data: x, shape: [n, din] }, { data: w, shape: [din, dout] }).data;
  }

  /**
   * Given dy = ∂L/∂(x·w): dw += xᵀ·dy and, when `dx` is given, dx[:, 0:dxColumns] += (dy·wᵀ)[:, 0:dxColumns]
   * (the one-hot position columns of the model's input need no gradient).
   */
  private linearBackward(x: Float32Array, dy: Float32Array, n: number, din: number, w: Float32Array, dout: number, dw: Float32Array, dx: Float32Array | null, dxColumns = din): void {
    const gw = this.linear(transpose(x, n, din), din, n, dy, dout);
    for (let i = 0; i < dw.length; i++) dw[i]! += gw[i]!;
    if (!dx) return;
    const gx = this.linear(dy, n, dout, transpose(w, din, dout, dxColumns), dxColumns);
    for (let r = 0; r < n; r++) for (let k = 0; k < dxColumns; k++) dx[r * din + k]! += gx[r * dxColumns + k]!;
  }

  /** The input rows [count·LENGTH, MODEL_DIM] of `tokens` (token ids, `count` rows of LENGTH). */
  private embed(tokens: ArrayLike<number>, count: number): Float32Array {
    const e = this.param('embedding');
    const x = new Float32Array(count * LENGTH * MODEL_DIM);
    for (let r = 0; r < count * LENGTH; r++) {
      x.set(e.subarray(tokens[r]! * TOKEN_DIM, (tokens[r]! + 1) * TOKEN_DIM), r * MODEL_DIM);
      x[r * MODEL_DIM + TOKEN_DIM + (r % LENGTH)] = 1;
    }
    return x;
  }

  private run(tokens: ArrayLike<number>, count: number, returnWeights: boolean): { logits: Float32Array; last: Float32Array; caches: LayerCache[] } {
    const n = count * LENGTH;
    const inner = this.heads * HEAD_DIM;
    const shape = [count, this.heads, LENGTH, HEAD_DIM];
    let x = this.embed(tokens, count);
    const caches: LayerCache[] = [];
    for (let l = 1; l <= this.layers; l++) {
      const project = (w: string): Tensor => ({ data: splitHeads(this.linear(x, n, MODEL_DIM, this.param(`layer${l}.${w}`), inner), count, this.heads), shape });
      const q = project('wQ');
      const k = project('wK');
      const v = project('wV');
      const r = this.attn.scaledDotProductAttentionSync(q, k, v, { isCausal: true, returnLogSumExp: true, returnWeights });
      const merged = mergeHeads(r.output.data, count, this.heads);
      const out = this.linear(merged, n, inner, this.param(`layer${l}.wO`), MODEL_DIM);
      caches.push({ input: x, q, k, v, output: r.output, logSumExp: r.logSumExp!, merged, weights: r.weights });
      // The last layer's output alone feeds the read-out: the answer can only come through attention.
      if (l < this.layers) for (let i = 0; i < x.length; i++) out[i]! += x[i]!;
      x = out;
    }
    const logits = this.linear(x, n, MODEL_DIM, this.param('readout'), VOCAB.length);
    const bias = this.param('readoutBias');
    for (let r = 0; r < n; r++) for (let c = 0; c < VOCAB.length; c++) logits[r * VOCAB.length + c]! += bias[c]!;
    return { logits, last: x, caches };
  }

  /** Logits and (with `returnWeights`) every layer's attention weights. */
  forward(tokens: ArrayLike<number>, count: number, returnWeights = false): ForwardResult {
    const { logits, caches } = this.run(tokens, count, returnWeights);
    return { logits, weights: returnWeights ? caches.map((c) => c.weights!) : [] };
  }

  /** The model's answer at every position of one sequence of 1 … LENGTH tokens (causal: later tokens never matter). */
  answer(tokens: readonly number[]): Answer {
    const n = tokens.length;
    if (n < 1 || n > LENGTH) throw new RangeError(`tokens must hold 1 to ${LENGTH} token ids; got ${n}`);
    for (const t of tokens) if (!(Number.isInteger(t) && t >= 0 && t < VOCAB.length)) throw new RangeError(`tokens must be ids in [0, ${VOCAB.length}); got ${t}`);
    const padded = Int32Array.from({ length: LENGTH }, (_, i) => tokens[i] ?? 0);
    const { logits, weights } = this.forward(padded, 1, true);
    const vocab = VOCAB.length;
    const predicted: number[] = [];
    const confidence: number[] = [];
    for (let i = 0; i < n; i++) {
      const row = logits.subarray(i * vocab, (i + 1) * vocab);
      const best = row.indexOf(Math.max(...row));
      let sum = 0;
      for (const z of row) sum += Math.exp(z - row[best]!);
      predicted.push(best);
      confidence.push(1 / sum);
    }
    const crop = (w: Tensor, h: number) => Float32Array.from({ length: n * n }, (_, k) => w.data[(h * LENGTH + Math.floor(k / n)) * LENGTH + (k % n)]!);
    return { predicted, confidence, weights: weights.map((w) => Array.from({ length: this.heads }, (_, h) => crop(w, h))) };
  }

  /**
   * The summed cross-entropy of the answers at `task`'s query positions over `count` sequences,
   * and, for every parameter (in `params` order), the gradient of the summed cross-entropy against
   * the smoothed targets (LABEL_SMOOTHING) divided by `normalizer`. With `normalizer` the number of
   * terms, the gradients are those of the mean training loss.
   */
  lossAndGradients(tokens: ArrayLike<number>, count: number, task: TaskName, normalizer: number): ShardGradients {
    const n = count * LENGTH;
    const vocab = VOCAB.length;
    const inner = this.heads * HEAD_DIM;
    const { logits, last, caches } = this.run(tokens, count, false);
    const grads = new Map(this.params.map((p) => [p.name, new Float32Array(p.data.length)]));
    const dLogits = new Float32Array(n * vocab);
    let lossSum = 0;
    const positions = queryPositions(task);
    for (let b = 0; b < count; b++) {
      for (const i of positions) {
        const r = b * LENGTH + i;
        const target = tokens[b * LENGTH + rightKey(task, i)]!;
        let max = -Infinity;
        for (let c = 0; c < vocab; c++) max = Math.max(max, logits[r * vocab + c]!);
        let sum = 0;
        for (let c = 0; c < vocab; c++) sum += Math.exp(logits[r * vocab + c]! - max);
        lossSum += Math.log(sum) + max - logits[r * vocab + target]!;
        for (let c = 0; c < vocab; c++) {
          const want = (c === target ? 1 - LABEL_SMOOTHING : 0) + LABEL_SMOOTHING / vocab;
          dLogits[r * vocab + c] = (Math.exp(logits[r * vocab + c]! - max) / sum - want) / normalizer;
        }
      }
    }
    const dBias = grads.get('readoutBias')!;
    for (let r = 0; r < n; r++) for (let c = 0; c < vocab; c++) dBias[c]! += dLogits[r * vocab + c]!;
    let dx = new Float32Array(n * MODEL_DIM);
    this.linearBackward(last, dLogits, n, MODEL_DIM, this.param('readout'), vocab, grads.get('readout')!, dx);
    for (let l = this.layers; l >= 1; l--) {
      const c = caches[l - 1]!;
      const dMerged = new Float32Array(n * inner);
      this.linearBackward(c.merged, dx, n, inner, this.param(`layer${l}.wO`), MODEL_DIM, grads.get(`layer${l}.wO`)!, dMerged);
      const dOutput: Tensor = { data: splitHeads(dMerged, count, this.heads), shape: c.output.shape };
      const g = this.attn.scaledDotProductAttentionBackwardSync(c.q, c.k, c.v, dOutput, { isCausal: true, output: c.output, logSumExp: c.logSumExp });
      // Below the last layer the residual passes dx through; layer 1's input needs it only in the embedding's columns.
      const dxIn = l < this.layers ? dx.slice() : new Float32Array(dx.length);
      for (const [w, d] of [['wQ', g.dQuery], ['wK', g.dKey], ['wV', g.dValue]] as const) {
        this.linearBackward(c.input, mergeHeads(d.data, count, this.heads), n, MODEL_DIM, this.param(`layer${l}.${w}`), inner, grads.get(`layer${l}.${w}`)!, dxIn, l === 1 ? TOKEN_DIM : MODEL_DIM);
      }
      dx = dxIn;
    }
    const dEmbedding = grads.get('embedding')!;
    for (let r = 0; r < n; r++) {
      const t = tokens[r]!;
      for (let e = 0; e < TOKEN_DIM; e++) dEmbedding[t * TOKEN_DIM + e]! += dx[r * MODEL_DIM + e]!;
    }
    return { lossSum, gradients: this.params.map((p) => grads.get(p.name)!) };
  }
}

/** Adam (Kingma & Ba) with bias correction. */
export class Adam {
  private readonly m: Float32Array[];
  private readonly v: Float32Array[];
  private t = 0;

  constructor(
    private readonly params: Parameter[],
    private readonly learningRate: number,
    private readonly beta1 = 0.9,
    private readonly beta2 = 0.999,
    private readonly epsilon = 1e-8,
  ) {
    this.m = params.map((p) => new Float32Array(p.data.length));
    this.v = params.map((p) => new Float32Array(p.data.length));
  }

  step(gradients: Float32Array[]): void {
    this.t++;
    const c1 = 1 - this.beta1 ** this.t;
    const c2 = 1 - this.beta2 ** this.t;
    this.params.forEach((p, i) => {
      const g = gradients[i]!;
      const m = this.m[i]!;
      const v = this.v[i]!;
      for (let j = 0; j < p.data.length; j++) {
        m[j] = this.beta1 * m[j]! + (1 - this.beta1) * g[j]!;
        v[j] = this.beta2 * v[j]! + (1 - this.beta2) * g[j]! * g[j]!;
        p.data[j]! -= (this.learningRate * (m[j]! / c1)) / (Math.sqrt(v[j]! / c2) + this.epsilon);
      }
    });
  }
}

/** Mean attention weight on the right key, per layer and head: `[layer][head]`. */
export function patternScores(task: TaskName, weights: Tensor[]): number[][] {
  const positions = queryPositions(task);
  return weights.map((w) => {
    const [count, heads] = w.shape as [number, number, number, number];
    return Array.from({ length: heads }, (_, h) => {
      let sum = 0;
      for (let b = 0; b < count; b++) {
        for (const i of positions) sum += w.data[((b * heads + h) * LENGTH + i) * LENGTH + rightKey(task, i)]!;
      }
      return sum / (count * positions.length);
    });
  });
}

/** The mean cross-entropy of `task`'s query positions, from logits `[count, LENGTH, vocab]`. */
export function meanCrossEntropy(task: TaskName, tokens: ArrayLike<number>, logits: Float32Array, count: number): number {
  const vocab = VOCAB.length;
  const positions = queryPositions(task);
  let sum = 0;
  for (let b = 0; b < count; b++) {
    for (const i of positions) {
      const row = logits.subarray((b * LENGTH + i) * vocab, (b * LENGTH + i + 1) * vocab);
      const max = Math.max(...row);
      let s = 0;
      for (const z of row) s += Math.exp(z - max);
      sum += Math.log(s) + max - row[tokens[b * LENGTH + rightKey(task, i)]!]!;
    }
  }
  return sum / (count * positions.length);
}

export interface Evaluation {
  /** Training steps taken. */
  step: number;
  /** Mean cross-entropy on the held-out sequences. */
  loss: number;
  /** Mean attention weight on the right key of the held-out sequences, `[layer][head]`. */
  pattern: number[][];
}

/** The stream of the training batches: the weights take `seed`'s own stream. */
export const batchStream = (seed: number): number => (seed ^ 0x5bd1e995) >>> 0;
/** The stream of the held-out sequences, never trained on. */
export const heldOutStream = (seed: number): number => (seed ^ 0x27d4eb2f) >>> 0;

/**
 * Trains a {@link TinyTransformer} on a task: each step draws BATCH sequences (draws
 * step·BATCH·LENGTH … of the stream `batchStream(seed)`), takes the gradient of their mean cross-entropy
 * and an Adam step. The gradient is the sum of SHARDS shard gradients, computed in order (by
 * `shardGradients`, which another worker may compute), so the arithmetic, and the run, are the
 * same whoever computes the shards.
 */
export class Trainer {
  static readonly SHARDS = 2;
  readonly model: TinyTransformer;
  readonly heldOut: Int32Array;
  private readonly optimizer: Adam;
  private lastBatch?: { step: number; tokens: Int32Array };
  step = 0;

  constructor(
    readonly attn: Attention,
    readonly config: LabConfig,
  ) {
    checkConfig(config);
    this.model = new TinyTransformer(attn, config.heads, config.layers, initParameters(attn, config.heads, config.layers, config.seed));
    this.optimizer = new Adam(this.model.params, config.learningRate);
    this.heldOut = sampleSequences(attn, config.task, HELD_OUT, heldOutStream(config.seed), 0);
  }

  /** Token ids of the batch of step `step`: `[BATCH, LENGTH]`. */
  batch(step: number): Int32Array {
    if (this.lastBatch?.step !== step) this.lastBatch = { step, tokens: sampleSequences(this.attn, this.config.task, BATCH, batchStream(this.config.seed), step * BATCH * LENGTH) };
    return this.lastBatch.tokens;
  }

  /** Shard `shard` (of SHARDS) of step `step`'s batch: `[BATCH / SHARDS, LENGTH]` token ids. */
  shard(step: number, shard: number): Int32Array {
    const rows = (BATCH / Trainer.SHARDS) * LENGTH;
    return this.batch(step).subarray(shard * rows, (shard + 1) * rows);
  }

  /** The number of cross-entropy terms of a batch: the gradients' normalizer. */
  get batchTerms(): number {
    return BATCH * queryPositions(this.config.task).length;
  }

  /** Shard `shard` of step `step`'s batch: its summed loss and gradients (÷ the batch's terms). */
  shardGradients(step: number, shard: number): ShardGradients {
    return this.model.lossAndGradients(this.shard(step, shard), BATCH / Trainer.SHARDS, this.config.task, this.batchTerms);
  }

  /** One Adam step from the shards' gradients (in shard order); returns the batch's mean loss. */
  applyShards(shards: ShardGradients[]): number {
    const total = shards[0]!.gradients.map((g) => g.slice());
    for (const s of shards.slice(1)) s.gradients.forEach((g, i) => { const t = total[i]!; for (let j = 0; j < g.length; j++) t[j]! += g[j]!; });
    this.optimizer.step(total);
    this.step++;
    return shards.reduce((a, s) => a + s.lossSum, 0) / this.batchTerms;
  }

  /** One training step computed here; returns the batch's mean loss (before the update). */
  trainStep(): number {
    return this.applyShards(Array.from({ length: Trainer.SHARDS }, (_, s) => this.shardGradients(this.step, s)));
  }

  /** Loss and pattern on the held-out sequences. */
  evaluate(): Evaluation {
    const r = this.model.forward(this.heldOut, HELD_OUT, true);
    return { step: this.step, loss: meanCrossEntropy(this.config.task, this.heldOut, r.logits, HELD_OUT), pattern: patternScores(this.config.task, r.weights) };
  }
}
