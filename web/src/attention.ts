// The Attention class: the public face of one engine (a backend on a loaded wasm build). It holds
// the instance's state and hands each call to its call path: cpu-calls, webgpu-calls,
// reference-calls, extras/ (gradients, PRNG, scores) and building-blocks.
import { backendInfos, chooseEngine, type EngineChoice } from './backend-choice.js';
import { matmul, softmax } from './building-blocks.js';
import { CallRecord } from './core-call.js';
import { runCpuAttention } from './cpu-calls.js';
import type { GpuEngine } from './webgpu-calls.js';
import { runWebGpuAttention, traceWebGpuOnlineSoftmax } from './webgpu-calls.js';
import { attentionBackward, referenceAttentionBackward, webgpuAttentionBackward } from './extras/gradients.js';
import { dropout, randomUniform, xavierUniform } from './extras/prng.js';
import { attentionScores, attentionScoresBackward } from './extras/scores.js';
import type { AttentionGradients, AttentionGradients64, BackwardOptions, DropoutOptions, GpuAttentionGradients, ScoreGradients, ScoreOptions, ScoreResult, UniformOptions } from './extras/types.js';
import { KvCache } from './kv-cache.js';
import { explain, referenceAttention, traceOnlineSoftmax } from './reference-calls.js';
import type {
  AttentionOptions, AttentionResult, AttentionResult64, AttentionStages, BackendInfo, BackendName, CpuBackendName, CpuTensor,
  CreateAttentionOptions, Float16Tensor, GpuAttentionResult, GpuTensor, KvCacheOptions, MemoryStats, OnlineSoftmaxTrace,
  SoftmaxOptions, Tensor, TensorInput, TraceOptions, WebGpuInfo, WebGpuSoftmaxTrace,
} from './types.js';
import type { SdpaModule } from './wasm/sdpa_core.mjs';
import { checkCpuInputs, GpuSession, isGpuTensor, WebGPUError } from './webgpu.js';

/** One attention engine bound to a backend. Create with {@link createAttention}. */
export class Attention implements GpuEngine {
  /** @internal */ readonly module: SdpaModule;
  /** @internal */ readonly record: CallRecord;
  /** @internal */ readonly requestedThreads: number;
  /**
   * Most threads a call runs on: the `threads` option (default every core) within the loaded
   * module's pool; 1 for 'scalar' and 'webgpu', and where WebAssembly threads are unavailable.
   */
  readonly threads: number;
  /** Whether this instance runs the relaxed-SIMD build of the wasm module (fused multiply-adds in the 'simd' kernels). */
  readonly relaxedSimd: boolean;
  private currentBackend: BackendName;
  private currentFallbackReason: string | undefined;
  private webgpuReason: string | undefined;
  private readonly session: GpuSession | undefined;
  private readonly options: EngineChoice['options'];
  private disposed = false;

  /** @internal use {@link createAttention} */
  constructor(choice: EngineChoice) {
    this.module = choice.module;
    this.record = CallRecord.of(choice.module);
    this.requestedThreads = choice.threads ?? 0;
    this.threads = Math.min(choice.threads ?? Infinity, choice.module.maxThreads());
    this.relaxedSimd = choice.relaxedSimd;
    this.currentBackend = choice.backend;
    this.currentFallbackReason = choice.fallbackReason;
    this.webgpuReason = choice.webgpuReason;
    this.options = choice.options;
    const giveUp = (reason: string) => {
      this.currentBackend = 'simd';
      this.currentFallbackReason = this.webgpuReason = reason;
    };
    if (choice.device) this.session = new GpuSession(choice.module, choice.options, choice.device, choice.ownsDevice ?? false, giveUp);
  }

  /** The backend in use. An `'auto'` instance whose GPU device is lost and cannot be replaced switches to `'simd'` (see `fallbackReason`). */
  get backend(): BackendName {
    return this.currentBackend;
  }

  /** Why `'auto'` did not pick (or no longer uses) a faster backend, or why fewer threads run than asked for. */
  get fallbackReason(): string | undefined {
    return this.currentFallbackReason;
  }

