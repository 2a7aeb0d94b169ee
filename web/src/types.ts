// Public types of sdpa-web. Shape letters, as in PyTorch: B batch, H heads (Hq, Hkv), Lq/Lk
// query/key length, E query/key dim, Ev value dim.

/**
 * A dense row-major float32 tensor. `data.length` must equal the product of `shape`.
 * Attention inputs use PyTorch's layout: query `[..., Lq, E]`, key `[..., Lk, E]`,
 * value `[..., Lk, Ev]` where `...` is nothing, `[B]` or `[B, H]`.
 */
export interface Tensor {
  data: Float32Array;
  shape: readonly number[];
  /** Optional: float32 tensors need no dtype. */
  dtype?: 'float32';
}

/**
 * A `Float16Array` (Chrome/Edge ≥ 135, Firefox ≥ 129, Node ≥ 24), typed structurally so that
 * the package's types need no `esnext` lib.
 */
export type Float16ArrayLike = ArrayBufferView & ArrayLike<number>;

/**
 * A dense row-major float16 tensor (IEEE binary16): `data` holds the values' 16-bit patterns
 * (`toFloat16` makes them from numbers) or is a `Float16Array`. Accepted for query, key and value
 * (and a KV cache's appends); computation is float32 inside, and the output comes back in the
 * query's form (see `outputDtype`).
 */
export interface Float16Tensor {
  data: Uint16Array | Float16ArrayLike;
  shape: readonly number[];
  dtype: 'float16';
}

/** Element types of attention inputs and outputs. */
export type DType = 'float32' | 'float16';

/** A CPU attention input: float32 or float16. */
export type CpuTensor = Tensor | Float16Tensor;

/**
 * A tensor held in a caller's GPUBuffer (backend `'webgpu'` only), read in place: row-major from
 * byte `offset` (default 0). float32: `offset` a multiple of 4 (multiples of the device's
 * minStorageBufferOffsetAlignment, 256, avoid a copy on the GPU). float16 (`dtype: 'float16'`,
 * packed 2-byte halves): `offset` a multiple of 2, never copied, and the buffer must reach the
 * 4-byte boundary after the data (WebGPU binds whole 4-byte words). The buffer needs
 * `GPUBufferUsage.STORAGE` (and `COPY_SRC` to be appended to a KV cache), must belong to the
 * instance's device and stays the caller's.
 */
export interface GpuTensor {
  buffer: GpuBufferLike;
  shape: readonly number[];
  offset?: number;
  /** The buffer's element type: default `'float32'`; `'float16'` holds 2-byte halves. */
  dtype?: DType;
}

/** An attention input: a CPU tensor (float32 or float16), or (backend `'webgpu'`) a GPU-resident one. */
export type TensorInput = Tensor | Float16Tensor | GpuTensor;

/** The part of a `GPUBuffer` this library relies on (the full WebGPU type fits). */
export interface GpuBufferLike {
  readonly size: number;
  readonly usage: number;
  destroy(): void;
}

/** A float64 tensor, as returned by the float64 reference. */
export interface Tensor64 {
  data: Float64Array;
  shape: readonly number[];
}

/**
 * An attention mask broadcastable (PyTorch rules) to the weights shape `[..., Lq, Lk]`.
 * `Uint8Array` data is a bool mask: 1 = the query may attend to the key, 0 = hidden.
 * `Float32Array` data is an additive mask, added to the scaled scores (`-Infinity` hides a key).
 */
export interface MaskTensor {
  data: Uint8Array | Float32Array;
  shape: readonly number[];
}

/**
 * The compute backends: `'webgpu'` (the C++ core's WGSL kernels on a GPUDevice), `'simd'` (wasm
 * SIMD128), `'scalar'` (plain float32 loops).
 */
export type BackendName = 'webgpu' | 'simd' | 'scalar';
/** The CPU backends (the ones that also run the synchronous API and the backward pass). */
export type CpuBackendName = Exclude<BackendName, 'webgpu'>;
/** What `createAttention` accepts: a backend, or `'auto'` for the fastest available one. */
export type BackendChoice = 'auto' | BackendName;

