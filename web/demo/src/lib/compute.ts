// Runs a worked example through sdpa-web and collects each stage for the stepper, plus the comparison of
// the text's printed numbers with the computed ones. DOM-free, so the browser tests can import it too.
import type { Attention, AttentionOptions, AttentionStages, Tensor } from 'sdpa-web';
import type { MaskSpec, PrintedValue, Target, UniformSource, WorkedExample } from '../../../examples/worked-examples';
import { normalSampler, uniformStream } from '../../../examples/worked-examples';
import { pyList, pytorchAttention } from './pytorch';
import { entropy, eye, fmt, stdOf, isFullyMasked, maxOf, rowsOf, seqLabels, size, slice0, tensor, toTensor, transpose, type NumTensor } from './tensors';

/** One labelled matrix shown in a stage. */
export interface MatrixView {
  name: string;
  tensor: NumTensor;
  rowLabels: string[];
  colLabels: string[];
  rowAxis: string;
  colAxis: string;
  /** Colour scale: weights in [0, 1], or signed values. */
  /** How its values are coloured: weights in [0, 1], signed values, or a 0/1 mask (1 = may attend). */
  kind: 'weights' | 'signed' | 'mask';
  /** Rows that are fully masked (all weights 0). */
  maskedRows?: number[];
}

/** One step of the stepper. */
export interface Stage {
  id: 'inputs' | 'projections' | 'scores' | 'scaled' | 'masked' | 'weights' | 'output' | 'temperature';
  title: string;
  /** KaTeX source of this step's formula. */
  tex: string;
  views: MatrixView[];
  note?: string;
  /** Short KaTeX label for the stage's tab (the formula itself can be long). */
  tab?: string;
}

/** A printed number set beside the computed one. */
export interface Comparison {
  printed: PrintedValue;
  computed: number[];
  /** Per value: does the printed value agree with the computed one within the printed rounding? */
  agrees: boolean[];
  status: 'ok' | 'slip';
  /** Where the difference comes from, when the page can tell. */
  why?: string;
  /** Values per displayed row (the target's last dimension). */
  cols: number;
}

/** Extra panels (tables and plots) for examples that are not a single stepper run. */
export type Extra =
  | { kind: 'table'; title: string; columns: string[]; rows: (string | number)[][] }
  | { kind: 'lines'; title: string; xLabel: string; yLabel: string; xLog?: boolean; yLog?: boolean; points: { x: number; y: number; series: string }[] };

export interface ExampleRun {
  example: WorkedExample;
  backend: string;
  stages: Stage[];
  values: Partial<Record<Target, NumTensor>>;
  comparisons: Comparison[];
  extras: Extra[];
  notes: string[];
  /** Python snippet that reproduces the numbers with PyTorch. */
  pytorch: string;
}

const dims = (p: string, n: number) => seqLabels(p, n);

function maskToTensor(mask: MaskSpec | undefined, lq: number, lk: number): { opts: AttentionOptions; label: string; tex: string } {
  if (!mask) return { opts: {}, label: 'none', tex: 'M = 0' };
  if (mask.kind === 'causal') return { opts: { isCausal: mask.align }, label: `causal (${mask.align})`, tex: `M_{ij} = -\\infty \\text{ for } j > i${mask.align === 'bottom-right' ? ' + (L_k - L_q)' : ''}` };
  if (mask.kind === 'padding') {
    const d = new Uint8Array(lq * lk);
    for (let i = 0; i < lq; i++) for (let j = 0; j < Math.min(mask.validKeys, lk); j++) d[i * lk + j] = 1;
    return { opts: { attnMask: { data: d, shape: [lq, lk] } }, label: `padding (first ${mask.validKeys} keys valid)`, tex: `M_{ij} = -\\infty \\text{ for } j \\geq ${mask.validKeys}` };
  }
  return { opts: { attnMask: { data: Uint8Array.from(mask.mask.data), shape: mask.mask.shape.slice() } }, label: 'custom', tex: 'M_{ij} = -\\infty \\text{ where masked}' };
}

function maskedRowsOf(w: NumTensor): number[] {
  return rowsOf(w).flatMap((r, i) => (isFullyMasked(r) ? [i] : []));
}

