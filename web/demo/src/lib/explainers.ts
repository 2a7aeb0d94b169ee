// The explainers' computations (variance, gradients, precision), DOM-free so the browser tests run
// them in Node too. Every score, weight, output and gradient comes from sdpa-web; the page computes
// only display statistics (variances, maxima) and, for the softmax Jacobian, the formula it explains.
import type { Attention, AttentionOptions, Float16Tensor, Tensor } from 'sdpa-web';
import { float16Excess, fromFloat16, maxAbsDiff, toFloat16, toleranceBound } from 'sdpa-web';
import { randn } from './compute';
import { entropy, maxOf, rowsOf, stdOf, tensor, type NumTensor } from './tensors';

// ── Variance lab ──

/** d_k values of the variance lab's slider: 1, 2, 4, … 1024. */
export const VARIANCE_DKS = Array.from({ length: 11 }, (_, i) => 2 ** i);
/** Queries and keys drawn per d_k (128 × 128 = 16,384 dot products). */
export const VARIANCE_SAMPLES = 128;
/** Keys the showcased query attends over. */
export const VARIANCE_KEYS = 12;
const VARIANCE_SEED = 11;

export interface VariancePoint {
  dk: number;
  /** Sample variance of the library's scores q·k, and of its scaled scores q·k/√d_k. */
  varUnscaled: number;
  varScaled: number;
  /** One query's weights over the first VARIANCE_KEYS keys: softmax of q·k, and the library's weights (÷√d_k). */
  weightsUnscaled: number[];
  weightsScaled: number[];
}

export async function varianceAt(attn: Attention, dk: number): Promise<VariancePoint> {
  const n = VARIANCE_SAMPLES;
  const q = randn(attn, [n, dk], VARIANCE_SEED * 7919 + dk);
  const k = randn(attn, [n, dk], VARIANCE_SEED * 104729 + dk);
  const st = await attn.explain(q, k, tensor(new Float32Array(n), [n, 1]));
  // The showcased row: query 1 over the first keys, as one attention call of the library.
  const one = await attn.explain({ data: q.data.subarray(0, dk), shape: [1, dk] }, { data: k.data.subarray(0, VARIANCE_KEYS * dk), shape: [VARIANCE_KEYS, dk] }, tensor(new Float32Array(VARIANCE_KEYS), [VARIANCE_KEYS, 1]));
  return {
    dk,
    varUnscaled: stdOf(st.scores.data) ** 2,
    varScaled: stdOf(st.scaledScores.data) ** 2,
    weightsUnscaled: Array.from(attn.softmax(one.scores).data),
    weightsScaled: Array.from(one.weights.data),
  };
}

export const rowSummary = (w: number[]) => ({ max: maxOf(w), entropy: entropy(w) });

// ── Gradient view ──

/** The gradient view's inputs: seeded Q [3 × 4], K [5 × 4], V [5 × 3] and the upstream gradient ∂L/∂O. */
export function gradientInputs(attn: Attention): { q: Tensor; k: Tensor; v: Tensor; dO: Tensor } {
  return { q: randn(attn, [3, 4], 301), k: randn(attn, [5, 4], 302), v: randn(attn, [5, 3], 303), dO: randn(attn, [3, 3], 304) };
}

export interface GradientView {
  /** Row i of the float64 weights A (the library's referenceAttention). */
  weights: number[];
  /** The softmax Jacobian of row i: J_jl = a_j(δ_jl − a_l). */
  jacobian: NumTensor;
  /** ∂L/∂A row i = ∂L/∂O_i · Vᵀ, ∂L/∂S row i = J·∂L/∂A_i, and ∂L/∂Q row i = scale·∂L/∂S_i·K (float64). */
  dA: number[];
  dS: number[];
  dQrowChain: number[];
  /** The library's gradients: float32 backward and float64 reference backward. */
  library: { dQuery: NumTensor; dKey: NumTensor; dValue: NumTensor };
  reference64: { dQuery: NumTensor; dKey: NumTensor; dValue: NumTensor };
  /** Central finite differences (h = 2⁻¹⁰) of L = Σ O·∂L/∂O, the library's float64 forward. */
  finite: { dQuery: number[]; dKey: number[]; dValue: number[] };
}