export interface AttentionOptions {
  /**
   * Optional mask. With `isCausal` the two compose: a key must pass both, and an additive mask
   * adds to the keys causality leaves visible (as ONNX Attention; PyTorch rejects the pair).
   */
  attnMask?: MaskTensor | null;
  /**
   * Causal masking. Query i sits at position i + o and key j at j; query i sees keys j ≤ i + o.
   * `true` / `'top-left'`: o = 0 (PyTorch's `is_causal`). `'bottom-right'`: o = Lk − Lq (the
   * queries are the last Lq positions, as in a KV-cache step). `{ offset: n }`: o = n, any
   * integer (negative hides the first keys from every row; n ≥ Lk − 1 hides nothing). Without
   * `isCausal` the queries also sit at o = Lk − Lq. Rows that see no key return zeros.
   */
  isCausal?: boolean | 'top-left' | 'bottom-right' | { offset: number };
  /** Multiplier of QKᵀ; default `1/√E`. Must be finite. */
  scale?: number | null;
  /**
   * Logit softcap c (Gemma 2; ONNX Attention's `softcap`): each scaled score s becomes
   * c·tanh(s / c), bounded to (−c, c), before the mask and causality are applied. A finite
   * number > 0; `0` or absent turns it off (as ONNX's default, PyTorch and flash-attn). Also
   * accepted by `scaledDotProductAttentionBackward`.
   */
  softcap?: number;
  /**
   * Grouped-query attention (PyTorch semantics): key/value may have fewer heads Hkv than the
   * query's Hq (Hq a multiple of Hkv); query head h uses key/value head ⌊h / (Hq/Hkv)⌋.
   */
  enableGqa?: boolean;
  /**
   * Per-batch key lengths `[B]` (ONNX Attention's `nonpad_kv_seqlen`): in batch b, keys
   * j ≥ keyLengths[b] are hidden, and the queries' positions (without `isCausal`, or with
   * `'bottom-right'`) align to the batch's last valid key: p = i + keyLengths[b] − Lq. Each in
   * [0, Lk]. Also accepted by the backward.
   */
  keyLengths?: Int32Array | null;
  /**
   * Sliding window (ONNX opset 25, Mistral, Gemma 2): query at position p sees key j only when
   * p − left ≤ j ≤ p + right; an absent side is unbounded, 0 means "this position only".
   * Composes with `isCausal` and the mask. Key tiles wholly outside the band are never read, so
   * a window of w costs O(Lq·w), not O(Lq·Lk).
   */
  window?: { left?: number; right?: number } | null;
  /**
   * ALiBi (BLOOM, MPT): the bias −m_h·|p − j| added to each score after the softcap, with the
   * standard slopes of Press et al. for Hq heads (m_h = 2^(−8(h+1)/Hq) for Hq a power of two;
   * otherwise BLOOM's interleaving). `alibiSlopes` gives your own slopes instead.
   */
  alibi?: boolean;
  /** ALiBi with these slopes, one per query head `[Hq]` (finite numbers). */
  alibiSlopes?: Float32Array | null;
  /**
   * Attention sinks (gpt-oss, StreamingLLM): one extra logit per query head `[Hq]` in each row's
   * softmax denominator, with no value: the weights then sum to less than 1. Each finite or
   * −Infinity (no sink). A row that sees no key still returns zeros. The backward returns `dSinks`.
   */
  sinks?: Float32Array | null;
  /**
   * Document ids of packed variable-length sequences: `queryDocuments` `[B, Lq]` and
   * `keyDocuments` `[B, Lk]` (Int32Array data; both or neither). Query i sees key j only when
   * their ids are equal; key tiles that cannot match are skipped.
   */
  queryDocuments?: DocumentIds | null;
  keyDocuments?: DocumentIds | null;
  /**
   * Also return a stage of the scores `[..., Lq, Lk]` as `result.scores` (ONNX's
   * `qk_matmul_output`): `'scaled'` Q·Kᵀ·scale, `'softcapped'` after the softcap, `'masked'` after
   * biases and masks (−Infinity where a key is hidden). A debugging and teaching aid: it builds
   * the Lq×Lk matrix the fused kernels otherwise never hold.
   */
  returnScores?: ScoreStage;
  /** Also return the attention weights `[..., Lq, Lk]`. Default false (the fused kernel then never builds them). */
  returnWeights?: boolean;
  /**
   * Also return each query row's log-sum-exp of its scaled, masked scores (and sink),
   * log(e^sink + Σ_j e^score_j), float32 `[..., Lq]` (`-Infinity` for a row that sees no key and
   * has no sink): with `output`, what the backward pass reuses instead of recomputing the
   * forward. Every backend ('webgpu' with `outputLocation` 'cpu'). Default false.
   */
  returnLogSumExp?: boolean;
  /**
   * Where to write the output: a Float32Array of exactly the output's element count
   * (B·…·Lq·Ev), returned as `result.output.data`. Default: a new array per call. Reusing one
   * array across calls saves allocating (and, for large outputs, the operating system zeroing)
   * fresh memory on every call. It may alias an input: inputs are copied before anything is
   * written. On an error it is left untouched.
   */
  out?: Float32Array | Uint16Array | Float16ArrayLike | GpuBufferLike | null;
  /**
   * Backend `'webgpu'`: `'gpu'` leaves the output in a GPUBuffer, returned as
   * `result.output = { buffer, shape }` (`STORAGE | COPY_SRC | COPY_DST` usage, owned by the
   * caller: `destroy()` it), or written to `out` when that is a GPUBuffer (`STORAGE | COPY_DST`
   * usage, at least the output's bytes). Returns the output only (no weights or scores).
   * A float16 output (`outputDtype`) is packed halves, `{ buffer, shape, dtype: 'float16' }`,
   * rounded on the GPU; an `out` GPUBuffer then holds 2 bytes an element, rounded up to 4.
   * Default `'cpu'`.
   */
  outputLocation?: 'cpu' | 'gpu' | null;
  /**
   * The output's element type: default the query's (`'float16'` for a float16 query). Sums are
   * float32 either way and only the output is rounded; an output beyond float16's range
   * (±65504) is ±Infinity, never NaN. `out` must then be a Uint16Array (or Float16Array).
   * Weights, scores and the log-sum-exp are float32.
   */
  outputDtype?: DType | null;
}