/** Attention stages (scores … output) from an `explain` result. */
export function attentionStages(st: AttentionStages, o: { qLabels: string[]; kLabels: string[]; vDims: number; scale: number; dk: number; maskLabel: string; maskTex: string; givenScores?: boolean; withOutput?: boolean; v?: NumTensor }): Stage[] {
  const { qLabels, kLabels } = o;
  const qk = { rowLabels: qLabels, colLabels: kLabels, rowAxis: 'query', colAxis: 'key' };
  const defaultScale = Math.abs(o.scale - 1 / Math.sqrt(o.dk)) < 1e-12;
  // A given scale of exactly 1/√m (e.g. the text's ÷√512) is shown as such.
  const m = Math.round(1 / o.scale ** 2);
  const rootOf = o.scale !== 1 && Number.isFinite(m) && m > 1 && Math.abs(1 / Math.sqrt(m) - o.scale) < 1e-12 ? m : undefined;
  const scaleTex = defaultScale && !o.givenScores ? `/\\sqrt{d_k} = S/\\sqrt{${o.dk}}` : rootOf ? `/\\sqrt{${rootOf}}` : o.scale === 1 ? '' : `\\times ${+o.scale.toPrecision(4)}`;
  const maskedRows = maskedRowsOf(st.weights);
  const stages: Stage[] = [
    {
      id: 'scores',
      title: o.givenScores ? 'Scores (given by the text)' : 'QKᵀ — similarity of every query with every key',
      tex: o.givenScores ? 'S \\;(\\text{given})' : 'S = QK^{\\top}',
      tab: o.givenScores ? 'S' : 'QK^{\\top}',
      views: [{ name: o.givenScores ? 'S (given)' : 'QKᵀ', tensor: st.scores, ...qk, kind: 'signed' }],
    },
  ];
  if (!o.givenScores || o.scale !== 1)
    stages.push({
      id: 'scaled',
      title: defaultScale && !o.givenScores ? `÷ √d_k = ÷ √${o.dk} ≈ ${Math.sqrt(o.dk).toFixed(3)}` : rootOf ? `÷ √${rootOf} ≈ ${Math.sqrt(rootOf).toFixed(3)}` : `× scale = ${+o.scale.toPrecision(4)}`,
      tex: `\\tilde S = S ${scaleTex}`,
      tab: o.scale === 1 ? '\\tilde S' : '\\div\\sqrt{d_k}',
      views: [{ name: 'scaled scores', tensor: st.scaledScores, ...qk, kind: 'signed' }],
    });
  if (!o.givenScores)
    stages.push({
      id: 'masked',
      title: `+ mask (${o.maskLabel})`,
      tex: `\\tilde S + M, \\quad ${o.maskTex}`,
      tab: '+\\,M',
      views: [{ name: 'masked scores', tensor: st.maskedScores, ...qk, kind: 'signed' }],
      note: o.maskLabel === 'none' ? 'No mask: M = 0, the scores pass through unchanged.' : 'Masked positions are −∞: their weight after the softmax is exactly 0.',
    });
  stages.push({
    id: 'weights',
    title: 'softmax — each row becomes a probability distribution',
    tex: 'A = \\operatorname{softmax}_{\\text{row}}(\\tilde S + M), \\quad A_{ij} = \\frac{e^{\\tilde S_{ij}}}{\\sum_{j\'} e^{\\tilde S_{ij\'}}}',
    tab: '\\operatorname{softmax}',
    views: [{ name: 'weights A', tensor: st.weights, ...qk, kind: 'weights', maskedRows }],
    note: maskedRows.length ? `Rows ${maskedRows.map((r) => qLabels[r]).join(', ')} are fully masked: all their weights are 0.` : undefined,
  });
  if (o.withOutput !== false)
    stages.push({
      id: 'output',
      title: '· V — each output row is a weighted average of the value rows',
      tex: 'O = AV, \\quad O_i = \\sum_j A_{ij} v_j',
      tab: '\\cdot\\, V',
      // The step's inputs beside its output: the weights A, the values V, and O = AV.
      views: [
        ...(o.v ? [{ name: 'weights A', tensor: st.weights, ...qk, kind: 'weights' as const, maskedRows }, { name: 'values V', tensor: o.v, rowLabels: kLabels, colLabels: dims('v', o.vDims), rowAxis: 'key', colAxis: 'value dim', kind: 'signed' as const }] : []),
        { name: 'output O', tensor: st.output, rowLabels: qLabels, colLabels: dims('v', o.vDims), rowAxis: 'query', colAxis: 'value dim', kind: 'signed' },
      ],
    });
  return stages;
}

const tol = (d: number) => 0.5 * 10 ** -d + 1e-9;

function pick(t: NumTensor, rows?: number[]): number[] {
  if (!rows) return Array.from(t.data);
  if (t.shape.length <= 1) return rows.map((r) => t.data[r]);
  const n = t.shape[t.shape.length - 1];
  return rows.flatMap((r) => Array.from({ length: n }, (_, j) => t.data[r * n + j]));
}

function compare(p: PrintedValue, computed: number[]): Omit<Comparison, 'why' | 'cols'> {
  const agrees = p.values.map((v, i) => {
    const c = computed[i];
    const d = Array.isArray(p.decimals) ? p.decimals[i] : p.decimals;
    if (p.relation === 'at-least') return c >= v;
    if (p.relation === 'statistical') return Math.abs(c - v) <= (p.tolerance ?? tol(d));
    return Math.abs(c - v) <= tol(d);
  });
  return { printed: p, computed, agrees, status: agrees.every(Boolean) ? 'ok' : 'slip' };
}

function rowStats(w: NumTensor, f: (r: number[]) => number): NumTensor {
  const rows = rowsOf(w);
  return { data: rows.map(f), shape: [rows.length] };
}

/** Run the score-statistics experiment (random q, k ~ N(0,1)) for each d_k. */
export interface StatsRow {
  dk: number;
  unscaledStd: number;
  scaledStd: number;
  maxWeightUnscaled: number;
  maxWeightScaled: number;
  entropyUnscaled: number;
  entropyScaled: number;
  /** The first scores (unscaled), for histograms. */
  sampleScores: Float32Array;
  /** The same scores after the library's ÷√d_k. */
  sampleScaled: Float32Array;
}

const mean = (a: number[]) => a.reduce((x, y) => x + y, 0) / a.length;

/** N(0, 1) samples of the library's stream `seed` (the stream's values do not depend on the batch size). */
export function randn(source: UniformSource, shape: number[], seed: number): Tensor {
  const normal = normalSampler(uniformStream(source, seed, 4096));
  const d = new Float32Array(size(shape));
  for (let i = 0; i < d.length; i++) d[i] = normal();
  return { data: d, shape };
}

/** {@link randn} in pieces of 2¹⁶ numbers with `between()` after each: the same numbers, and the page stays responsive. */
export async function randnInPieces(source: UniformSource, shape: number[], seed: number, between: () => Promise<void>): Promise<Tensor> {
  const normal = normalSampler(uniformStream(source, seed, 4096));
  const d = new Float32Array(size(shape));
  for (let i = 0; i < d.length; i++) {
    d[i] = normal();
    if ((i & 0xffff) === 0xffff) await between();
  }
  return { data: d, shape };
}