export async function gradientView(attn: Attention, row: number): Promise<GradientView> {
  const { q, k, v, dO } = gradientInputs(attn);
  const e = q.shape[1], lk = k.shape[0], ev = v.shape[1];
  const scale = 1 / Math.sqrt(e);
  const ref = attn.referenceAttention(q, k, v);
  const a = Array.from(ref.weights.data.subarray(row * lk, (row + 1) * lk));
  const jac = Array.from({ length: lk * lk }, (_, idx) => {
    const j = Math.floor(idx / lk), l = idx % lk;
    return a[j] * ((j === l ? 1 : 0) - a[l]);
  });
  const dA = Array.from({ length: lk }, (_, j) => {
    let s = 0;
    for (let c = 0; c < ev; c++) s += dO.data[row * ev + c] * v.data[j * ev + c];
    return s;
  });
  const dS = Array.from({ length: lk }, (_, j) => dA.reduce((s, x, l) => s + jac[j * lk + l] * x, 0));
  const dQrowChain = Array.from({ length: e }, (_, c) => scale * dS.reduce((s, x, j) => s + x * k.data[j * e + c], 0));
  const L = (qq: Tensor, kk: Tensor, vv: Tensor) => {
    const o = attn.referenceAttention(qq, kk, vv).output.data;
    let s = 0;
    for (let i = 0; i < o.length; i++) s += o[i] * dO.data[i];
    return s;
  };
  const h = 2 ** -10;
  const fd = (t: Tensor, which: 0 | 1 | 2) =>
    Array.from(t.data, (_, i) => {
      const plus = tensor(t.data, t.shape), minus = tensor(t.data, t.shape);
      plus.data[i] += h;
      minus.data[i] -= h;
      const args = (x: Tensor): [Tensor, Tensor, Tensor] => (which === 0 ? [x, k, v] : which === 1 ? [q, x, v] : [q, k, x]);
      return (L(...args(plus)) - L(...args(minus))) / (plus.data[i] - minus.data[i]);
    });
  return {
    weights: a,
    jacobian: { data: jac, shape: [lk, lk] },
    dA,
    dS,
    dQrowChain,
    library: await attn.scaledDotProductAttentionBackward(q, k, v, dO),
    reference64: attn.referenceAttentionBackward(q, k, v, dO),
    finite: { dQuery: fd(q, 0), dKey: fd(k, 1), dValue: fd(v, 2) },
  };
}

// ── Precision lab ──

export interface PrecisionInputs {
  q: Tensor;
  k: Tensor;
  v: Tensor;
  options: AttentionOptions;
}

/** Seeded Q, K, V [L × 64] with N(0, 1) entries; `logitScale` multiplies the scores (the call's scale). */
export function precisionInputs(attn: Attention, length: number, logitScale: number): PrecisionInputs {
  const e = 64;
  return { q: randn(attn, [length, e], 501 + length), k: randn(attn, [length, e], 502 + length), v: randn(attn, [length, e], 503 + length), options: { scale: logitScale / Math.sqrt(e) } };
}

export interface PrecisionResult {
  /** max |o − o64| of this backend's output against the float64 reference. */
  error: number;
  /** Where it sits: query row and value column. */
  at: [number, number];
  /** The accuracy rule's bound for this backend: factor·e_ref + 1e-5·max(1, |V|max). */
  bound: number;
  factor: number;
}

/** The largest |o − o64| and where it is (row, column of the output [L × Ev]). */
export function worstError(o: ArrayLike<number>, o64: ArrayLike<number>, ev: number): { error: number; at: [number, number] } {
  const error = maxAbsDiff(o, o64);
  let at = 0;
  for (let i = 0; i < o.length; i++) if (Math.abs(o[i] - o64[i]) === error) {
    at = i;
    break;
  }
  return { error, at: [Math.floor(at / ev), at % ev] };
}

/** One backend's output against the float64 reference, beside the tests' rule (`eRef`: the scalar backend's error). */
export function precisionOf(output: ArrayLike<number>, o64: ArrayLike<number>, inputs: PrecisionInputs, eRef: number, gpu: boolean): PrecisionResult {
  const { error, at } = worstError(output, o64, inputs.v.shape[1]);
  const factor = gpu ? 4 : 2;
  return { error, at, factor, bound: toleranceBound(eRef, factor, inputs.v.data) };
}

/** What storing Q, K, V and the output in float16 costs, and what the kernel itself adds. */
export interface Float16Precision {
  /** max |o16 − o64|: the float16 output against the float64 reference of the float32 inputs. */
  storage: number;
  /** The kernel's own error on the rounded inputs, less the output's rounding (float16Excess). */
  excess: number;
  /** The float16 rule's bound: 2·e_ref + 1e-5·max(1, |V|max), e_ref the scalar backend's on the rounded inputs. */
  bound: number;
}

/**
 * `attn` (a CPU instance) on `inputs` rounded to float16, its output float16, against the float64
 * reference of the original inputs and of the rounded ones; `scalar` gives e_ref.
 */
export function float16Precision(attn: Attention, scalar: Attention, inputs: PrecisionInputs): Float16Precision {
  const half = (t: Tensor): Float16Tensor => ({ data: toFloat16(t.data), shape: t.shape, dtype: 'float16' });
  const [q, k, v] = [half(inputs.q), half(inputs.k), half(inputs.v)];
  const output = fromFloat16(attn.scaledDotProductAttentionSync(q, k, v, inputs.options).output.data as Uint16Array);
  const o64 = scalar.referenceAttention(inputs.q, inputs.k, inputs.v, inputs.options).output.data;
  const rounded64 = scalar.referenceAttention(q, k, v, inputs.options).output.data;
  const plain = scalar.scaledDotProductAttentionSync(q, k, v, { ...inputs.options, outputDtype: 'float32' }).output.data;
  const vRounded = fromFloat16(v.data as Uint16Array);
  return { storage: maxAbsDiff(output, o64), excess: float16Excess(output, rounded64), bound: toleranceBound(maxAbsDiff(plain, rounded64), 2, vRounded) };
}

