// The demo page's training lab (web/examples/train): the tiny attention model learns both tasks to
// a stated held-out loss with the right attention pattern (mean weight on the right key > 0.9 for
// the head that learns it), runs are reproducible from the seed, and the first step's gradients of
// every parameter entry match central finite differences of the training loss computed in float64
// by an independent implementation below.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAttention, type Attention } from 'sdpa-web';
import { BATCH, HEAD_DIM, LABEL_SMOOTHING, LOSS_FLOOR, MODEL_DIM, TOKEN_DIM, Trainer, type LabConfig, type Parameter } from '../../web/examples/train/model.js';
import { decode, encode, LENGTH, queryPositions, rightKey, sampleSequences, VOCAB, type TaskName } from '../../web/examples/train/tasks.js';

/** The held-out loss each task must reach: within 0.05 of the floor label smoothing sets (0.092). */
const TARGET_LOSS = LOSS_FLOOR + 0.05;
const STEPS = 400;

let attn: Attention;
beforeAll(async () => {
  attn = await createAttention({ backend: 'simd', threads: 1 });
});
afterAll(() => attn.dispose());

function train(config: LabConfig, steps: number): Trainer {
  const trainer = new Trainer(attn, config);
  for (let s = 0; s < steps; s++) trainer.trainStep();
  return trainer;
}

describe('the training lab learns the attention pattern of each task', () => {
  for (const [task, heads, layers] of [['copy', 1, 1], ['induction', 1, 1], ['induction', 2, 2]] as const) {
    it(`${task}, ${heads} head(s), ${layers} layer(s): held-out loss < ${TARGET_LOSS.toFixed(3)} and weight on the right key > 0.9 after ${STEPS} steps`, () => {
      const trainer = train({ task, heads, layers, learningRate: 0.03, seed: 1 }, STEPS);
      const { loss, pattern } = trainer.evaluate();
      const best = Math.max(...pattern.flat());
      console.log(`${task} (${heads} head(s), ${layers} layer(s)): held-out loss ${loss.toFixed(4)} (floor ${LOSS_FLOOR.toFixed(4)}), mean weight on the right key per layer/head ${JSON.stringify(pattern.map((l) => l.map((w) => +w.toFixed(3))))}`);
      expect(loss).toBeLessThan(TARGET_LOSS);
      expect(best).toBeGreaterThan(0.9);
      // The model answers a sequence it has never seen.
      const tokens = sampleSequences(attn, task, 1, 12345, 0);
      const answer = trainer.model.answer(Array.from(tokens));
      for (const i of queryPositions(task)) expect(decode([answer.predicted[i]!]), `position ${i} of ${decode(tokens)}`).toBe(decode([tokens[rightKey(task, i)]!]));
    });
  }

  it('is reproducible: the same seed gives the same run, another seed another', () => {
    const config: LabConfig = { task: 'copy', heads: 2, layers: 2, learningRate: 0.03, seed: 7 };
    const a = train(config, 5);
    const b = train(config, 5);
    const c = train({ ...config, seed: 8 }, 5);
    a.model.params.forEach((p, i) => expect(p.data, p.name).toEqual(b.model.params[i]!.data));
    expect(a.model.params[0]!.data).not.toEqual(c.model.params[0]!.data);
  });

  it('rejects bad settings and sequences with errors naming them', () => {
    const ok: LabConfig = { task: 'copy', heads: 1, layers: 1, learningRate: 0.03, seed: 1 };
    expect(() => new Trainer(attn, { ...ok, heads: 5 })).toThrow(RangeError);
    expect(() => new Trainer(attn, { ...ok, heads: 5 })).toThrow(/heads/);
    expect(() => new Trainer(attn, { ...ok, layers: 3 })).toThrow(/layers/);
    expect(() => new Trainer(attn, { ...ok, learningRate: 0 })).toThrow(/learningRate/);
    expect(() => new Trainer(attn, { ...ok, seed: -1 })).toThrow(/seed/);
    expect(() => new Trainer(attn, { ...ok, task: 'sort' as TaskName })).toThrow(/task/);
    expect(() => encode('ABZ')).toThrow(/'Z' is not a token/);
    expect(() => encode('')).toThrow(RangeError);
    expect(() => encode('A'.repeat(LENGTH + 1))).toThrow(/at most/);
    expect(encode('ab ca')).toEqual([0, 1, 2, 0]);
  });
});

// ---- The training loss in float64, written independently of the model's code -------------------

/** x [n, din] · w [din, dout] in float64. */
function matmul64(x: Float64Array, n: number, din: number, w: Float64Array, dout: number): Float64Array {
  const y = new Float64Array(n * dout);
  for (let r = 0; r < n; r++) for (let k = 0; k < din; k++) for (let c = 0; c < dout; c++) y[r * dout + c]! += x[r * din + k]! * w[k * dout + c]!;
  return y;
}

/**
 * The mean training loss (cross-entropy against targets smoothed by LABEL_SMOOTHING) of `count`
 * sequences, everything in float64: embedding ⊕ one-hot position, per layer causal multi-head
 * attention (scale 1/√HEAD_DIM) and its output projection with a residual below the last layer, the
 * read-out with bias.
 */
