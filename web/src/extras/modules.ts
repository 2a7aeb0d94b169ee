// Attention modules composed from the core's building blocks (matmul, attention, dropout, Xavier
// init): single-head self-attention with learned projections, and multi-head attention with
// PyTorch nn.MultiheadAttention numerics (and its shape names: L query length, S key length, E
// embedDim). They compute through an Attention engine; shapes and configurations are validated
// by the C++ core's module checks, and this file checks only JS types.
import { createAttention, type Attention } from '../attention.js';
import type { SdpaModule } from '../wasm/sdpa_core.mjs';
import {
  checkBoolean,
  checkNumber,
  checkOptionNames,
  checkTensor,
  describe,
  MULTIHEAD_FORWARD_OWN_OPTIONS,
  MULTIHEAD_OPTION_NAMES,
  MULTIHEAD_WEIGHT_NAMES,
  SELF_ATTENTION_BACKWARD_OWN_OPTIONS,
  SELF_ATTENTION_FORWARD_OWN_OPTIONS,
  SELF_ATTENTION_OPTION_NAMES,
  SELF_ATTENTION_WEIGHT_NAMES,
  throwIfError,
  variantOptionNames,
  variantOptions,
} from '../arguments.js';
import { checkDropout } from './prng.js';
import type {
  DropoutOptions,
  ModuleOutput,
  MultiheadAttentionOptions,
  MultiheadAttentionWeights,
  MultiheadForwardOptions,
  SelfAttentionBackwardOptions,
  SelfAttentionForwardOptions,
  SelfAttentionGradients,
  SelfAttentionOptions,
} from './types.js';
import type { MaskTensor, Tensor } from '../types.js';

/**
 * The core's checks of the modules' configurations and inputs, and the names of the attention
 * options they pass through: functions of the wasm module, the same in every build.
 */
type ModuleChecks = Pick<
  SdpaModule,
  'planSelfAttention' | 'checkSelfAttentionInput' | 'checkSelfAttentionWeights' | 'planMultihead' | 'checkMultiheadInputs' | 'optionNames'
>;

function checkNumberOption(name: string, value: unknown, fallback: number): number {
  return value === undefined ? fallback : checkNumber(name, value);
}

function checkObject(name: string, value: unknown): asserts value is object {
  if (typeof value !== 'object' || value === null) throw new TypeError(`${name} must be an object; got ${describe(value)}`);
}

/** `checkObject`, then every key of `value` one of `known` (see checkOptionNames). */
function checkOptionsObject(name: string, value: unknown, where: string, known: readonly string[]): void {
  checkObject(name, value);
  checkOptionNames(where, value, known);
}

/** [r, c] -> [c, r] */
function transpose2(t: Tensor): Tensor {
  const [r, c] = t.shape as [number, number];
  const out = new Float32Array(r * c);
  for (let i = 0; i < r; i++) for (let j = 0; j < c; j++) out[j * r + i] = t.data[i * c + j]!;
  return { data: out, shape: [c, r] };
}

/** Swaps axes 0 and 1 of a rank-3 tensor: [a, b, c] -> [b, a, c] ([L, B, E] <-> [B, L, E]). */
function swap01(t: Tensor): Tensor {
  const [a, b, c] = t.shape as [number, number, number];
  const out = new Float32Array(a * b * c);
  for (let i = 0; i < a; i++) {
    for (let j = 0; j < b; j++) out.set(t.data.subarray((i * b + j) * c, (i * b + j + 1) * c), (j * a + i) * c);
  }
  return { data: out, shape: [b, a, c] };
}

/** [B, L, H·d] -> [B, H, L, d] */
function splitHeads(t: Tensor, heads: number): Tensor {
  const [B, L, HD] = t.shape as [number, number, number];
  const d = HD / heads;
  const out = new Float32Array(t.data.length);
  for (let b = 0; b < B; b++) {
    for (let l = 0; l < L; l++) {
      for (let h = 0; h < heads; h++) {
        out.set(t.data.subarray(((b * L + l) * heads + h) * d, ((b * L + l) * heads + h + 1) * d), ((b * heads + h) * L + l) * d);
      }
    }
  }
  return { data: out, shape: [B, heads, L, d] };
}