// ── Online softmax ──

/** The online-softmax explainer's inputs: 32 query rows (one block of the SIMD kernel: a plain call runs the same kernel), E = 16, Ev = 4, 64 … 512 keys. */
export const ONLINE_ROWS = 32;
export const ONLINE_KEY_COUNTS = [64, 128, 192, 256, 320, 384, 448, 512];
const ONLINE_E = 16;
const ONLINE_EV = 4;

/** One key tile as the kernel leaves it: the running max m, denominator ℓ and accumulator a after it. */
export interface OnlineStep {
  firstKey: number;
  lastKey: number;
  max: number;
  sum: number;
  /** e^(m_before − m_after): how much this tile shrank what came before (1: the max held). */
  rescale: number;
  accumulator: number[];
  /** a/ℓ: the output this row would have if the keys stopped here. */
  partial: number[];
}

export interface OnlineTrace {
  tileKeys: number;
  steps: OnlineStep[];
  /** The traced row of the same kernel run's output, and of a plain call (the same kernel), and the float64 reference's. */
  output: number[];
  callOutput: number[];
  reference: number[];
  /** The traced row's weights (float64 reference): what a non-fused kernel would store, Lk floats per row. */
  weights: number[];
}

/**
 * Seeded Q [32 × 16], K [keys × 16], V [keys × 4]; `spike` ≥ 0 plants a key that matches query
 * `row` strongly (k_spike = 3·q_row), so the running max jumps in that key's tile.
 */
export function onlineInputs(attn: Attention, keys: number, row: number, spike: number): { q: Tensor; k: Tensor; v: Tensor } {
  const q = randn(attn, [ONLINE_ROWS, ONLINE_E], 701);
  const k = randn(attn, [keys, ONLINE_E], 702 + keys);
  const v = randn(attn, [keys, ONLINE_EV], 703 + keys);
  if (spike >= 0 && spike < keys) for (let e = 0; e < ONLINE_E; e++) k.data[spike * ONLINE_E + e] = 3 * q.data[row * ONLINE_E + e];
  return { q, k, v };
}

type KernelStep = { firstKey: number; max: number; sum: number; accumulator: Float32Array };

/** A kernel's steps with the rescale factor and the output so far. */
function onlineSteps(steps: KernelStep[], tileKeys: number, keys: number): OnlineStep[] {
  let before = Number.NaN;
  return steps.map((s) => {
    const rescale = Number.isNaN(before) ? 1 : Math.exp(before - s.max);
    before = s.max;
    const accumulator = Array.from(s.accumulator);
    return { firstKey: s.firstKey, lastKey: Math.min(keys, s.firstKey + tileKeys) - 1, max: s.max, sum: s.sum, rescale, accumulator, partial: accumulator.map((a) => a / s.sum) };
  });
}

/** The same row traced from the WebGPU flash kernel (a 'webgpu' instance): its own tile size and kernel. */
export async function webgpuOnlineTrace(gpuAttn: Attention, keys: number, row: number, spike: number): Promise<{ tileKeys: number; kernel: string; steps: OnlineStep[]; output: number[] }> {
  const { q, k, v } = onlineInputs(gpuAttn, keys, row, spike);
  const trace = await gpuAttn.traceWebGpuOnlineSoftmax(q, k, v, { row });
  return { tileKeys: trace.tileKeys, kernel: trace.kernel, steps: onlineSteps(trace.steps, trace.tileKeys, keys), output: Array.from(trace.output.data.subarray(row * ONLINE_EV, (row + 1) * ONLINE_EV)) };
}

/** The SIMD kernel's trace of one query row (attn.traceOnlineSoftmax), beside the call's output and the float64 reference. */
export async function onlineTrace(attn: Attention, keys: number, row: number, spike: number): Promise<OnlineTrace> {
  const { q, k, v } = onlineInputs(attn, keys, row, spike);
  const trace = attn.traceOnlineSoftmax(q, k, v, { row });
  const call = await attn.scaledDotProductAttention(q, k, v);
  const ref = attn.referenceAttention(q, k, v);
  const rowOf = (data: ArrayLike<number>, width: number) => Array.from({ length: width }, (_, c) => Number(data[row * width + c]));
  return {
    tileKeys: trace.tileKeys,
    steps: onlineSteps(trace.steps, trace.tileKeys, keys),
    output: rowOf(trace.output.data, ONLINE_EV),
    callOutput: rowOf(call.output.data, ONLINE_EV),
    reference: rowOf(ref.output.data, ONLINE_EV),
    weights: rowOf(ref.weights.data, keys),
  };
}