  /** Every backend this build knows, whether it can run here, and why not. */
  get availableBackends(): BackendInfo[] {
    return backendInfos(this.currentBackend, this.webgpuReason, this.options);
  }

  /** @internal The CPU kernels for CPU-only work (the sync API, the backward): 'scalar' on a scalar instance, else 'simd'. */
  get cpuBackend(): CpuBackendName {
    return this.currentBackend === 'scalar' ? 'scalar' : 'simd';
  }

  /** @internal The GPU device session of a 'webgpu' (or 'auto') instance. */
  get gpu(): GpuSession {
    return this.session!;
  }

  /** The WebGPU backend's limits and compiled pipelines (undefined on CPU backends). */
  webgpuInfo(): WebGpuInfo | undefined {
    this.checkUsable();
    return this.session?.current?.context.info();
  }

  /**
   * Scaled dot-product attention with PyTorch's `scaled_dot_product_attention` semantics, on
   * tensors or on a {@link KvCache} read in place (`isCausal: true` then aligns to the cache).
   * - A query row that may attend to no key returns zeros in `output` and `weights`, never NaN.
   * - Keys hidden by the mask are never read; NaN in a visible input propagates to its rows.
   * - float16 inputs compute in float32; the output is float16 unless `outputDtype: 'float32'`.
   * - Backend `'webgpu'`: inputs may be GPU-resident `{ buffer, shape, offset? }`, and with
   *   `outputLocation: 'gpu'` the output stays in a GPUBuffer.
   * - Bad input rejects with a TypeError or RangeError naming the argument and the expected
   *   shape (an unknown option name with the closest known one); the instance stays usable.
   */
  async scaledDotProductAttention(query: TensorInput, key: TensorInput, value: TensorInput, options: AttentionOptions & { outputLocation: 'gpu' }): Promise<GpuAttentionResult>;
  async scaledDotProductAttention(query: TensorInput, cache: KvCache, options: AttentionOptions & { outputLocation: 'gpu' }): Promise<GpuAttentionResult>;
  async scaledDotProductAttention(query: Tensor, key: Tensor, value: Tensor, options?: AttentionOptions): Promise<AttentionResult>;
  async scaledDotProductAttention(query: Tensor, cache: KvCache, options?: AttentionOptions): Promise<AttentionResult>;
  async scaledDotProductAttention(query: TensorInput, key: TensorInput, value: TensorInput, options: AttentionOptions & { outputDtype: 'float16' }): Promise<AttentionResult<Float16Tensor>>;
  async scaledDotProductAttention(query: TensorInput, cache: KvCache, options: AttentionOptions & { outputDtype: 'float16' }): Promise<AttentionResult<Float16Tensor>>;
  async scaledDotProductAttention(query: Float16Tensor, key: TensorInput, value: TensorInput, options?: AttentionOptions): Promise<AttentionResult<Float16Tensor | Tensor>>;
  async scaledDotProductAttention(query: Float16Tensor, cache: KvCache, options?: AttentionOptions): Promise<AttentionResult<Float16Tensor | Tensor>>;
  async scaledDotProductAttention(query: Tensor | GpuTensor, key: TensorInput, value: TensorInput, options?: AttentionOptions): Promise<AttentionResult>;
  async scaledDotProductAttention(query: Tensor | GpuTensor, cache: KvCache, options?: AttentionOptions): Promise<AttentionResult>;
  async scaledDotProductAttention(query: TensorInput, key: TensorInput, value: TensorInput, options?: AttentionOptions): Promise<AttentionResult<CpuTensor>>;
  async scaledDotProductAttention(query: TensorInput, cache: KvCache, options?: AttentionOptions): Promise<AttentionResult<CpuTensor>>;
  async scaledDotProductAttention(query: TensorInput, key: TensorInput | KvCache, value?: TensorInput | AttentionOptions, options?: AttentionOptions): Promise<AttentionResult<CpuTensor> | GpuAttentionResult> {
    this.checkUsable();
    const [values, callOptions] = key instanceof KvCache ? [undefined, value as AttentionOptions | undefined] : [value as TensorInput, options];
    if (this.currentBackend === 'webgpu') return runWebGpuAttention(this, query, key, values, callOptions);
    return runCpuAttention(this, 'scaledDotProductAttention', query as CpuTensor, key as CpuTensor | KvCache, values as CpuTensor | undefined, callOptions);
  }

