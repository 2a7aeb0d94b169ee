// Public types of the extras: gradients, PRNG, score functions and the attention modules.
// Shape letters as in types.ts: B batch, H heads (Hq, Hkv), Lq/Lk query/key length, E query/key
// dim, Ev value dim. The score functions allow different query and key dims (Dq, Dk) and have a
// hidden size A; the multi-head module keeps PyTorch nn.MultiheadAttention's names: L target
// (query) length, S source (key) length, E its embedDim.
import type { AttentionOptions, BackendChoice, GpuTensor, MaskTensor, Tensor, Tensor64, VariantOptions } from '../types.js';

/**
 * Options of {@link Attention.scaledDotProductAttentionBackward}: the forward call's options
 * (same mask, causal alignment, scale and GQA setting), plus what the forward returned. The
 * forward's output options (`returnWeights`, `returnLogSumExp`, `out`) are not options here.
 */
export interface BackwardOptions extends Omit<AttentionOptions, 'returnWeights' | 'returnLogSumExp' | 'returnScores' | 'out' | 'outputLocation' | 'outputDtype'> {
  /**
   * Backend `'webgpu'`: `'gpu'` returns `dQuery`, `dKey` and `dValue` in new GPUBuffers you own
   * (`{ buffer, shape }`, float32; `dAttnMask` and `dSinks` stay CPU arrays). CPU backends: `'cpu'` only.
   */
  outputLocation?: 'cpu' | 'gpu' | null;
  /**
   * The forward's `output`, passed together with `logSumExp` (forward with
   * `returnLogSumExp: true`): the SIMD backward then skips recomputing the forward. Both or neither.
   */
  output?: Tensor | null;
  /** The forward's per-row log-sum-exp `[..., Lq]` (see `output`). */
  logSumExp?: Tensor | null;
  /** Also return `dAttnMask`, the gradient w.r.t. an additive (Float32Array) `attnMask`. */
  returnAttnMaskGrad?: boolean;
}

/** Gradients of a scalar loss L w.r.t. the attention inputs, given dOutput = ∂L/∂output. */
export interface AttentionGradients {
  /** ∂L/∂query, the query's shape. */
  dQuery: Tensor;
  /** ∂L/∂key, the key's shape; with GQA, summed over the query heads sharing each key/value head. */
  dKey: Tensor;
  /** ∂L/∂value, the value's shape; summed like `dKey`. */
  dValue: Tensor;
  /**
   * ∂L/∂attnMask in the mask's own shape (summed over the dims where it broadcasts), when
   * `returnAttnMaskGrad` was set. 0 where the mask is −Infinity.
   */
  dAttnMask?: Tensor;
  /** ∂L/∂sinks `[Hq]`, when `sinks` was given. */
  dSinks?: Tensor;
}

/** {@link AttentionGradients} with `outputLocation: 'gpu'` ('webgpu'): dQuery, dKey, dValue in GPUBuffers the caller owns. */
export interface GpuAttentionGradients {
  dQuery: GpuTensor;
  dKey: GpuTensor;
  dValue: GpuTensor;
  dAttnMask?: Tensor;
  dSinks?: Tensor;
}

/** The float64 analytic gradients (the oracle). */
export interface AttentionGradients64 {
  dQuery: Tensor64;
  dKey: Tensor64;
  dValue: Tensor64;
  dAttnMask?: Tensor64;
  dSinks?: Tensor64;
}

/** Options of `randomUniform`: U(low, high), element i from draw `offset + i` of the stream. */
export interface UniformOptions {
  /** Lower bound (default −1). */
  low?: number;
  /** Upper bound (default 1); low ≤ high, both finite. */
  high?: number;
  /** Index of the first draw (default 0): draws can be taken in any order. */
  offset?: number;
}