/** [B, H, L, d] -> [B, L, H·d] */
function mergeHeads(t: Tensor): Tensor {
  const [B, H, L, d] = t.shape as [number, number, number, number];
  const out = new Float32Array(t.data.length);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < H; h++) {
      for (let l = 0; l < L; l++) {
        out.set(t.data.subarray(((b * H + h) * L + l) * d, ((b * H + h) * L + l + 1) * d), ((b * L + l) * H + h) * d);
      }
    }
  }
  return { data: out, shape: [B, L, H * d] };
}

/** [B, Hkv, S, d] -> [B, Hkv·group, S, d] (each key/value head repeated for its query heads). */
function repeatHeads(t: Tensor, group: number): Tensor {
  if (group === 1) return t;
  const [B, Hkv, S, d] = t.shape as [number, number, number, number];
  const block = S * d;
  const out = new Float32Array(t.data.length * group);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < Hkv; h++) {
      const src = t.data.subarray((b * Hkv + h) * block, (b * Hkv + h + 1) * block);
      for (let g = 0; g < group; g++) out.set(src, ((b * Hkv + h) * group + g) * block);
    }
  }
  return { data: out, shape: [B, Hkv * group, S, d] };
}

function addBias(t: Tensor, bias: Float32Array | undefined): Tensor {
  if (!bias) return t;
  const n = bias.length;
  for (let i = 0; i < t.data.length; i++) t.data[i]! += bias[i % n]!;
  return t;
}

function checkDropoutOption(dropout: unknown, where: string): DropoutOptions | undefined {
  return dropout === undefined || dropout === null ? undefined : checkDropout(dropout, `${where} options.dropout`);
}

/**
 * Single-head self-attention with learned projections:
 * Q = X·W_Q, K = X·W_K, V = X·W_V, output = softmax(Q·Kᵀ/√dK)·V. Create with
 * {@link createSelfAttention}.
 */
export class SelfAttention {
  /** `[dModel, dK]`. */
  readonly wQ: Tensor;
  /** `[dModel, dK]`. */
  readonly wK: Tensor;
  /** `[dModel, dV]`. */
  readonly wV: Tensor;

  /** @internal */
  constructor(
    private readonly attention: Attention,
    private readonly checks: ModuleChecks,
    private readonly ownsAttention: boolean,
    readonly dModel: number,
    readonly dK: number,
    readonly dV: number,
    readonly seed: number,
    given?: { wQ: Tensor; wK: Tensor; wV: Tensor },
  ) {
    const copy = (t: Tensor): Tensor => ({ data: t.data.slice(), shape: [...t.shape] });
    // One mulberry32 stream: W_Q is draws [0, dModel·dK), W_K the next dModel·dK, then W_V.
    this.wQ = given ? copy(given.wQ) : attention.xavierUniform([dModel, dK], seed, 0);
    this.wK = given ? copy(given.wK) : attention.xavierUniform([dModel, dK], seed, dModel * dK);
    this.wV = given ? copy(given.wV) : attention.xavierUniform([dModel, dV], seed, 2 * dModel * dK);
  }

  /**
   * x `[L, dModel]` or `[B, L, dModel]` → output `[..., L, dV]` and weights `[..., L, L]`
   * (rows sum to 1; after dropout when `dropout` is given).
   */
  forward(x: Tensor, options: SelfAttentionForwardOptions = {}): Required<ModuleOutput> {
    checkTensor('x', x);
    checkOptionsObject('options', options, 'SelfAttention.forward', [...SELF_ATTENTION_FORWARD_OWN_OPTIONS, ...variantOptionNames(this.checks)]);
    throwIfError(this.checks.checkSelfAttentionInput(x.shape, this.dModel));
    const dropout = checkDropoutOption(options.dropout, 'SelfAttention.forward');
    const q = this.attention.matmul(x, this.wQ);
    const k = this.attention.matmul(x, this.wK);
    const v = this.attention.matmul(x, this.wV);
    const { output, weights } = this.attention.scaledDotProductAttentionSync(q, k, v, {
      ...variantOptions(this.checks, options),
      attnMask: options.attnMask ?? null,
      isCausal: options.isCausal ?? false,
      returnWeights: true,
    });
    if (!dropout) return { output, weights: weights! };
    const dropped = this.attention.dropout(weights!, dropout);
    return { output: this.attention.matmul(dropped, v), weights: dropped };
  }