function trainingLoss64(params: Map<string, Float64Array>, layers: number, heads: number, tokens: Int32Array, count: number, task: TaskName): number {
  const n = count * LENGTH;
  const inner = heads * HEAD_DIM;
  let x: Float64Array = new Float64Array(n * MODEL_DIM);
  const embedding = params.get('embedding')!;
  for (let r = 0; r < n; r++) {
    for (let e = 0; e < TOKEN_DIM; e++) x[r * MODEL_DIM + e] = embedding[tokens[r]! * TOKEN_DIM + e]!;
    x[r * MODEL_DIM + TOKEN_DIM + (r % LENGTH)] = 1;
  }
  for (let l = 1; l <= layers; l++) {
    const q = matmul64(x, n, MODEL_DIM, params.get(`layer${l}.wQ`)!, inner);
    const k = matmul64(x, n, MODEL_DIM, params.get(`layer${l}.wK`)!, inner);
    const v = matmul64(x, n, MODEL_DIM, params.get(`layer${l}.wV`)!, inner);
    const heads64 = new Float64Array(n * inner);
    const weights = new Float64Array(LENGTH);
    for (let b = 0; b < count; b++) {
      for (let h = 0; h < heads; h++) {
        const at = (t: number) => (b * LENGTH + t) * inner + h * HEAD_DIM;
        for (let i = 0; i < LENGTH; i++) {
          let max = -Infinity;
          for (let j = 0; j <= i; j++) {
            let dot = 0;
            for (let c = 0; c < HEAD_DIM; c++) dot += q[at(i) + c]! * k[at(j) + c]!;
            weights[j] = dot / Math.sqrt(HEAD_DIM);
            max = Math.max(max, weights[j]!);
          }
          let sum = 0;
          for (let j = 0; j <= i; j++) sum += weights[j] = Math.exp(weights[j]! - max);
          for (let j = 0; j <= i; j++) for (let c = 0; c < HEAD_DIM; c++) heads64[at(i) + c]! += (weights[j]! / sum) * v[at(j) + c]!;
        }
      }
    }
    const out = matmul64(heads64, n, inner, params.get(`layer${l}.wO`)!, MODEL_DIM);
    if (l < layers) for (let i = 0; i < out.length; i++) out[i]! += x[i]!;
    x = out;
  }
  const logits = matmul64(x, n, MODEL_DIM, params.get('readout')!, VOCAB.length);
  const bias = params.get('readoutBias')!;
  let loss = 0;
  const positions = queryPositions(task);
  for (let b = 0; b < count; b++) {
    for (const i of positions) {
      const row = Array.from({ length: VOCAB.length }, (_, c) => logits[(b * LENGTH + i) * VOCAB.length + c]! + bias[c]!);
      const max = Math.max(...row);
      const logSum = Math.log(row.reduce((a, z) => a + Math.exp(z - max), 0)) + max;
      const target = tokens[b * LENGTH + rightKey(task, i)]!;
      row.forEach((z, c) => (loss -= ((c === target ? 1 - LABEL_SMOOTHING : 0) + LABEL_SMOOTHING / VOCAB.length) * (z - logSum)));
    }
  }
  return loss / (count * positions.length);
}

/** The entries a tensor's gradient is checked at: the 4 largest in magnitude and 6 drawn by the library's seeded PRNG. */
function checkedEntries(g: Float32Array, tensorIndex: number): number[] {
  const largest = [...g.keys()].sort((a, b) => Math.abs(g[b]!) - Math.abs(g[a]!)).slice(0, 4);
  const drawn = Array.from(attn.randomUniform([6], 99, { low: 0, high: 1, offset: 6 * tensorIndex }).data, (u) => Math.min(g.length - 1, Math.floor(u * g.length)));
  return [...new Set([...largest, ...drawn])];
}

describe("the first step's gradients against float64 finite differences", () => {
  for (const task of ['copy', 'induction'] as const) {
    it(`${task}, 2 heads, 2 layers: every parameter tensor, at its largest and at seeded random entries`, () => {
      const trainer = new Trainer(attn, { task, heads: 2, layers: 2, learningRate: 0.03, seed: 3 });
      // The first step's gradient: both shards of the first batch, summed as the trainer does.
      const shards = Array.from({ length: Trainer.SHARDS }, (_, s) => trainer.shardGradients(0, s));
      const gradients = shards[0]!.gradients.map((g, i) => g.map((x, j) => x + shards.slice(1).reduce((a, s) => a + s.gradients[i]![j]!, 0)));
      const tokens = trainer.batch(0);
      const params = new Map(trainer.model.params.map((p: Parameter) => [p.name, Float64Array.from(p.data)]));
      const h = 1e-5;
      trainer.model.params.forEach((p, pi) => {
        const w = params.get(p.name)!;
        const g = gradients[pi]!;
        const fd = new Map<number, number>();
        for (const j of checkedEntries(g, pi)) {
          const keep = w[j]!;
          w[j] = keep + h;
          const up = trainingLoss64(params, 2, 2, tokens, BATCH, task);
          w[j] = keep - h;
          const down = trainingLoss64(params, 2, 2, tokens, BATCH, task);
          w[j] = keep;
          fd.set(j, (up - down) / (2 * h));
        }
        let maxDiff = 0;
        let maxFd = 0;
        for (const [j, d] of fd) {
          maxDiff = Math.max(maxDiff, Math.abs(g[j]! - d));
          maxFd = Math.max(maxFd, Math.abs(d));
        }
        console.log(`${task} ${p.name} [${p.shape.join(', ')}], ${fd.size} entries: max |float32 gradient − float64 finite difference| ${maxDiff.toExponential(2)} (max |gradient| ${maxFd.toExponential(2)})`);
        expect(maxFd, p.name).toBeGreaterThan(0);
        // float32 sums of a few hundred terms: observed ≤ 1e-6 of the largest gradient.
        expect(maxDiff, p.name).toBeLessThanOrEqual(1e-5 * maxFd);
      });
    });
  }
});