  /** Synchronous {@link Attention.scaledDotProductAttention}, CPU backends only (on `'webgpu'` it throws: GPU results arrive asynchronously). */
  scaledDotProductAttentionSync(query: CpuTensor, key: CpuTensor, value: CpuTensor, options: AttentionOptions & { outputDtype: 'float16' }): AttentionResult<Float16Tensor>;
  scaledDotProductAttentionSync(query: CpuTensor, cache: KvCache, options: AttentionOptions & { outputDtype: 'float16' }): AttentionResult<Float16Tensor>;
  scaledDotProductAttentionSync(query: Tensor, key: CpuTensor, value: CpuTensor, options?: AttentionOptions): AttentionResult;
  scaledDotProductAttentionSync(query: Tensor, cache: KvCache, options?: AttentionOptions): AttentionResult;
  scaledDotProductAttentionSync(query: Float16Tensor, key: CpuTensor, value: CpuTensor, options?: AttentionOptions): AttentionResult<Float16Tensor | Tensor>;
  scaledDotProductAttentionSync(query: Float16Tensor, cache: KvCache, options?: AttentionOptions): AttentionResult<Float16Tensor | Tensor>;
  scaledDotProductAttentionSync(query: CpuTensor, key: CpuTensor | KvCache, value?: CpuTensor | AttentionOptions, options?: AttentionOptions): AttentionResult<CpuTensor> {
    this.checkUsable();
    if (this.currentBackend === 'webgpu') {
      throw new Error(
        "sdpa-web: scaledDotProductAttentionSync runs on the CPU backends only; this instance uses 'webgpu': " +
          "use `await scaledDotProductAttention(...)`, or create a 'simd' instance",
      );
    }
    const [values, callOptions] = key instanceof KvCache ? [undefined, value as AttentionOptions | undefined] : [value as CpuTensor, options];
    return runCpuAttention(this, 'scaledDotProductAttentionSync', query, key, values, callOptions);
  }

  /**
   * A key/value cache for generation on this instance's module: keys `[B, Hkv, maxLength, E]`
   * and values `[B, Hkv, maxLength, Ev]` allocated once (zeroed); `append` writes in place and
   * attention calls read in place. Free it with `cache.dispose()`.
   */
  createKvCache(options: KvCacheOptions): KvCache {
    this.checkUsable();
    if (this.currentBackend !== 'webgpu') return new KvCache(this.module, options);
    const gpu = this.session?.current;
    if (!gpu) throw new WebGPUError('device-lost', 'the GPU device was lost: make an attention call first (it re-initializes the device), then create the cache');
    return new KvCache(this.module, options, gpu);
  }

  /** Every stage of one call (QKᵀ, ·scale, +mask, softmax, ·V) by the float32 scalar reference, whatever the backend: for explaining small examples. */
  async explain(query: Tensor, key: Tensor, value: Tensor, options?: AttentionOptions): Promise<AttentionStages> {
    this.checkUsable();
    return explain(this, query, key, value, options);
  }

  /**
   * One query row's online softmax, traced from the fused SIMD kernel itself (on one thread,
   * whatever the backend): after each key tile, the running max, sum and unnormalized
   * accumulator, and the output of the same run. Takes the attention options plus `batch`, `head`, `row`.
   */
  traceOnlineSoftmax(query: Tensor, key: Tensor, value: Tensor, options: TraceOptions): OnlineSoftmaxTrace {
    this.checkUsable();
    return traceOnlineSoftmax(this, query, key, value, options);
  }