  /**
   * Backward pass of {@link SelfAttention.forward} (without dropout): given dOutput = ∂L/∂output
   * `[..., L, dV]`, returns ∂L/∂x and the projections' gradients ∂L/∂W_Q = xᵀ·dQ, ∂L/∂W_K = xᵀ·dK,
   * ∂L/∂W_V = xᵀ·dV (summed over the batch), with dQ, dK, dV from
   * {@link Attention.scaledDotProductAttentionBackwardSync} and ∂L/∂x = dQ·W_Qᵀ + dK·W_Kᵀ + dV·W_Vᵀ.
   * Pass the forward's `attnMask` / `isCausal`.
   */
  backward(x: Tensor, dOutput: Tensor, options: SelfAttentionBackwardOptions = {}): SelfAttentionGradients {
    checkTensor('x', x);
    checkTensor('dOutput', dOutput);
    checkObject('options', options);
    if ('dropout' in options && (options as SelfAttentionForwardOptions).dropout) {
      throw new TypeError('SelfAttention.backward does not support dropout: run the forward without it');
    }
    // The forward's options object may be passed back as is: its dropout, off (null/undefined), is let through.
    const { dropout: _off, ...backwardOptions } = options as SelfAttentionForwardOptions;
    checkOptionNames('SelfAttention.backward', backwardOptions, [...SELF_ATTENTION_BACKWARD_OWN_OPTIONS, ...variantOptionNames(this.checks)]);
    const a = this.attention;
    throwIfError(this.checks.checkSelfAttentionInput(x.shape, this.dModel));
    const q = a.matmul(x, this.wQ);
    const k = a.matmul(x, this.wK);
    const v = a.matmul(x, this.wV);
    const g = a.scaledDotProductAttentionBackwardSync(q, k, v, dOutput, {
      ...variantOptions(this.checks, options),
      attnMask: options.attnMask ?? null,
      isCausal: options.isCausal ?? false,
    });
    const rows = x.data.length / this.dModel;
    const xt = transpose2({ data: x.data, shape: [rows, this.dModel] });
    const flat = (t: Tensor, cols: number): Tensor => ({ data: t.data, shape: [rows, cols] });
    const dX = a.matmul(g.dQuery, transpose2(this.wQ));
    const fromK = a.matmul(g.dKey, transpose2(this.wK)).data;
    const fromV = a.matmul(g.dValue, transpose2(this.wV)).data;
    for (let i = 0; i < dX.data.length; i++) dX.data[i]! += fromK[i]! + fromV[i]!;
    return {
      dX,
      dWQ: a.matmul(xt, flat(g.dQuery, this.dK)),
      dWK: a.matmul(xt, flat(g.dKey, this.dK)),
      dWV: a.matmul(xt, flat(g.dValue, this.dV)),
    };
  }

  /** Releases the module (and the engine it created). */
  dispose(): void {
    if (this.ownsAttention) this.attention.dispose();
  }
}

/**
 * Creates a {@link SelfAttention} module with W_Q, W_K, W_V initialised by Xavier/Glorot
 * uniform from the seeded mulberry32 PRNG (same seed, same weights, on every platform).
 *
 * @example
 * ```ts
 * const sa = await createSelfAttention({ dModel: 32, dK: 16, seed: 42 });
 * const { output, weights } = sa.forward(x); // x [8, 32] -> output [8, 16], weights [8, 8]
 * ```
 */
export async function createSelfAttention(options: SelfAttentionOptions): Promise<SelfAttention> {
  checkOptionsObject('options', options, 'createSelfAttention', SELF_ATTENTION_OPTION_NAMES);
  const dModel = checkNumberOption('dModel', options.dModel, NaN);
  const dK = checkNumberOption('dK', options.dK, NaN);
  const dV = checkNumberOption('dV', options.dV, dK);
  const seed = checkNumberOption('seed', options.seed, 0);
  const shapes: Record<string, readonly number[]> = {};
  if (options.weights !== undefined) {
    checkOptionsObject('weights', options.weights, 'createSelfAttention options.weights', SELF_ATTENTION_WEIGHT_NAMES);
    for (const [name, t] of Object.entries(options.weights)) {
      checkTensor(`weights.${name}`, t);
      shapes[name] = (t as Tensor).shape;
    }
  }
  const attention = await createAttention({ backend: options.backend ?? 'auto' });
  const checks: ModuleChecks = attention.module;
  const error = checks.planSelfAttention(dModel, dK, dV, seed) ?? checks.checkSelfAttentionWeights(shapes, dModel, dK, dV);
  if (error) attention.dispose();
  throwIfError(error);
  return new SelfAttention(attention, checks, true, dModel, dK, dV, seed, options.weights);
}