/**
 * Work per chunk of the statistics run, in multiply-adds plus a per-score cost (the softmax, entropy
 * and copies of each score count as SCORE_COST): a few tens of milliseconds.
 */
const CHUNK_WORK = 2 ** 21;
const SCORE_COST = 64;

/** Query rows of an n-key call of dimension d_k per chunk. */
export const rowsPerChunk = (n: number, dk: number): number => Math.max(1, Math.floor(CHUNK_WORK / (n * (dk + SCORE_COST))));

/**
 * The statistics for one d_k, computed in chunks of query rows (each row's scores and softmax do not
 * depend on the other rows, so the result is the same as one call); `between(done)` runs after each
 * chunk with the fraction done, so a page can update its progress and stay responsive.
 */
export async function scoreStatsFor(attn: Attention, dk: number, samples: number, seed: number, between?: (done: number) => Promise<void>): Promise<StatsRow> {
  const draw = (seedOf: number) => (between ? randnInPieces(attn, [samples, dk], seedOf, () => between(0)) : Promise.resolve(randn(attn, [samples, dk], seedOf)));
  const q = await draw(seed * 7919 + dk);
  const k = await draw(seed * 104729 + dk);
  const v = tensor(new Float32Array(samples), [samples, 1]);
  const scores = new Float32Array(samples * samples);
  const scaled = new Float32Array(samples * samples);
  const maxU: number[] = [], maxS: number[] = [], entU: number[] = [], entS: number[] = [];
  const step = rowsPerChunk(samples, dk);
  for (let r0 = 0; r0 < samples; r0 += step) {
    const r1 = Math.min(samples, r0 + step);
    const st = await attn.explain({ data: q.data.subarray(r0 * dk, r1 * dk), shape: [r1 - r0, dk] }, k, v);
    scores.set(st.scores.data, r0 * samples);
    scaled.set(st.scaledScores.data, r0 * samples);
    const wRows = rowsOf(st.weights);
    const uRows = rowsOf(attn.softmax(st.scores));
    maxU.push(...uRows.map(maxOf));
    maxS.push(...wRows.map(maxOf));
    entU.push(...uRows.map(entropy));
    entS.push(...wRows.map(entropy));
    if (between) await between(r1 / samples);
  }
  return {
    dk,
    unscaledStd: stdOf(scores),
    scaledStd: stdOf(scaled),
    maxWeightUnscaled: mean(maxU),
    maxWeightScaled: mean(maxS),
    entropyUnscaled: mean(entU),
    entropyScaled: mean(entS),
    sampleScores: scores.slice(0, 4096),
    sampleScaled: scaled.slice(0, 4096),
  };
}

function statsExtras(rows: StatsRow[]): Extra[] {
  return [
    {
      kind: 'table',
      title: 'Score statistics (computed)',
      columns: ['d_k', '√d_k', 'std unscaled', 'std scaled', 'mean max weight unscaled', 'mean max weight scaled', 'mean entropy unscaled', 'mean entropy scaled'],
      rows: rows.map((r) => [r.dk, Math.sqrt(r.dk).toFixed(2), r.unscaledStd.toFixed(2), r.scaledStd.toFixed(3), r.maxWeightUnscaled.toFixed(3), r.maxWeightScaled.toFixed(3), r.entropyUnscaled.toFixed(3), r.entropyScaled.toFixed(3)]),
    },
  ];
}

/** The score statistics for one d_k, computed elsewhere (a page's worker); `progress(done)` reports the share done. */
export type ScoreStatsRunner = (args: { dk: number; samples: number; seed: number }, progress: (done: number) => void) => Promise<StatsRow>;

/**
 * Run one worked example through the library. `between`, where given, is awaited between the pieces
 * of a long statistical run (with the share done so far): a page passes one that paints its progress
 * and yields. `scoreStats`, where given, computes the statistical runs instead (a page passes one that
 * runs them in its worker, so its main thread has none of that work).
 */