/** The result of a call with `outputLocation: 'gpu'`. */
export interface GpuAttentionResult {
  /** `[..., Lq, Ev]` in a GPUBuffer the caller owns. */
  output: GpuTensor;
}

/** What `attn.createKvCache` takes: the cache's fixed shape, allocated once. */
export interface KvCacheOptions {
  /** B: sequences held side by side. */
  batch: number;
  /** Hkv: key/value heads (query heads are a multiple of it, with `enableGqa`). */
  kvHeads: number;
  /** Most tokens a sequence may hold; appending past it is a RangeError. */
  maxLength: number;
  /** E: the key (and query) head dim. */
  headDim: number;
  /** Ev: the value head dim; default `headDim`. */
  valueDim?: number;
  /**
   * Element type of the cached keys and values: `'float16'` halves the memory and the bytes a
   * decode step reads (appended float32 rows are rounded to float16); `'int8'` and `'int4'`
   * quantize appended rows in blocks of 32 along the head dim with a float32 scale each
   * (docs/kv-cache-formats.md; on backend 'webgpu' quantized on the GPU). Default `'float32'`.
   */
  dtype?: KvCacheDType;
}

/** Element type of a KV cache: a float type, or int8/int4 blocks with float32 scales. */
export type KvCacheDType = DType | 'int8' | 'int4';

/** Options of `KvCache.append`. */
export interface KvCacheAppendOptions {
  /**
   * Ragged batches: how many of the n appended rows of each sequence are real `[B]` (each in
   * [0, n]); the rest of that sequence's rows are padding and are not stored. Default: n for all.
   */
  lengths?: Int32Array | readonly number[] | null;
}

/** Per-position document ids (Int32Array data). */
export interface DocumentIds {
  data: Int32Array;
  shape: readonly number[];
}

/** The stages of the scores `returnScores` can return. */
export type ScoreStage = 'scaled' | 'softcapped' | 'masked';

/** The options of the attention variants, which the modules pass through to the attention call. */
export type VariantOptions = Pick<
  AttentionOptions,
  'softcap' | 'keyLengths' | 'window' | 'alibi' | 'alibiSlopes' | 'sinks' | 'queryDocuments' | 'keyDocuments'
>;

export interface AttentionResult<Output extends CpuTensor = Tensor> {
  /** `[..., Lq, Ev]` (the query's leading dims), float32 or, with `outputDtype` float16, float16. */
  output: Output;
  /** `[..., Lq, Lk]`, only when `returnWeights` was set. */
  weights?: Tensor;
  /** `[..., Lq, Lk]`, the stage `returnScores` asked for. */
  scores?: Tensor;
  /** `[..., Lq]`, only when `returnLogSumExp` was set. */
  logSumExp?: Tensor;
}

export interface AttentionResult64 {
  output: Tensor64;
  weights: Tensor64;
  /** The stage `returnScores` asked for, in float64. */
  scores?: Tensor64;
  /** `[..., Lq]`, with `returnLogSumExp`: each row's log(e^sink + Σ_j e^(masked score)), in float64. */
  logSumExp?: Tensor64;
}

/**
 * Every stage of one attention call, for step-by-step explanation. All score stages have the
 * weights shape `[..., Lq, Lk]`.
 */