interface ResolvedWeights {
  wQ: Tensor; // [E, E]
  wK: Tensor; // [kv, kdim]
  wV: Tensor; // [kv, vdim]
  wO: Tensor; // [E, E]
  bQ?: Float32Array;
  bK?: Float32Array;
  bV?: Float32Array;
  bO?: Float32Array;
}

function rows(t: Tensor, from: number, to: number): Tensor {
  const cols = t.shape.length === 2 ? t.shape[1]! : 1;
  return { data: t.data.slice(from * cols, to * cols), shape: t.shape.length === 2 ? [to - from, cols] : [to - from] };
}

/**
 * Multi-head attention with PyTorch `nn.MultiheadAttention` numerics (given the same weights),
 * plus grouped-query / multi-query attention (`numKvHeads` < `numHeads`). Create with
 * {@link createMultiheadAttention}.
 *
 * Mask polarity — differs from {@link Attention.scaledDotProductAttention}:
 * - SDPA's bool `attnMask`: 1 = MAY attend.
 * - Here, as in PyTorch MHA: `keyPaddingMask` 1 = padding, IGNORE this key; bool `attnMask`
 *   1 = NOT allowed to attend. Float masks are added to the scores in both.
 * A query row left with no key gives zeros before the output projection (PyTorch gives NaN).
 */
export class MultiheadAttention {
  readonly embedDim: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly kdim: number;
  readonly vdim: number;
  readonly batchFirst: boolean;
  /** The weights in use (PyTorch layout `[out, in]`; biases absent when `bias` is false). */
  readonly weights: Readonly<ResolvedWeights>;
  private readonly transposed: { wQ: Tensor; wK: Tensor; wV: Tensor; wO: Tensor };

  /** @internal */
  constructor(
    private readonly attention: Attention,
    private readonly checks: ModuleChecks,
    private readonly ownsAttention: boolean,
    config: { embedDim: number; numHeads: number; numKvHeads: number; kdim: number; vdim: number; batchFirst: boolean; bias: boolean; seed: number },
    given: MultiheadAttentionWeights | undefined,
  ) {
    const { embedDim: E, numHeads, numKvHeads, kdim, vdim, bias, seed } = config;
    this.embedDim = E;
    this.numHeads = numHeads;
    this.numKvHeads = numKvHeads;
    this.kdim = kdim;
    this.vdim = vdim;
    this.batchFirst = config.batchFirst;
    this.headDim = E / numHeads;
    const kv = numKvHeads * this.headDim;
    let w: ResolvedWeights;
    if (given) {
      const packed = given.inProjWeight;
      w = packed
        ? { wQ: rows(packed, 0, E), wK: rows(packed, E, 2 * E), wV: rows(packed, 2 * E, 3 * E), wO: given.outProjWeight }
        : { wQ: given.qProjWeight!, wK: given.kProjWeight!, wV: given.vProjWeight!, wO: given.outProjWeight };
      if (bias) {
        const zeros = (n: number) => new Float32Array(n);
        const inBias = given.inProjBias?.data;
        w.bQ = inBias ? inBias.slice(0, E) : (given.qProjBias?.data.slice() ?? zeros(E));
        w.bK = inBias ? inBias.slice(E, 2 * E) : (given.kProjBias?.data.slice() ?? zeros(kv));
        w.bV = inBias ? inBias.slice(2 * E, 3 * E) : (given.vProjBias?.data.slice() ?? zeros(kv));
        w.bO = given.outProjBias?.data.slice() ?? zeros(E);
      }
    } else {
      // One mulberry32 stream: W_Q, then W_K, W_V, W_O (each Xavier uniform, [out, in]).
      let offset = 0;
      const next = (out: number, inp: number) => {
        const t = attention.xavierUniform([out, inp], seed, offset);
        offset += out * inp;
        return t;
      };
      w = { wQ: next(E, E), wK: next(kv, kdim), wV: next(kv, vdim), wO: next(E, E) };
      if (bias) Object.assign(w, { bQ: new Float32Array(E), bK: new Float32Array(kv), bV: new Float32Array(kv), bO: new Float32Array(E) });
    }
    this.weights = w;
    this.transposed = { wQ: transpose2(w.wQ), wK: transpose2(w.wK), wV: transpose2(w.wV), wO: transpose2(w.wO) };
  }