export async function runExample(attn: Attention, ex: WorkedExample, opts: { maskVariant?: number; samples?: number; between?: (done: number) => Promise<void>; scoreStats?: ScoreStatsRunner } = {}): Promise<ExampleRun> {
  const inp = ex.inputs;
  const stages: Stage[] = [];
  const values: Partial<Record<Target, NumTensor>> = {};
  const extras: Extra[] = [];
  const notes: string[] = [];
  let pytorch = '';
  const qLabels = (n: number) => ex.tokens?.queries.slice(0, n) ?? seqLabels('q', n);
  const kLabels = (n: number) => ex.tokens?.keys.slice(0, n) ?? seqLabels('k', n);

  const runAttention = async (q: Tensor, k: Tensor, v: Tensor, mask: MaskSpec | undefined, projections?: { x: NumTensor; wq: NumTensor; wk: NumTensor; wv: NumTensor }) => {
    const lq = q.shape[q.shape.length - 2];
    const lk = k.shape[k.shape.length - 2];
    const dk = q.shape[q.shape.length - 1];
    const m = maskToTensor(mask, lq, lk);
    const o: AttentionOptions = { ...m.opts, ...(inp.scale !== undefined ? { scale: inp.scale } : {}) };
    const st = await attn.explain(q, k, v, o);
    const scale = inp.scale ?? 1 / Math.sqrt(dk);
    stages.push(...attentionStages(st, { qLabels: qLabels(lq), kLabels: kLabels(lk), vDims: v.shape[v.shape.length - 1], scale, dk, maskLabel: m.label, maskTex: m.tex, v }));
    Object.assign(values, { scores: st.scores, scaledScores: st.scaledScores, weights: st.weights, output: st.output });
    pytorch = pytorchAttention(q, k, v, { options: o, title: `${ex.id}: ${ex.title}`, projections });
    return st;
  };

  const inputStage = (id: 'inputs' | 'projections', title: string, tex: string, views: [string, NumTensor, string[], string, string][]) =>
    stages.push({ id, title, tex, tab: id === 'inputs' ? '\\text{inputs}' : 'XW', views: views.map(([name, t, rl, ra, cp]) => ({ name, tensor: t, rowLabels: rl, colLabels: dims(cp, t.shape[t.shape.length - 1]), rowAxis: ra, colAxis: 'dimension', kind: 'signed' as const })) });

  switch (ex.compute) {
    case 'attention':
    case 'projection-attention': {
      let q: Tensor, k: Tensor, v: Tensor;
      if (ex.compute === 'projection-attention') {
        const x = toTensor(inp.x!, attn);
        const n = x.shape[0];
        inputStage('inputs', 'Inputs: X and the projections W_Q, W_K, W_V', 'X \\in \\mathbb{R}^{n \\times d_{model}},\\; W_Q, W_K \\in \\mathbb{R}^{d_{model} \\times d_k},\\; W_V \\in \\mathbb{R}^{d_{model} \\times d_v}', [
          ['X', x, qLabels(n), 'token', 'x'],
          ['W_Q', toTensor(inp.wq!, attn), dims('x', x.shape[1]), 'input dim', 'q'],
          ['W_K', toTensor(inp.wk!, attn), dims('x', x.shape[1]), 'input dim', 'k'],
          ['W_V', toTensor(inp.wv!, attn), dims('x', x.shape[1]), 'input dim', 'v'],
        ]);
        q = attn.matmul(x, toTensor(inp.wq!, attn));
        k = attn.matmul(x, toTensor(inp.wk!, attn));
        v = attn.matmul(x, toTensor(inp.wv!, attn));
        Object.assign(values, { Q: q, K: k, V: v });
        inputStage('projections', 'Projections Q = XW_Q, K = XW_K, V = XW_V', 'Q = XW_Q,\\quad K = XW_K,\\quad V = XW_V', [
          ['Q', q, qLabels(n), 'query', 'q'],
          ['K', k, kLabels(n), 'key', 'k'],
          ['V', v, kLabels(n), 'key', 'v'],
        ]);
      } else {
        q = toTensor(inp.q!, attn);
        k = toTensor(inp.k!, attn);
        v = toTensor(inp.v!, attn);
        inputStage('inputs', 'Inputs: Q, K, V', 'Q \\in \\mathbb{R}^{L_q \\times d_k},\\; K \\in \\mathbb{R}^{L_k \\times d_k},\\; V \\in \\mathbb{R}^{L_k \\times d_v}', [
          ['Q', q, qLabels(q.shape[0]), 'query', 'd'],
          ['K', k, kLabels(k.shape[0]), 'key', 'd'],
          ['V', v, kLabels(v.shape[0]), 'key', 'v'],
        ]);
      }
      const variant = inp.maskVariants?.[opts.maskVariant ?? 0]?.mask ?? inp.mask;
      await runAttention(q, k, v, variant, inp.x ? { x: toTensor(inp.x, attn), wq: toTensor(inp.wq!, attn), wk: toTensor(inp.wk!, attn), wv: toTensor(inp.wv!, attn) } : undefined);
      break;
    }
    case 'batched': {
      const q = toTensor(inp.q!, attn), k = toTensor(inp.k!, attn), v = toTensor(inp.v!, attn);
      const b = q.shape[0];
      const whole = await attn.explain(q, k, v);
      const rows: (string | number)[][] = [];
      for (let i = 0; i < b; i++) {
        const item = (t: Tensor) => {
          const x = slice0(t, i);
          return tensor(x.data, x.shape);
        };
        const one = await attn.explain(item(q), item(k), item(v));
        const bo = slice0(whole.output, i);
        let d = 0;
        for (let j = 0; j < one.output.data.length; j++) d = Math.max(d, Math.abs(one.output.data[j] - bo.data[j]));
        rows.push([`sequence ${i + 1}`, `[${one.output.shape.join(', ')}]`, d.toExponential(2), d === 0 ? 'identical' : d < 1e-5 ? 'equal to float32 rounding' : 'DIFFERENT']);
      }
      extras.push({ kind: 'table', title: `Batched call ${`[${q.shape.join(', ')}]`} vs one call per sequence`, columns: ['sequence', 'output shape (alone)', 'max |batched − alone|', 'verdict'], rows });
      const first = { scores: slice0(whole.scores, 0), scaledScores: slice0(whole.scaledScores, 0), maskedScores: slice0(whole.maskedScores, 0), weights: slice0(whole.weights, 0), output: slice0(whole.output, 0) } as AttentionStages;
      inputStage('inputs', 'Inputs: Q, K, V of sequence 1 (of 3)', 'Q, K, V \\in \\mathbb{R}^{B \\times L \\times E},\\; B = 3', [
        ['Q[0]', slice0(q, 0), qLabels(4), 'query', 'd'],
        ['K[0]', slice0(k, 0), kLabels(4), 'key', 'd'],
        ['V[0]', slice0(v, 0), kLabels(4), 'key', 'v'],
      ]);
      stages.push(...attentionStages(first, { qLabels: qLabels(4), kLabels: kLabels(4), vDims: v.shape[2], scale: 1 / Math.sqrt(q.shape[2]), dk: q.shape[2], maskLabel: 'none', maskTex: 'M = 0', v: slice0(v, 0) }));
      Object.assign(values, { weights: first.weights, output: first.output });
      notes.push(`The stepper shows sequence 1 of the batch; the batched output has shape [${whole.output.shape.join(', ')}].`);
      pytorch = pytorchAttention(q, k, v, { title: `${ex.id}: ${ex.title}` });
      break;
    }
    case 'scores': {
      const q = toTensor(inp.q!, attn), k = toTensor(inp.k!, attn);
      const s = attn.matmul(q, transpose(k));
      values.scores = s;
      inputStage('inputs', 'Inputs: Q and K', 'Q, K', [
        ['Q', q, qLabels(q.shape[0]), 'query', 'd'],
        ['K', k, kLabels(k.shape[0]), 'key', 'd'],
      ]);
      stages.push({ id: 'scores', title: 'QKᵀ — dot product of every query with every key', tex: 'S = QK^{\\top},\\quad S_{ij} = q_i \\cdot k_j', views: [{ name: 'QKᵀ', tensor: s, rowLabels: qLabels(q.shape[0]), colLabels: kLabels(k.shape[0]), rowAxis: 'query', colAxis: 'key', kind: 'signed' }] });
      pytorch = ['# ' + ex.id, 'import torch', `Q = torch.tensor(${pyList(q)})`, `K = torch.tensor(${pyList(k)})`, 'print(Q @ K.T)'].join('\n');
      break;
    }
    case 'weights-values': {
      const w = toTensor(inp.weights!, attn), v = toTensor(inp.v!, attn);
      const out = attn.matmul(w, v);
      Object.assign(values, { weights: w, output: out });
      stages.push({ id: 'weights', title: 'Attention weights (given by the text)', tex: 'A \\;(\\text{given})', views: [{ name: 'A (given)', tensor: w, rowLabels: qLabels(w.shape[0]), colLabels: kLabels(w.shape[1]), rowAxis: 'query', colAxis: 'value', kind: 'weights' }] });
      stages.push({ id: 'output', title: '· V — weighted average of the value rows', tex: 'O = AV', views: [{ name: 'weights A', tensor: w, rowLabels: qLabels(w.shape[0]), colLabels: kLabels(w.shape[1]), rowAxis: 'query', colAxis: 'value', kind: 'weights' }, { name: 'V', tensor: v, rowLabels: kLabels(v.shape[0]), colLabels: dims('v', v.shape[1]), rowAxis: 'value', colAxis: 'value dim', kind: 'signed' }, { name: 'output O', tensor: out, rowLabels: qLabels(w.shape[0]), colLabels: dims('v', v.shape[1]), rowAxis: 'query', colAxis: 'value dim', kind: 'signed' }] });
      pytorch = ['# ' + ex.id, 'import torch', `A = torch.tensor(${pyList(w)})`, `V = torch.tensor(${pyList(v)})`, 'print(A @ V)'].join('\n');
      break;
    }
    case 'softmax':
    case 'softmax-values': {
      // Given scores S [r, n]: run them through the library's attention with K = I (so QKᵀ = S exactly),
      // the given scale (1 unless the text scales), and V = I (weights only) or the text's V.
      const s = toTensor(inp.scores!, attn);
      const n = s.shape[1];
      const v = inp.v ? toTensor(inp.v, attn) : eye(n);
      const scale = inp.scale ?? 1;
      const st = await attn.explain(s, eye(n), v, { scale });
      stages.push(...attentionStages(st, { qLabels: qLabels(s.shape[0]), kLabels: kLabels(n), vDims: v.shape[1], scale, dk: n, maskLabel: 'none', maskTex: 'M = 0', givenScores: true, withOutput: !!inp.v, v }));
      Object.assign(values, { scores: st.scores, scaledScores: st.scaledScores, weights: st.weights, ...(inp.v ? { output: st.output } : {}) });
      const lines = ['# ' + ex.id + ': ' + ex.title, 'import torch', 'torch.set_printoptions(precision=6, sci_mode=False)', `S = torch.tensor(${pyList(s)}, dtype=torch.float64)`];
      lines.push(scale === 1 ? 'A = torch.softmax(S, dim=-1)' : `A = torch.softmax(S * ${+scale.toPrecision(9)}, dim=-1)`, 'print(A)');
      if (inp.v) lines.push(`V = torch.tensor(${pyList(v)}, dtype=torch.float64)`, 'print(A @ V)');
      lines.push('print("max weight:", A.max(-1).values, "entropy:", -(A * A.clamp_min(1e-300).log()).sum(-1))');
      pytorch = lines.join('\n');
      break;
    }
    case 'temperature': {
      const s = toTensor(inp.scores!, attn);
      const ts = inp.temperatures!;
      const rows: number[] = [];
      for (const t of ts) rows.push(...attn.softmax(s, { temperature: t }).data);
      const w: NumTensor = { data: rows, shape: [ts.length, s.shape[1]] };
      values.weights = w;
      stages.push({ id: 'scores', title: 'Scores', tex: 'x = [1, 2, 3]', views: [{ name: 'scores', tensor: s, rowLabels: ['x'], colLabels: kLabels(s.shape[1]), rowAxis: '', colAxis: 'position', kind: 'signed' }] });
      stages.push({ id: 'temperature', title: 'softmax(x / T) for each temperature T', tex: '\\operatorname{softmax}(x/T)_i = \\frac{e^{x_i/T}}{\\sum_j e^{x_j/T}}', views: [{ name: 'softmax(x/T)', tensor: w, rowLabels: ts.map((t) => `T = ${t}`), colLabels: kLabels(s.shape[1]), rowAxis: 'temperature', colAxis: 'position', kind: 'weights' }] });
      const pts: { x: number; y: number; series: string }[] = [];
      const grid = Array.from({ length: 41 }, (_, i) => 10 ** (-2 + i * 0.1));
      for (const t of grid) attn.softmax(s, { temperature: t }).data.forEach((y, j) => pts.push({ x: t, y, series: `weight of ${kLabels(s.shape[1])[j]} (score ${s.data[j]})` }));
      extras.push({ kind: 'lines', title: 'Weights as the temperature goes from 0.01 to 100', xLabel: 'temperature T (log scale)', yLabel: 'weight', xLog: true, points: pts });
      notes.push('T → 0: all weight on the largest score (argmax, one-hot). T → ∞: uniform, 1/3 each.');
      pytorch = ['# ' + ex.id, 'import torch', `x = torch.tensor(${pyList(s)}, dtype=torch.float64)`, `for T in ${JSON.stringify(ts)}:`, '    print(T, torch.softmax(x / T, dim=-1))'].join('\n');
      break;
    }
    case 'score-stats': {
      const samples = opts.samples ?? inp.samples ?? 64;
      const rows: StatsRow[] = [];
      for (const [i, dk] of inp.dks!.entries()) {
        const share = (done: number) => (i + done) / inp.dks!.length;
        const seed = inp.seed ?? 1;
        rows.push(await (opts.scoreStats ? opts.scoreStats({ dk, samples, seed }, (done) => void opts.between?.(share(done))) : scoreStatsFor(attn, dk, samples, seed, opts.between && ((done) => opts.between!(share(done))))));
      }
      values.unscaledStd = { data: rows.map((r) => r.unscaledStd), shape: [rows.length] };
      values.scaledStd = { data: rows.map((r) => r.scaledStd), shape: [rows.length] };
      extras.push(...statsExtras(rows));
      if (rows.length > 1)
        extras.push({
          kind: 'lines',
          title: 'Score std vs d_k: unscaled grows as √d_k, scaled stays at 1',
          xLabel: 'd_k (log scale)',
          yLabel: 'std of scores (log scale)',
          xLog: true,
          yLog: true,
          points: rows.flatMap((r) => [
            { x: r.dk, y: r.unscaledStd, series: 'unscaled q·k' },
            { x: r.dk, y: r.scaledStd, series: 'scaled q·k/√d_k' },
            { x: r.dk, y: Math.sqrt(r.dk), series: 'reference √d_k' },
            { x: r.dk, y: 1, series: 'reference 1' },
          ]),
        });
      notes.push(`${samples} random queries and ${samples} keys per d_k, entries N(0, 1), seed ${inp.seed}; scores and softmax by sdpa-web (${attn.backend}).`);
      pytorch = ['# ' + ex.id, 'import torch', `for d_k in ${JSON.stringify(inp.dks)}:`, `    q = torch.randn(${samples}, d_k); k = torch.randn(${samples}, d_k)`, '    s = q @ k.T', '    print(d_k, "unscaled std", s.std().item(), "scaled std", (s / d_k ** 0.5).std().item(),', '          "max weight unscaled", torch.softmax(s, -1).max(-1).values.mean().item(),', '          "max weight scaled", torch.softmax(s / d_k ** 0.5, -1).max(-1).values.mean().item())'].join('\n');
      break;
    }
    case 'memory': {
      const m = inp.memory!;
      const per = m.n * m.n * m.bytesPerElement;
      const total = per * m.layers * m.heads;
      values.memoryPerMatrixMiB = { data: [per / 2 ** 20], shape: [1] };
      values.memoryTotalMiB = { data: [total / 2 ** 20], shape: [1] };
      extras.push({ kind: 'table', title: 'Memory of the attention weights', columns: ['quantity', 'formula', 'bytes', 'MiB (2²⁰ B)', 'MB (10⁶ B)'], rows: [
        ['one attention matrix', `${m.n}² × ${m.bytesPerElement} B`, per.toLocaleString('en'), (per / 2 ** 20).toFixed(2), (per / 1e6).toFixed(2)],
        [`${m.layers} layers × ${m.heads} heads`, `${m.layers * m.heads} × ${m.n}² × ${m.bytesPerElement} B`, total.toLocaleString('en'), (total / 2 ** 20).toFixed(2), (total / 1e6).toFixed(2)],
      ] });
      notes.push('Arithmetic only (no attention is run); the Cost section below has the full calculator and a live benchmark.');
      pytorch = ['# ' + ex.id, `n, layers, heads = ${m.n}, ${m.layers}, ${m.heads}`, `per = n * n * ${m.bytesPerElement}`, 'print(per, per / 2**20, "MiB;", per * layers * heads / 2**20, "MiB total")'].join('\n');
      break;
    }
    case 'score-functions': {
      const q = toTensor(inp.q!, attn), k = toTensor(inp.k!, attn);
      const f = inp.scoreFunctions!;
      const lq = q.shape[0], lk = k.shape[0];
      const luong = attn.attentionScores(q, k, { kind: 'multiplicative', w: toTensor(f.w, attn) }).scores;
      const bah = attn.attentionScores(q, k, { kind: 'additive', w1: toTensor(f.w1, attn), w2: toTensor(f.w2, attn), v: tensor(f.va, [f.va.length]) }).scores;
      const dot = await attn.explain(q, k, eye(lk));
      const views: MatrixView[] = [];
      const lab = { rowLabels: qLabels(lq), colLabels: kLabels(lk), rowAxis: 'query', colAxis: 'key' };
      const rows: (string | number)[][] = [];
      for (const [name, sc] of [['additive (Bahdanau) vᵀtanh(W₁q + W₂k)', bah], ['multiplicative (Luong) qᵀWk', luong], ['scaled dot product qᵀk/√d_k', dot.scaledScores]] as [string, NumTensor][]) {
        const w = attn.softmax(tensor(sc.data, sc.shape));
        views.push({ name: `${name.split(' ')[0]} scores`, tensor: sc, ...lab, kind: 'signed' });
        views.push({ name: `${name.split(' ')[0]} weights`, tensor: w, ...lab, kind: 'weights' });
        rowsOf(w).forEach((r, i) => rows.push([name, lab.rowLabels[i], r.map((x) => x.toFixed(3)).join(', '), maxOf(r).toFixed(3), entropy(r).toFixed(3)]));
      }
      stages.push({ id: 'scores', title: 'Three score functions on the same queries and keys, and their softmax', tex: '\\text{additive: } v^{\\top}\\tanh(W_1 q + W_2 k) \\quad \\text{multiplicative: } q^{\\top} W k \\quad \\text{scaled dot: } \\frac{q^{\\top}k}{\\sqrt{d_k}}', views });
      extras.push({ kind: 'table', title: 'Weights per score function', columns: ['score function', 'query', 'weights', 'max', 'entropy'], rows });
      values.weights = dot.weights;
      notes.push('All three score functions are sdpa-web’s attentionScores (additive, multiplicative) and explain (scaled dot product); every softmax is sdpa-web’s.');
      pytorch = ['# ' + ex.id, 'import torch', `Q = torch.tensor(${pyList(q)}); K = torch.tensor(${pyList(k)})`, `W = torch.tensor(${pyList(toTensor(f.w, attn))})`, `W1 = torch.tensor(${pyList(toTensor(f.w1, attn))}); W2 = torch.tensor(${pyList(toTensor(f.w2, attn))}); v = torch.tensor(${JSON.stringify(f.va)})`, 'additive = torch.tanh((Q @ W1.T)[:, None, :] + (K @ W2.T)[None, :, :]) @ v', 'multiplicative = Q @ W @ K.T', 'dot = Q @ K.T / Q.shape[-1] ** 0.5', 'for s in (additive, multiplicative, dot): print(torch.softmax(s, -1))'].join('\n');
      break;
    }
    case 'gradients': {
      const q = toTensor(inp.q!, attn), k = toTensor(inp.k!, attn), v = toTensor(inp.v!, attn), dO = toTensor(inp.dOutput!, attn);
      inputStage('inputs', 'Inputs: Q, K, V and the upstream gradient ∂L/∂O', 'Q, K, V, \\; \\partial L/\\partial O', [
        ['Q', q, qLabels(q.shape[0]), 'query', 'd'],
        ['K', k, kLabels(k.shape[0]), 'key', 'd'],
        ['V', v, kLabels(k.shape[0]), 'key', 'v'],
        ['∂L/∂O', dO, qLabels(q.shape[0]), 'query', 'v'],
      ]);
      const st = await runAttention(q, k, v, undefined);
      const lq = st.weights.shape[0], lk = st.weights.shape[1];
      // ∂L/∂A = ∂L/∂O·Vᵀ is shown for teaching; the gradients themselves are sdpa-web's backward pass.
      const dA = attn.matmul(dO, transpose(v));
      const { dQuery: dQ, dKey: dK, dValue: dV } = await attn.scaledDotProductAttentionBackward(q, k, v, dO);
      const lab = (t: NumTensor, rl: string[], cp: string, name: string): MatrixView => ({ name, tensor: t, rowLabels: rl, colLabels: dims(cp, t.shape[1]), rowAxis: '', colAxis: '', kind: 'signed' });
      stages.push({ id: 'output', title: 'Backward pass', tex: '\\frac{\\partial L}{\\partial V} = A^{\\top}\\frac{\\partial L}{\\partial O},\\; \\frac{\\partial L}{\\partial A} = \\frac{\\partial L}{\\partial O}V^{\\top},\\; \\frac{\\partial s_i}{\\partial x_j} = s_i(\\delta_{ij} - s_j),\\; \\frac{\\partial L}{\\partial Q} = \\frac{\\partial L}{\\partial S}\\frac{K}{\\sqrt{d_k}},\\; \\frac{\\partial L}{\\partial K} = \\Big(\\frac{\\partial L}{\\partial S}\\Big)^{\\!\\top}\\frac{Q}{\\sqrt{d_k}}', views: [
        lab(dV, kLabels(lk), 'v', '∂L/∂V'), lab(dA, qLabels(lq), 'k', '∂L/∂A'), lab(dQ, qLabels(lq), 'd', '∂L/∂Q'), lab(dK, kLabels(lk), 'd', '∂L/∂K'),
      ] });
      // Finite-difference check with the library's float64 reference forward pass.
      const L = (qq: Tensor, kk: Tensor, vv: Tensor) => {
        const o = attn.referenceAttention(qq, kk, vv).output;
        let s = 0;
        for (let i = 0; i < o.data.length; i++) s += o.data[i] * dO.data[i];
        return s;
      };
      // h = 2⁻¹⁰ is exact in float32 for these inputs, and the quotient divides by the step actually
      // taken (float32 inputs): the finite difference is then accurate to O(h²) ≈ 1e−7, below the digits shown.
      const h = 2 ** -10;
      const fd = (t: Tensor, which: 0 | 1 | 2) => Array.from(t.data, (_, i) => {
        const plus = tensor(t.data, t.shape), minus = tensor(t.data, t.shape);
        plus.data[i] += h; minus.data[i] -= h;
        const args = (x: Tensor): [Tensor, Tensor, Tensor] => (which === 0 ? [x, k, v] : which === 1 ? [q, x, v] : [q, k, x]);
        return (L(...args(plus)) - L(...args(minus))) / (plus.data[i] - minus.data[i]);
      });
      // Both sides in float64: the library's float64 reference backward against finite differences of its float64 forward.
      const g64 = attn.referenceAttentionBackward(q, k, v, dO);
      const rows = ([['∂L/∂Q', g64.dQuery, fd(q, 0)], ['∂L/∂K', g64.dKey, fd(k, 1)], ['∂L/∂V', g64.dValue, fd(v, 2)]] as [string, NumTensor, number[]][]).map(([n, an, num]) => {
        const err = Math.max(...num.map((x, i) => Math.abs(x - an.data[i])));
        return [n, Array.from(an.data, (x) => fmt(x, 4)).join(', '), num.map((x) => fmt(x, 4)).join(', '), err.toExponential(1)];
      });
      extras.push({ kind: 'table', title: 'Analytic gradients (float64 reference backward) vs central finite differences (h = 2⁻¹⁰) of the float64 reference forward', columns: ['gradient', 'analytic, float64', 'finite difference, float64', 'max |difference|'], rows });
      notes.push('The stage shows sdpa-web’s float32 backward pass (scaledDotProductAttentionBackward); the table checks its float64 referenceAttentionBackward against finite differences of its float64 referenceAttention.');
      break;
    }
  }

  // Derived per-row statistics for the printed max weight / entropy.
  if (values.weights) {
    values.maxWeight = rowStats(values.weights, maxOf);
    values.entropy = rowStats(values.weights, entropy);
  }

  const comparisons: Comparison[] = [];
  for (const p of ex.printed) {
    const t = values[p.target];
    if (!t) throw new Error(`${ex.id}: nothing computed for printed ${p.target}`);
    const c = compare(p, pick(t, p.rows));
    const cols = t.shape.length > 1 ? t.shape[t.shape.length - 1] : c.computed.length;
    comparisons.push({ ...c, cols, why: c.status === 'slip' ? await explainSlip(attn, ex, p, cols) : undefined });
  }
  return { example: ex, backend: attn.backend, stages, values, comparisons, extras, notes, pytorch };
}