/**
 * Inverted dropout with the library's seeded PRNG (mulberry32, see README, "Random numbers"): element i is
 * kept when draw i of the stream `seed` (as a number in [0, 1)) is ≥ p, and kept elements are
 * scaled by 1/(1 − p). The same seed gives the same mask on every platform.
 */
export interface DropoutOptions {
  /** Probability of zeroing an element, in [0, 1]. */
  p: number;
  /** Integer in [0, 2^32). */
  seed: number;
}

/**
 * Attention score functions, for q `[Dq]` and k `[Dk]`:
 * - `'dot'`: q·k; `'scaled-dot'`: q·k·scale (default 1/√Dk) — both need Dq = Dk;
 * - `'multiplicative'` (Luong "general"): qᵀ·W·k with `w` `[Dq, Dk]`;
 * - `'additive'` (Bahdanau): vᵀ·tanh(W₁·q + W₂·k) with `w1` `[A, Dq]`, `w2` `[A, Dk]`, `v` `[A]`.
 */
export type ScoreKind = 'dot' | 'scaled-dot' | 'multiplicative' | 'additive';

/**
 * Options of {@link Attention.attentionScores}. Every name below is accepted whatever `kind` (a
 * parameter that only another kind uses is ignored); any other name is a TypeError.
 */
export interface ScoreOptions {
  kind: ScoreKind;
  /** Multiplicative: `[Dq, Dk]`. */
  w?: Tensor;
  /** Additive: `[A, Dq]`. */
  w1?: Tensor;
  /** Additive: `[A, Dk]`. */
  w2?: Tensor;
  /** Additive: `[A]`. */
  v?: Tensor;
  /** Scaled-dot only; default 1/√Dk. */
  scale?: number | null;
}

export interface ScoreResult {
  /** `[..., Lq, Lk]`. */
  scores: Tensor;
  /** softmax of each row of `scores`. */
  weights: Tensor;
}

/** Gradients of L given dScores = ∂L/∂scores (parameters' gradients summed over the batch). */
export interface ScoreGradients {
  dQuery: Tensor;
  dKey: Tensor;
  dW?: Tensor;
  dW1?: Tensor;
  dW2?: Tensor;
  dV?: Tensor;
}

/** Options of {@link createSelfAttention}. */
export interface SelfAttentionOptions {
  /** Input embedding dim. */
  dModel: number;
  /** Query/key dim. */
  dK: number;
  /** Value (= output) dim; default `dK`. */
  dV?: number;
  /**
   * PRNG seed of the Xavier/Glorot-uniform init (integer in [0, 2^32), default 0): W_Q, W_K, W_V
   * are draws 0…, then the following ones, of one mulberry32 stream. Same seed, same weights,
   * on every platform.
   */
  seed?: number;
  /**
   * Projection weights to use instead of the init: all of `wQ` `[dModel, dK]`, `wK` `[dModel, dK]`,
   * `wV` `[dModel, dV]` (X·W layout). Copied.
   */
  weights?: { wQ: Tensor; wK: Tensor; wV: Tensor };
  /** Backend of the attention engine the module creates; default `'auto'`. */
  backend?: BackendChoice;
}

export interface SelfAttentionForwardOptions extends VariantOptions {
  /** As in {@link AttentionOptions} (bool mask: 1 = may attend). */
  attnMask?: MaskTensor | null;
  isCausal?: AttentionOptions['isCausal'];
  /** Dropout on the attention weights; off unless given. */
  dropout?: DropoutOptions | null;
}

/** Options of {@link SelfAttention.backward}: the forward's mask and causal setting (no dropout). */
export type SelfAttentionBackwardOptions = Omit<SelfAttentionForwardOptions, 'dropout'>;

/** Gradients of a loss L through a {@link SelfAttention} forward, given dOutput = ∂L/∂output. */
export interface SelfAttentionGradients {
  /** ∂L/∂x, x's shape. */
  dX: Tensor;
  /** ∂L/∂W_Q `[dModel, dK]` (summed over the batch). */
  dWQ: Tensor;
  /** ∂L/∂W_K `[dModel, dK]`. */
  dWK: Tensor;
  /** ∂L/∂W_V `[dModel, dV]`. */
  dWV: Tensor;
}