  /**
   * query `[L, B, E]` (`[B, L, E]` with batchFirst, `[L, E]` unbatched), key `[S, B, kdim]`,
   * value `[S, B, vdim]` (same layout) → output in the query's layout with E features, and the
   * weights `[B, L, S]` averaged over heads (`averageAttnWeights: false`: `[B, numHeads, L, S]`;
   * unbatched drops B).
   */
  forward(query: Tensor, key: Tensor, value: Tensor, options: MultiheadForwardOptions = {}): ModuleOutput {
    checkTensor('query', query);
    checkTensor('key', key);
    checkTensor('value', value);
    checkOptionsObject('options', options, 'MultiheadAttention.forward', [...MULTIHEAD_FORWARD_OWN_OPTIONS, ...variantOptionNames(this.checks)]);
    const kpm = options.keyPaddingMask ?? undefined;
    const am = options.attnMask ?? undefined;
    if (kpm) checkTensor('keyPaddingMask', kpm, 'mask');
    if (am) checkTensor('attnMask', am, 'mask');
    const isCausal = checkBoolean('isCausal', options.isCausal);
    const needWeights = options.needWeights === undefined ? true : checkBoolean('needWeights', options.needWeights);
    const average = options.averageAttnWeights === undefined ? true : checkBoolean('averageAttnWeights', options.averageAttnWeights);
    const dropout = checkDropoutOption(options.dropout, 'MultiheadAttention.forward');
    const dims = this.checks.checkMultiheadInputs({
      embedDim: this.embedDim, numHeads: this.numHeads, kdim: this.kdim, vdim: this.vdim, batchFirst: this.batchFirst,
      queryShape: query.shape, keyShape: key.shape, valueShape: value.shape,
      keyPaddingMaskShape: kpm?.shape, attnMaskShape: am?.shape,
    });
    throwIfError(dims.error);
    const { B, L, S, unbatched } = dims;
    const toBLE = (t: Tensor): Tensor =>
      unbatched ? { data: t.data, shape: [1, ...t.shape] } : this.batchFirst ? t : swap01(t);

    const a = this.attention;
    const w = this.weights;
    const q = splitHeads(addBias(a.matmul(toBLE(query), this.transposed.wQ), w.bQ), this.numHeads);
    const k = splitHeads(addBias(a.matmul(toBLE(key), this.transposed.wK), w.bK), this.numKvHeads);
    const v = splitHeads(addBias(a.matmul(toBLE(value), this.transposed.wV), w.bV), this.numKvHeads);

    const mask = combinedMask(B, this.numHeads, L, S, kpm, am, isCausal);
    const gqa = this.numKvHeads !== this.numHeads;
    const wantWeights = needWeights || dropout !== undefined;
    const result = a.scaledDotProductAttentionSync(q, k, v, {
      ...variantOptions(this.checks, options),
      attnMask: mask,
      isCausal: isCausal && !mask ? 'top-left' : false,
      enableGqa: gqa,
      returnWeights: wantWeights,
    });
    let heads = result.output; // [B, H, L, hd]
    let weights = result.weights; // [B, H, L, S]
    if (dropout) {
      weights = a.dropout(weights!, dropout);
      heads = a.matmul(weights, repeatHeads(v, this.numHeads / this.numKvHeads));
    }
    const merged = addBias(a.matmul(mergeHeads(heads), this.transposed.wO), w.bO); // [B, L, E]
    const output: Tensor = unbatched
      ? { data: merged.data, shape: [L, this.embedDim] }
      : this.batchFirst ? merged : swap01(merged);
    if (!needWeights) return { output };
    let out = weights!;
    if (average) {
      const avg = new Float32Array(B * L * S);
      const H = this.numHeads;
      for (let b = 0; b < B; b++) {
        for (let h = 0; h < H; h++) {
          const src = out.data.subarray((b * H + h) * L * S, (b * H + h + 1) * L * S);
          for (let i = 0; i < L * S; i++) avg[b * L * S + i]! += src[i]! / H;
        }
      }
      out = { data: avg, shape: [B, L, S] };
    }
    return { output, weights: unbatched ? { data: out.data, shape: out.shape.slice(1) } : out };
  }

  /** Releases the module (and the engine it created). */
  dispose(): void {
    if (this.ownsAttention) this.attention.dispose();
  }
}