/**
 * Tell where a slip comes from: recompute the printed step from the text's OWN printed previous step
 * (with the library). If that agrees with the printed value, the difference was inherited; if not,
 * the slip is in this step.
 */
async function explainSlip(attn: Attention, ex: WorkedExample, p: PrintedValue, cols: number): Promise<string | undefined> {
  const printed = (t: Target) => ex.printed.find((x) => x.target === t && !x.rows);
  const asT = (pv: PrintedValue, shape: number[]) => tensor(pv.values, shape);
  const inp = ex.inputs;
  let from: NumTensor | undefined;
  let desc = '';
  const shapeOf = (pv: PrintedValue, cols: number) => [pv.values.length / cols, cols];
  if (p.target === 'Q' || p.target === 'K' || p.target === 'V') {
    return `The inputs X and W are the text’s own, so the slip is in this step (X·W_${p.target}).`;
  } else if (p.target === 'scores') {
    const pq = printed('Q'), pk = printed('K');
    if (pq && pk) {
      const e = (toTensor(inp.wq!, attn).shape[1]);
      from = attn.matmul(asT(pq, shapeOf(pq, e)), transpose(asT(pk, shapeOf(pk, e))));
      desc = 'the text’s printed Q and K';
    }
  } else if (p.target === 'scaledScores') {
    const ps = printed('scores');
    if (ps && inp.x) {
      const dk = toTensor(inp.wq!, attn).shape[1];
      // With K = I, QKᵀ is the printed scores exactly; the library applies the ÷√d_k.
      from = (await attn.explain(asT(ps, shapeOf(ps, cols)), eye(cols), eye(cols), { scale: 1 / Math.sqrt(dk) })).scaledScores;
      desc = `the text’s printed QKᵀ ÷ √${dk}`;
    }
  } else if (p.target === 'weights') {
    const pss = printed('scaledScores');
    if (pss && !p.rows) {
      from = attn.softmax(asT(pss, shapeOf(pss, cols)));
      desc = 'the softmax of the text’s printed scaled scores';
    } else if (inp.scores && inp.scale === undefined) {
      return 'The scores are the text’s own, so the printed weights are not their softmax: an arithmetic slip or an illustrative number.';
    }
  } else if (p.target === 'output') {
    const pw = printed('weights');
    const pv = printed('V');
    if (pw) {
      const v = pv ? asT(pv, shapeOf(pv, cols)) : toTensor(inp.v!, attn);
      const all = attn.matmul(asT(pw, shapeOf(pw, v.shape[0])), v);
      from = p.rows ? { data: pick(all, p.rows), shape: [p.rows.length, v.shape[1]] } : all;
      desc = pv ? 'the text’s printed A times its printed V' : 'the text’s printed weights times V';
    }
  } else if (p.target === 'maxWeight' || p.target === 'entropy') {
    return undefined;
  }
  if (!from) return undefined;
  const again = compare({ ...p, decimals: Array.isArray(p.decimals) ? p.decimals.map((d) => d - 1) : p.decimals - 1 }, Array.from(from.data));
  const shown = Array.from(from.data, (x) => x.toFixed(Array.isArray(p.decimals) ? p.decimals[0] : p.decimals)).join(', ');
  return again.status === 'ok'
    ? `Follows from ${desc} (${shown}): the difference is inherited from an earlier slip, not made in this step.`
    : `Does not follow from ${desc} either (that gives ${shown}): a slip in this step.`;
}