  /** {@link Attention.traceOnlineSoftmax} of the WebGPU flash kernel ('webgpu' instances), at its tile size on this device; the call must run in one dispatch. */
  async traceWebGpuOnlineSoftmax(query: Tensor, key: Tensor, value: Tensor, options: TraceOptions): Promise<WebGpuSoftmaxTrace> {
    this.checkUsable();
    if (this.currentBackend !== 'webgpu') {
      throw new TypeError(`sdpa-web: traceWebGpuOnlineSoftmax runs on 'webgpu' instances; this one uses '${this.currentBackend}' (traceOnlineSoftmax traces the SIMD kernel)`);
    }
    return traceWebGpuOnlineSoftmax(this, query, key, value, options);
  }

  /** The float64 reference (the oracle every backend is tested against): the same arguments and semantics, in double precision. Always returns the weights. */
  referenceAttention(query: CpuTensor, key: CpuTensor, value: CpuTensor, options?: AttentionOptions): AttentionResult64;
  /** The float64 reference of a call on a CPU {@link KvCache}: the cache's contents as it holds them (int8/int4: levels times block scales, the query rounded through int8 blocks). */
  referenceAttention(query: CpuTensor, cache: KvCache, options?: AttentionOptions): AttentionResult64;
  referenceAttention(query: CpuTensor, key: CpuTensor | KvCache, value?: CpuTensor | AttentionOptions, options?: AttentionOptions): AttentionResult64 {
    this.checkUsable();
    if (key instanceof KvCache) return referenceAttention(this, query, key, undefined, value as AttentionOptions | undefined);
    return referenceAttention(this, query, key, value as CpuTensor, options);
  }

  /** Softmax over the last axis of `x`, numerically stable (subtracts each row's max); `temperature` divides the inputs first; a row of `-Infinity` gives zeros. */
  softmax(x: Tensor, options?: SoftmaxOptions): Tensor {
    this.checkUsable();
    return softmax(this.module, x, options);
  }

  /** Matrix product `a · b`: a `[..., M, K]` with b `[K, N]` (one matrix for every leading index) or b `[..., K, N]` with a's leading dims. */
  matmul(a: Tensor, b: Tensor): Tensor {
    this.checkUsable();
    return matmul(this.module, a, b);
  }

  /**
   * ∂L/∂query, ∂L/∂key, ∂L/∂value (and ∂L/∂attnMask with `returnAttnMaskGrad`, ∂L/∂sinks) given
   * `dOutput` = ∂L/∂output, with the forward's options. The weights are recomputed tile by tile
   * from the forward's log-sum-exp (FlashAttention-2 style): pass the forward's `output` and
   * `logSumExp` (`returnLogSumExp: true`) to skip recomputing them.
   * - Backend `'webgpu'`: it runs on the GPU; query, key, value and dOutput may be GPU-resident
   *   `{ buffer, shape, offset? }`, and with `outputLocation: 'gpu'` dQuery, dKey and dValue stay
   *   in GPUBuffers you own. float16 query/key/value are widened; the gradients are float32.
   * - CPU backends: the `'simd'` (or `'scalar'`) backward; {@link Attention.scaledDotProductAttentionBackwardSync} is the same, synchronously.
   */
  async scaledDotProductAttentionBackward(query: TensorInput, key: TensorInput, value: TensorInput, dOutput: TensorInput, options: BackwardOptions & { outputLocation: 'gpu' }): Promise<GpuAttentionGradients>;
  async scaledDotProductAttentionBackward(query: TensorInput, key: TensorInput, value: TensorInput, dOutput: TensorInput, options?: BackwardOptions): Promise<AttentionGradients>;
  async scaledDotProductAttentionBackward(query: TensorInput, key: TensorInput, value: TensorInput, dOutput: TensorInput, options?: BackwardOptions): Promise<AttentionGradients | GpuAttentionGradients> {
    this.checkUsable();
    if ((key as unknown) instanceof KvCache) throw new TypeError('scaledDotProductAttentionBackward takes key and value tensors, not a KvCache (the backward is not supported on a cache)');
    if (this.currentBackend === 'webgpu') return webgpuAttentionBackward(this, query, key, value, dOutput, options);
    checkCpuInputs(this.currentBackend, query, key, value);
    if (isGpuTensor(dOutput)) {
      throw new TypeError(`dOutput is a GPU-resident tensor { buffer, shape }, which only backend 'webgpu' reads; this instance uses '${this.currentBackend}': pass { data: Float32Array, shape }`);
    }
    return attentionBackward(this, query as Tensor, key as Tensor, value as Tensor, dOutput as Tensor, options);
  }