/**
 * SDPA's mask for PyTorch MHA masks: keyPaddingMask [B, S] (bool 1 = ignore, or additive) and
 * attnMask [L, S] / [B·H, L, S] (bool 1 = not allowed, or additive), plus a causal pattern when
 * another mask is present. Returns an SDPA bool mask (1 = may attend) when both are bool, else an
 * additive one, broadcast over the dims no mask uses; null when there is no mask.
 */
function combinedMask(
  B: number, H: number, L: number, S: number,
  kpm: MaskTensor | undefined, am: MaskTensor | undefined, causal: boolean,
): MaskTensor | null {
  if (!kpm && !am) return null;
  const perHead = am !== undefined && am.shape.length === 3;
  const [nb, nh, nl] = [kpm || perHead ? B : 1, perHead ? H : 1, am || causal ? L : 1];
  const additive = kpm?.data instanceof Float32Array || am?.data instanceof Float32Array;
  const n = nb * nh * nl * S;
  const scores = new Float32Array(n); // additive value, -Infinity = hidden
  for (let b = 0; b < nb; b++) {
    for (let h = 0; h < nh; h++) {
      for (let i = 0; i < nl; i++) {
        for (let j = 0; j < S; j++) {
          let x = 0;
          if (kpm) {
            const m = kpm.data[(kpm.shape.length === 1 ? 0 : b * S) + j]!;
            x += kpm.data instanceof Uint8Array ? (m ? -Infinity : 0) : m;
          }
          if (am) {
            const m = am.data[(perHead ? (b * H + h) * L * S : 0) + i * S + j]!;
            x += am.data instanceof Uint8Array ? (m ? -Infinity : 0) : m;
          }
          if (causal && j > i) x = -Infinity;
          scores[((b * nh + h) * nl + i) * S + j] = x;
        }
      }
    }
  }
  const shape = [nb, nh, nl, S];
  if (additive) return { data: scores, shape };
  const bool = new Uint8Array(n);
  for (let i = 0; i < n; i++) bool[i] = scores[i] === -Infinity ? 0 : 1;
  return { data: bool, shape };
}

/**
 * Creates a {@link MultiheadAttention} module. Without `weights`, W_Q, W_K, W_V, W_O are
 * Xavier-uniform from `seed` (mulberry32; biases 0); with a PyTorch state dict's weights, the
 * forward matches `nn.MultiheadAttention` (float32 rounding aside).
 *
 * @example
 * ```ts
 * const mha = await createMultiheadAttention({ embedDim: 64, numHeads: 8, numKvHeads: 2, batchFirst: true, seed: 1 });
 * const { output, weights } = mha.forward(x, x, x, { keyPaddingMask: { data: pad, shape: [B, L] } });
 * ```
 */
export async function createMultiheadAttention(options: MultiheadAttentionOptions): Promise<MultiheadAttention> {
  checkOptionsObject('options', options, 'createMultiheadAttention', MULTIHEAD_OPTION_NAMES);
  const embedDim = checkNumberOption('embedDim', options.embedDim, NaN);
  const numHeads = checkNumberOption('numHeads', options.numHeads, NaN);
  const numKvHeads = checkNumberOption('numKvHeads', options.numKvHeads, numHeads);
  const kdim = checkNumberOption('kdim', options.kdim, embedDim);
  const vdim = checkNumberOption('vdim', options.vdim, embedDim);
  const seed = checkNumberOption('seed', options.seed, 0);
  const bias = options.bias === undefined ? true : checkBoolean('bias', options.bias);
  const batchFirst = checkBoolean('batchFirst', options.batchFirst);
  const weightShapes: Record<string, readonly number[]> = {};
  if (options.weights !== undefined) {
    checkOptionsObject('weights', options.weights, 'createMultiheadAttention options.weights', MULTIHEAD_WEIGHT_NAMES);
    for (const [name, t] of Object.entries(options.weights)) {
      if (t === undefined) continue;
      checkTensor(`weights.${name}`, t);
      weightShapes[name] = (t as Tensor).shape;
    }
  }
  const attention = await createAttention({ backend: options.backend ?? 'auto' });
  const checks: ModuleChecks = attention.module;
  const error = checks.planMultihead({ embedDim, numHeads, numKvHeads, kdim, vdim, seed, bias, weightShapes });
  if (error) attention.dispose();
  throwIfError(error);
  return new MultiheadAttention(attention, checks, true, { embedDim, numHeads, numKvHeads, kdim, vdim, batchFirst, bias, seed }, options.weights);
}