export interface ModuleOutput {
  /** `[..., L, dV]` (self-attention) or the query's layout with `embedDim` (multi-head). */
  output: Tensor;
  /**
   * The attention weights (after dropout, when dropout is on): `[..., L, L]` for self-attention;
   * for multi-head attention see `averageAttnWeights`. Absent when `needWeights` is false.
   */
  weights?: Tensor;
}

/**
 * Projection weights of {@link createMultiheadAttention}, in PyTorch's `nn.MultiheadAttention`
 * layout (`[out, in]`, applied as x·Wᵀ + b). Either `inProjWeight` (packed `[3E, E]`, as PyTorch
 * when kdim = vdim = E and no GQA) or the three `qProjWeight` `[E, E]`, `kProjWeight`
 * `[Hkv·hd, kdim]`, `vProjWeight` `[Hkv·hd, vdim]` (hd = E / numHeads).
 */
export interface MultiheadAttentionWeights {
  inProjWeight?: Tensor;
  inProjBias?: Tensor;
  qProjWeight?: Tensor;
  kProjWeight?: Tensor;
  vProjWeight?: Tensor;
  qProjBias?: Tensor;
  kProjBias?: Tensor;
  vProjBias?: Tensor;
  outProjWeight: Tensor;
  outProjBias?: Tensor;
}

/** Options of {@link createMultiheadAttention}. */
export interface MultiheadAttentionOptions {
  /** E, the model dim (= query dim = output dim). */
  embedDim: number;
  /** Query heads; must divide E. */
  numHeads: number;
  /** Key/value heads (GQA; 1 = MQA); must divide numHeads. Default numHeads. */
  numKvHeads?: number;
  /** Key input dim; default E. */
  kdim?: number;
  /** Value input dim; default E. */
  vdim?: number;
  /** Projections with bias (default true; zero-initialised). */
  bias?: boolean;
  /**
   * Input layout: `false` (default, as PyTorch) `[L, B, E]`; `true` `[B, L, E]`. Unbatched
   * `[L, E]` is accepted either way.
   */
  batchFirst?: boolean;
  /** Weights to use (e.g. a PyTorch state dict's); without them, Xavier-uniform from `seed`, biases 0. */
  weights?: MultiheadAttentionWeights;
  /** Init seed (integer in [0, 2^32), default 0): W_Q, W_K, W_V, W_O in that order from one stream. */
  seed?: number;
  backend?: BackendChoice;
}

/**
 * Options of {@link MultiheadAttention.forward}. Mask polarity follows PyTorch's
 * `nn.MultiheadAttention`, which is the OPPOSITE of `scaledDotProductAttention`'s bool mask:
 * here `1`/true means "ignore this key".
 */
/** Also the variants' options ({@link VariantOptions}), passed through to the attention call. */
export interface MultiheadForwardOptions extends VariantOptions {
  /** `[B, S]` (or `[S]` unbatched), Uint8Array: 1 = padding, ignore this key. */
  keyPaddingMask?: MaskTensor | null;
  /**
   * `[L, S]` or `[B·numHeads, L, S]`. Uint8Array: 1 = NOT allowed to attend (PyTorch MHA
   * polarity). Float32Array: added to the scores (−Infinity hides).
   */
  attnMask?: MaskTensor | null;
  /** Top-left causal mask (query i sees keys j ≤ i). */
  isCausal?: boolean;
  /** Return the weights (default true). */
  needWeights?: boolean;
  /** Average the weights over heads to `[B, L, S]` (default true), else `[B, numHeads, L, S]`. */
  averageAttnWeights?: boolean;
  dropout?: DropoutOptions | null;
}