  /** Synchronous {@link Attention.scaledDotProductAttentionBackward}, CPU backends only (on `'webgpu'` it throws: GPU results arrive asynchronously). */
  scaledDotProductAttentionBackwardSync(query: Tensor, key: Tensor, value: Tensor, dOutput: Tensor, options?: BackwardOptions): AttentionGradients {
    this.checkUsable();
    if (this.currentBackend === 'webgpu') {
      throw new Error(
        "sdpa-web: scaledDotProductAttentionBackwardSync runs on the CPU backends only; this instance uses 'webgpu': " +
          "use `await scaledDotProductAttentionBackward(...)`, or create a 'simd' instance",
      );
    }
    if ((key as unknown) instanceof KvCache) throw new TypeError('scaledDotProductAttentionBackward takes key and value tensors, not a KvCache (the backward is not supported on a cache)');
    return attentionBackward(this, query, key, value, dOutput, options);
  }

  /** The float64 analytic gradients (the oracle the backward kernels are tested against). */
  referenceAttentionBackward(query: Tensor, key: Tensor, value: Tensor, dOutput: Tensor, options?: BackwardOptions): AttentionGradients64 {
    this.checkUsable();
    return referenceAttentionBackward(this, query, key, value, dOutput, options);
  }

  /** A `[rows, cols]` Xavier/Glorot-uniform matrix from the mulberry32 stream `seed` (README, "Random numbers"). */
  xavierUniform(shape: readonly [number, number], seed: number, offset = 0): Tensor {
    this.checkUsable();
    return xavierUniform(this.module, shape, seed, offset);
  }

  /** A tensor of `shape` drawn from U(low, high) (default U(−1, 1)) by the mulberry32 stream `seed`: the same numbers on every platform. */
  randomUniform(shape: readonly number[], seed: number, options?: UniformOptions): Tensor {
    this.checkUsable();
    return randomUniform(this.module, shape, seed, options);
  }

  /** Inverted dropout, deterministic for a seed on every platform. */
  dropout(x: Tensor, options: DropoutOptions): Tensor {
    this.checkUsable();
    return dropout(this.module, x, options);
  }

  /** Attention scores by one of four score functions and their row softmax, for side-by-side comparison. */
  attentionScores(query: Tensor, key: Tensor, options: ScoreOptions): ScoreResult {
    this.checkUsable();
    return attentionScores(this.module, query, key, options);
  }

  /** Gradients of {@link Attention.attentionScores}' scores w.r.t. query, key and the score function's parameters. */
  attentionScoresBackward(query: Tensor, key: Tensor, dScores: Tensor, options: ScoreOptions): ScoreGradients {
    this.checkUsable();
    return attentionScoresBackward(this.module, query, key, dScores, options);
  }

  /** Wasm heap usage, for leak checks: `heapBytesInUse` returns to its baseline after every call. */
  memoryStats(): MemoryStats {
    return { heapBytesInUse: this.module.heapBytesInUse(), memoryBytes: this.module.HEAPU8.byteLength };
  }

  /** Releases the instance: its share of the GPU pipelines, and a device it requested itself. Later calls, including a second `dispose()`, throw. */
  dispose(): void {
    this.checkUsable();
    this.disposed = true;
    this.session?.close();
  }

  private checkUsable(): void {
    if (this.disposed) throw new Error('sdpa-web: this Attention instance was disposed');
  }
}

/**
 * Creates an attention engine. `backend: 'auto'` (default) picks the fastest backend available
 * here and reports why it fell back in `fallbackReason`; naming an unavailable backend rejects.
 * `threads` (simd backend): default every core where WebAssembly threads can run, else 1 with
 * the reason in `fallbackReason`. `relaxedSimd`: default the relaxed-SIMD build where the engine
 * has it; `false` forces the SIMD128 build.
 */
export async function createAttention(options: CreateAttentionOptions = {}): Promise<Attention> {
  return new Attention(await chooseEngine(options));
}