export interface AttentionStages {
  /** QKᵀ. */
  scores: Tensor;
  /** QKᵀ · scale. */
  scaledScores: Tensor;
  /** scaled (then softcapped, with `softcap`) + additive mask; `-Infinity` where the mask or causality hides a key. */
  maskedScores: Tensor;
  /** softmax of each row of `maskedScores`; a row that sees no key is all zeros. */
  weights: Tensor;
  /** weights · V, `[..., Lq, Ev]`. */
  output: Tensor;
}

/** Which query row {@link Attention.traceOnlineSoftmax} traces (besides the attention options). */
export interface TraceOptions extends Omit<AttentionOptions, 'returnWeights' | 'returnLogSumExp' | 'returnScores' | 'out' | 'outputLocation' | 'outputDtype'> {
  /** Batch index (default 0). */
  batch?: number;
  /** Query head index (default 0). */
  head?: number;
  /** Query row index. */
  row: number;
}

/**
 * One query row's online softmax as the fused SIMD kernel computes it: after each key tile it
 * visits, the running max, the running denominator and the unnormalized accumulator
 * Σ_j e^(s_j − max)·V_j. The output row is the last accumulator over the last sum.
 */
export interface OnlineSoftmaxTrace {
  /** Keys per tile (the kernel's Bc). */
  tileKeys: number;
  steps: { firstKey: number; max: number; sum: number; accumulator: Float32Array }[];
  /**
   * Which key tiles the kernel read for each block of `blockRows` query rows of the traced head,
   * `[blocks, tiles]` (1 read, 0 skipped: outside every row's window, key length or causal limit,
   * or of other documents).
   */
  tileMap: { blockRows: number; tileKeys: number; shape: [number, number]; visited: Uint8Array };
  /** The call's whole output `[..., Lq, Ev]`, from the same kernel run. */
  output: Tensor;
}

/**
 * One query row's online softmax as the WebGPU flash kernel runs it
 * ({@link Attention.traceWebGpuOnlineSoftmax}): the same steps as {@link OnlineSoftmaxTrace},
 * one per key tile of the kernel's own size; a sink joins after the last tile (the SIMD kernel
 * starts from it).
 */
export interface WebGpuSoftmaxTrace {
  /** Keys per tile (the kernel's BLOCK_KEYS on this device). */
  tileKeys: number;
  /** The kernel's pipeline key (which kernel, padded head dims, key tile, query rows per workgroup). */
  kernel: string;
  steps: { firstKey: number; max: number; sum: number; accumulator: Float32Array }[];
  /** The call's whole output `[..., Lq, Ev]`, from the same run. */
  output: Tensor;
}

/** Whether a backend can run here, and if not, why. */
export interface BackendInfo {
  name: BackendName;
  available: boolean;
  reason?: string;
}

export interface CreateAttentionOptions {
  /**
   * Default `'auto'`: WebGPU when a device can be had (`gpuDevice`, or a hardware adapter from
   * `navigator.gpu`: a software fallback adapter is slower than SIMD), else SIMD;
   * `fallbackReason` says why it fell back. `'webgpu'` rejects with a
   * {@link WebGPUError} (kind `'unavailable'`) when no device can be had.
   */
  backend?: BackendChoice;
  /**
   * Threads for the `'simd'` backend (a positive integer). Default: every core, where
   * WebAssembly threads are available (Node; browsers only on cross-origin isolated pages, i.e.
   * served with COOP `same-origin` + COEP `require-corp`); elsewhere 1, and
   * `Attention.fallbackReason` says why. `1` forces the single-thread module. Capped at the
   * number of cores.
   */
  threads?: number;
  /**
   * Whether to run the relaxed-SIMD build of the wasm module, whose 'simd' kernels use fused
   * multiply-adds (`f32x4.relaxed_madd`; about 15–20% faster on x86-64 with FMA). Default: where
   * the engine has relaxed SIMD (Chrome/Edge ≥ 114, Node ≥ 22; Node 20 with
   * `--experimental-wasm-relaxed-simd`). `false` forces the SIMD128 build, whose results are
   * bit-identical on every engine and CPU (a relaxed multiply-add may or may not round between
   * the multiply and the add, depending on the CPU). `true` where it is unavailable runs the
   * SIMD128 build and says why in `Attention.fallbackReason`.
   */
  relaxedSimd?: boolean;
  /** A GPUDevice to run on (WebGPU backend); otherwise one is requested from `gpu`/`navigator.gpu`. */
  gpuDevice?: GpuDeviceLike;
  /**
   * Where devices come from when `gpuDevice` is not given, and after a device is lost: default
   * `navigator.gpu`. In Node, pass e.g. the `webgpu` package's `create([])`.
   */
  gpu?: GpuLike | null;
  /**
   * Caps on the device limits the WebGPU backend plans with (they can only lower the device's):
   * work beyond them is split into several buffers/dispatches, and the workgroup caps choose the
   * kernel. For tests and constrained devices.
   */
  gpuLimits?: GpuLimitCaps;
}

/** The part of a `GPUDevice` this library relies on (the full WebGPU type fits). */
export interface GpuDeviceLike {
  readonly lost: Promise<{ reason?: string; message?: string }>;
  readonly limits: object;
  readonly queue: object;
  destroy(): void;
}

/** The part of `navigator.gpu` (a `GPU`) this library relies on. */
export interface GpuLike {
  requestAdapter(options?: object): Promise<{
    readonly limits: Record<string, unknown> | object;
    /** GPUAdapterInfo; `isFallbackAdapter` marks a software adapter, which `'auto'` passes over. */
    readonly info?: { isFallbackAdapter?: boolean; description?: string; architecture?: string };
    /** The older spelling of `info.isFallbackAdapter`. */
    readonly isFallbackAdapter?: boolean;
    /** GPUSupportedFeatures: `'shader-f16'` and `'subgroups'` are requested where the adapter has them. */
    readonly features?: { has(name: string): boolean };
    requestDevice(descriptor?: object): Promise<GpuDeviceLike>;
  } | null>;
}

export interface GpuLimitCaps {
  maxStorageBufferBindingSize?: number;
  maxBufferSize?: number;
  maxComputeWorkgroupsPerDimension?: number;
  /** Bounds the key tiles; below a 16-key tile of the tiled kernel, the per-row kernel runs. */
  maxComputeWorkgroupStorageSize?: number;
  /** Below 256 the tiled kernel (a workgroup of 256) cannot run and the per-row kernel does. */
  maxComputeInvocationsPerWorkgroup?: number;
  /**
   * `false`: read float16 tensors through `unpack2x16float` even where the device has the
   * `'shader-f16'` feature (whose kernels read `f16` storage); `true` or absent: the device decides.
   */
  shaderF16?: boolean;
  /**
   * `false`: the decode kernel's lanes combine their softmax statistics through workgroup memory
   * even where the device has the `'subgroups'` feature (whose kernel uses subgroupShuffleXor);
   * `true` or absent: the device decides.
   */
  subgroups?: boolean;
  /**
   * `false`: form int8 dot products by unpacking bytes even where WGSL has the
   * `packed_4x8_integer_dot_product` language feature (`dot4I8Packed`); `true` or absent: used
   * where `navigator.gpu.wgslLanguageFeatures` has it.
   */
  packedIntegerDotProduct?: boolean;
  /**
   * The fewest keys a prefill key split holds (default 512): where a call's flash grid is too
   * small for a large GPU, its keys are cut into splits whose partial results a second pass
   * merges. Lowering it splits smaller calls (the tests use it); a positive integer.
   */
  prefillSplitKeys?: number;
}

/** What went wrong on the GPU (see {@link WebGPUError}). */
export type WebGPUErrorKind = 'unavailable' | 'device-lost' | 'validation' | 'out-of-memory' | 'internal';

/** State of the WebGPU backend of one instance, for diagnostics. */
export interface WebGpuInfo {
  /** The limits the backend plans with (device limits, lowered by `gpuLimits`). */
  limits: Required<GpuLimitCaps>;
  /** Keys of the compiled pipeline variants (kernel, head dims, key tile, mask kind, causal, stats). */
  pipelines: string[];
  /** Calls submitted and not yet finished. */
  jobsInFlight: number;
  /**
   * How the kernels read float16 tensors on this device: `'shader-f16'` (`f16` storage, the
   * device's feature) or `'unpack2x16float'` (u32 words of two halves). Sums are float32 either way.
   */
  float16: 'shader-f16' | 'unpack2x16float';
}

export interface SoftmaxOptions {
  /** Divides the inputs before the softmax; finite and > 0. Default 1. Small T sharpens, large T flattens. */
  temperature?: number;
}

/** Memory diagnostics of the wasm module (for leak checks). */
export interface MemoryStats {
  /** Bytes currently allocated on the wasm heap. Back at its baseline after every call. */
  heapBytesInUse: number;
  /** Size of the wasm linear memory. */
  memoryBytes: number;
}
