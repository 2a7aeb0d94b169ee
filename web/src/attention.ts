// The Attention class (one engine bound to a backend and a wasm build) and createAttention,
// which picks the backend and the build and loads it.
import type { AttentionPlanInfo, AttentionRequest, SdpaModule, WebGpuSources } from './wasm/sdpa_core.mjs';
import {
  attentionRequest,
  checkTensor,
  outputDtype,
  tensorDtype,
  withInputTypes,
  checkBoolean,
  checkNumber,
  checkOptionNames,
  checkOut,
  CREATE_ATTENTION_OPTION_NAMES,
  describe,
  GPU_LIMIT_NAMES,
  product,
  requestForShapes,
  SOFTMAX_OPTION_NAMES,
  throwIfError,
  TRACE_OPTION_NAMES,
} from './arguments.js';
import { backendInfos, chooseBackend, type Chosen } from './backends.js';
import { float16Output, fromFloat16 } from './float16.js';
import { InputStream } from './input-stream.js';
import { HeapScope, pagedInFloat32Array, tensorBytes, withHeap } from './heap.js';
import { attentionBackward, referenceAttentionBackward } from './extras/gradients.js';
import type {
  AttentionGradients,
  AttentionGradients64,
  BackwardOptions,
  DropoutOptions,
  UniformOptions,
  ScoreGradients,
  ScoreOptions,
  ScoreResult,
} from './extras/gradient-types.js';
import { dropout, randomUniform, xavierUniform } from './extras/prng.js';
import { attentionScores, attentionScoresBackward } from './extras/scores.js';
import { checkRelaxedSimdOption, relaxedSimdUnavailableReason } from './relaxed-simd.js';
import { checkThreadsOption, coreCount, threadsUnavailableReason } from './threads.js';
import type {
  AttentionOptions,
  AttentionResult,
  AttentionResult64,
  AttentionStages,
  BackendChoice,
  BackendInfo,
  BackendName,
  CpuBackendName,
  CpuTensor,
  CreateAttentionOptions,
  Float16Tensor,
  GpuTensor,
  GpuAttentionResult,
  GpuBufferLike,
  KvCacheOptions,
  MemoryStats,
  OnlineSoftmaxTrace,
  SoftmaxOptions,
  Tensor,
  TensorInput,
  TraceOptions,
  WebGpuSoftmaxTrace,
  WebGpuInfo,
} from './types.js';
import { cacheRequest, KvCache } from './kv-cache.js';
import { loadCoreModule } from './wasm.js';
import {
  acquireGpu,
  checkCpuLocation,
  checkGpuBuffer,
  checkInput,
  checkOutputLocation,
  GPU_USAGE,
  gpuSource,
  inputSource,
  isGpuTensor,
  releaseGpu,
  requestDevice,
  settlesWithin,
  WebGPUError,
  type GpuState,
} from './webgpu.js';

/**
 * A threaded call whose fresh float32 result arrays hold at least this many bytes makes them
 * while its helper threads run the kernel (their page faults then overlap it): below, the call
 * back from wasm costs more than the faults it hides.
 */
const OVERLAPPED_RESULT_BYTES = 64 * 1024;

/** One attention engine bound to a backend. Create with {@link createAttention}. */
export class Attention {
  private currentBackend: BackendName;
  private currentFallbackReason: string | undefined;
  private webgpuReason: string | undefined;
  private gpu: GpuState | undefined;
  /** A pending re-initialization after a device loss (shared by concurrent calls). */
  private gpuInit: Promise<GpuState> | undefined;
  /**
   * Most threads a call runs on: the `threads` option (default every core) within the loaded
   * module's pool; 1 for 'scalar' and 'webgpu', and where WebAssembly threads are unavailable.
   */
  readonly threads: number;
  /** The `threads` option as the core takes it (0: every thread of the pool); the core picks each call's count. */
  private readonly requestedThreads: number;
  /**
   * Whether this instance runs the relaxed-SIMD build of the wasm module, whose 'simd' kernels use
   * fused multiply-adds (see the `relaxedSimd` option).
   */
  readonly relaxedSimd: boolean;
  private disposed = false;
  /**
   * The last plan of the sync path and a copy of the request it is for: a model calls attention
   * with the same shapes layer after layer, and planning costs a crossing into wasm (15–40 µs, as
   * much as 7% of a 128-token call). The core validates the request again when it runs.
   */
  private lastPlan: { request: AttentionRequest; plan: AttentionPlanInfo } | undefined;

  /** @internal */
  constructor(
    private readonly module: SdpaModule,
    chosen: Chosen & { threads: number | undefined; relaxedSimd: boolean },
    private readonly options: CreateAttentionOptions & { backend: BackendChoice },
  ) {
    this.requestedThreads = chosen.threads ?? 0;
    this.threads = Math.min(chosen.threads ?? Infinity, module.maxThreads());
    this.relaxedSimd = chosen.relaxedSimd;
    this.currentBackend = chosen.backend;
    this.currentFallbackReason = chosen.fallbackReason;
    this.webgpuReason = chosen.webgpuReason;
    if (chosen.device) this.gpu = acquireGpu(module, chosen.device, options.gpuLimits, chosen.ownsDevice ?? false);
  }

  /**
   * The backend in use. An `'auto'` instance whose GPU device is lost and cannot be replaced
   * switches to `'simd'` (see `fallbackReason`).
   */
  get backend(): BackendName {
    return this.currentBackend;
  }

  /**
   * Why `'auto'` did not pick (or no longer uses) a faster backend, or why fewer threads run than
   * asked for.
   */
  get fallbackReason(): string | undefined {
    return this.currentFallbackReason;
  }

  /** Every backend this build knows, whether it can run here, and why not. */
  get availableBackends(): BackendInfo[] {
    return backendInfos(this.currentBackend, this.webgpuReason, this.options);
  }

  /** The WebGPU backend's limits and compiled pipelines (undefined on CPU backends). */
  webgpuInfo(): WebGpuInfo | undefined {
    this.checkUsable();
    return this.gpu && !this.gpu.isLost ? this.gpu.context.info() : undefined;
  }

  /**
   * Backend `'webgpu'`: inputs may be GPU-resident tensors `{ buffer, shape, offset? }`, read in
   * place; with `outputLocation: 'gpu'` the output stays in a GPUBuffer (see the option).
   */
  async scaledDotProductAttention(
    query: TensorInput,
    key: TensorInput,
    value: TensorInput,
    options: AttentionOptions & { outputLocation: 'gpu' },
  ): Promise<GpuAttentionResult>;
  async scaledDotProductAttention(query: TensorInput, cache: KvCache, options: AttentionOptions & { outputLocation: 'gpu' }): Promise<GpuAttentionResult>;
  /**
   * Scaled dot-product attention with PyTorch's `scaled_dot_product_attention` semantics.
   *
   * - A query row that may attend to no key (all masked, or hidden by a causal alignment)
   *   returns zeros in `output` and `weights`, never NaN (PyTorch's `_safe_softmax`).
   * - Keys hidden by the mask are never read: NaN/Inf stored there cannot leak into the result.
   *   NaN in a visible input propagates to the rows it touches.
   * - Bad input throws (rejects with) a TypeError or RangeError naming the argument and the
   *   expected shape, before any memory is allocated; the instance stays usable. An unknown
   *   option name (`isCasual`) is a TypeError naming the closest known one.
   */
  async scaledDotProductAttention(query: Tensor, key: Tensor, value: Tensor, options?: AttentionOptions): Promise<AttentionResult>;
  /**
   * Attention of `query` `[B, Hq, Lq, E]` over the tokens a {@link KvCache} holds, read in place.
   * `isCausal: true` aligns to the cache (`'bottom-right'`: the queries are its newest
   * positions); ragged sequences hide their missing keys (as `keyLengths`).
   */
  async scaledDotProductAttention(query: Tensor, cache: KvCache, options?: AttentionOptions): Promise<AttentionResult>;
  /**
   * float16 inputs: computed in float32 (K/V widened exactly; a float16 KV cache read in place by
   * the decode kernel), the output rounded to float16 unless `outputDtype: 'float32'`.
   */
  async scaledDotProductAttention(query: TensorInput, key: TensorInput, value: TensorInput, options: AttentionOptions & { outputDtype: 'float16' }): Promise<AttentionResult<Float16Tensor>>;
  async scaledDotProductAttention(query: TensorInput, cache: KvCache, options: AttentionOptions & { outputDtype: 'float16' }): Promise<AttentionResult<Float16Tensor>>;
  async scaledDotProductAttention(query: Float16Tensor, key: TensorInput, value: TensorInput, options?: AttentionOptions): Promise<AttentionResult<Float16Tensor | Tensor>>;
  async scaledDotProductAttention(query: Float16Tensor, cache: KvCache, options?: AttentionOptions): Promise<AttentionResult<Float16Tensor | Tensor>>;
  async scaledDotProductAttention(query: Tensor | GpuTensor, key: TensorInput, value: TensorInput, options?: AttentionOptions): Promise<AttentionResult>;
  async scaledDotProductAttention(query: Tensor | GpuTensor, cache: KvCache, options?: AttentionOptions): Promise<AttentionResult>;
  async scaledDotProductAttention(query: TensorInput, key: TensorInput, value: TensorInput, options?: AttentionOptions): Promise<AttentionResult<CpuTensor>>;
  async scaledDotProductAttention(query: TensorInput, cache: KvCache, options?: AttentionOptions): Promise<AttentionResult<CpuTensor>>;
  async scaledDotProductAttention(
    query: TensorInput,
    key: TensorInput | KvCache,
    value?: TensorInput | AttentionOptions,
    options?: AttentionOptions,
  ): Promise<AttentionResult<CpuTensor> | GpuAttentionResult> {
    if (key instanceof KvCache) {
      const cacheCallOptions = value as AttentionOptions | undefined;
      if (this.currentBackend === 'webgpu') return this.runWebGpu(query, key, undefined, cacheCallOptions);
      return this.runCpu('scaledDotProductAttention', query, key, undefined, cacheCallOptions);
    }
    if (this.currentBackend === 'webgpu') return this.runWebGpu(query, key, value as TensorInput, options);
    return this.runCpu('scaledDotProductAttention', query, key, value as TensorInput, options);
  }

  /**
   * Synchronous {@link Attention.scaledDotProductAttention}, CPU backends only: on a `'webgpu'`
   * instance it throws (GPU results arrive asynchronously).
   */
  scaledDotProductAttentionSync(query: CpuTensor, key: CpuTensor, value: CpuTensor, options: AttentionOptions & { outputDtype: 'float16' }): AttentionResult<Float16Tensor>;
  scaledDotProductAttentionSync(query: CpuTensor, cache: KvCache, options: AttentionOptions & { outputDtype: 'float16' }): AttentionResult<Float16Tensor>;
  scaledDotProductAttentionSync(query: Tensor, key: CpuTensor, value: CpuTensor, options?: AttentionOptions): AttentionResult;
  /** Synchronous attention over a {@link KvCache} (see the async form), CPU backends only. */
  scaledDotProductAttentionSync(query: Tensor, cache: KvCache, options?: AttentionOptions): AttentionResult;
  /** float16 query: the output is float16 unless `outputDtype: 'float32'` (see the async form). */
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
    if (key instanceof KvCache) return this.runCpu('scaledDotProductAttentionSync', query, key, undefined, value as AttentionOptions | undefined);
    return this.runCpu('scaledDotProductAttentionSync', query, key, value as CpuTensor, options);
  }

  /**
   * A key/value cache for generation on this instance's module: keys `[B, Hkv, maxLength, E]`
   * and values `[B, Hkv, maxLength, Ev]` allocated once (zeroed); `append` writes in place and
   * attention calls read in place. Free it with `cache.dispose()`.
   */
  createKvCache(options: KvCacheOptions): KvCache {
    this.checkUsable();
    if (this.currentBackend !== 'webgpu') return new KvCache(this.module, options);
    if (!this.gpu || this.gpu.isLost) {
      throw new WebGPUError('device-lost', 'the GPU device was lost: make an attention call first (it re-initializes the device), then create the cache');
    }
    return new KvCache(this.module, options, this.gpu);
  }

  /** One call on the CPU backends (on tensors, or on a cache read in place); `where` names the public method in errors. */
  private runCpu(where: string, queryInput: TensorInput, key: TensorInput | KvCache, valueInput: TensorInput | undefined, options?: AttentionOptions): AttentionResult<CpuTensor> {
    this.checkUsable();
    checkCpuLocation(this.currentBackend, { query: queryInput, key, value: valueInput }, options?.outputLocation);
    const query = queryInput as CpuTensor, value = valueInput as CpuTensor | undefined;
    const cache = key instanceof KvCache ? this.ownCache(key) : undefined;
    const request = cache ? cacheRequest(where, query, cache, options) : attentionRequest(where, query, key as CpuTensor, value!, options, true);
    request.threads = this.requestedThreads;
    const plan = this.planOnce(request);
    const outputElements = product(plan.outputShape);
    const dtype = outputDtype(options?.outputDtype, tensorDtype(query));
    const out = checkOut(options?.out, outputElements, plan.outputShape, dtype);
    const weightsElements = request.returnWeights ? product(plan.weightsShape) : 0;
    const returnLse = checkBoolean('returnLogSumExp', options?.returnLogSumExp);
    const lseShape = plan.outputShape.slice(0, -1);
    const lseElements = returnLse ? product(lseShape) : 0;
    const scoresElements = request.returnScores !== 'none' ? product(plan.weightsShape) : 0;
    const cpuBackend = this.cpuBackend;
    const workspaceBytes = plan.workspaceBytes[cpuBackend];
    HeapScope.checkTotal(
      inputBytes(query, cache ? undefined : (key as Tensor), value, options) + 4 * (outputElements + weightsElements + lseElements + scoresElements) + workspaceBytes,
      'this attention call',
    );
    return withHeap(this.module, (heap) => {
      // Threaded: large float32 inputs are copied in while the helper threads start on them.
      const stream = this.threads > 1 && cpuBackend === 'simd' && !cache && InputStream.worthwhile(query, key as CpuTensor, value!)
        ? new InputStream(heap, this.module, query as Tensor, key as Tensor, value as Tensor)
        : undefined;
      const pointers = this.copyInputs(heap, query, cache ?? (key as Tensor), value, options, stream);
      pointers.output = heap.alloc(4 * outputElements, 'output');
      if (request.returnWeights) pointers.weights = heap.alloc(4 * weightsElements, 'weights');
      if (returnLse) pointers.lse = heap.alloc(4 * lseElements, 'logSumExp');
      if (scoresElements) pointers.scores = heap.alloc(4 * scoresElements, 'scores');
      pointers.workspace = heap.alloc(workspaceBytes, `the ${cpuBackend} workspace`);
      // While the helper threads run the kernel: the streamed inputs' copy, then the float32
      // result arrays.
      const lengths = { output: dtype === 'float32' && !out ? outputElements : 0, weights: weightsElements, lse: lseElements, scores: scoresElements };
      const fresh: Partial<Record<keyof typeof lengths, Float32Array>> = {};
      const allocate = this.threads > 1 && 4 * Object.values(lengths).reduce((a, b) => a + b, 0) >= OVERLAPPED_RESULT_BYTES;
      let overlappedError: unknown;
      const whileHelpersRun = () => {
        try {
          stream?.copy();
          if (!allocate) return;
          for (const [name, length] of Object.entries(lengths) as [keyof typeof lengths, number][]) {
            if (length > 0) fresh[name] = pagedInFloat32Array(length);
          }
        } catch (error) {
          overlappedError = error; // thrown once the kernel is done: an exception must not unwind through wasm
        }
      };
      throwIfError(this.module.runAttention(request, cpuBackend, pointers, stream || allocate ? whileHelpersRun : undefined));
      if (overlappedError) throw overlappedError;
      const shape = [...plan.outputShape];
      const result: AttentionResult<CpuTensor> = {
        output: dtype === 'float16'
          ? float16Output(heap.viewFloat32(pointers.output, outputElements), shape, out as Uint16Array | undefined, query.data)
          : { data: heap.readFloat32(pointers.output, outputElements, (out as Float32Array | undefined) ?? fresh.output), shape },
      };
      if (request.returnWeights) {
        result.weights = { data: heap.readFloat32(pointers.weights!, weightsElements, fresh.weights), shape: [...plan.weightsShape] };
      }
      if (returnLse) result.logSumExp = { data: heap.readFloat32(pointers.lse!, lseElements, fresh.lse), shape: lseShape };
      if (scoresElements) result.scores = { data: heap.readFloat32(pointers.scores!, scoresElements, fresh.scores), shape: [...plan.weightsShape] };
      return result;
    });
  }

  /**
   * Every stage of one attention call (QKᵀ, ·scale, +mask, softmax, ·V), computed by the scalar
   * reference in float32 whatever the backend: for explaining small examples. Takes the same
   * arguments as {@link Attention.scaledDotProductAttention}; materializes `[..., Lq, Lk]` four times.
   */
  async explain(query: Tensor, key: Tensor, value: Tensor, options?: AttentionOptions): Promise<AttentionStages> {
    this.checkUsable();
    const request = attentionRequest('explain', query, key, value, options);
    const plan = this.module.planAttention(request);
    throwIfError(plan.error);
    const n = product(plan.weightsShape);
    const outputElements = product(plan.outputShape);
    HeapScope.checkTotal(inputBytes(query, key, value, options) + 4 * (4 * n + outputElements) + plan.workspaceBytes.scalar, 'explain');
    return withHeap(this.module, (heap) => {
      const pointers = this.copyInputs(heap, query, key, value, options);
      const stages = ['scores', 'scaledScores', 'maskedScores', 'weights'] as const;
      for (const stage of stages) pointers[stage] = heap.alloc(4 * n, stage);
      pointers.output = heap.alloc(4 * outputElements, 'output');
      pointers.workspace = heap.alloc(plan.workspaceBytes.scalar, 'the reference workspace');
      throwIfError(this.module.explainAttention(request, pointers));
      const read = (name: (typeof stages)[number]): Tensor => ({ data: heap.readFloat32(pointers[name]!, n), shape: plan.weightsShape });
      return {
        scores: read('scores'),
        scaledScores: read('scaledScores'),
        maskedScores: read('maskedScores'),
        weights: read('weights'),
        output: { data: heap.readFloat32(pointers.output, outputElements), shape: plan.outputShape },
      };
    });
  }

  /**
   * One query row's online softmax, traced from the fused SIMD kernel itself (on one thread,
   * whatever this instance's backend): after each key tile, the running max, sum and
   * unnormalized accumulator, and the call's output from the same run, so the trace ends at
   * exactly the library's output row. Takes the attention options plus `batch`, `head`, `row`.
   */
  traceOnlineSoftmax(query: Tensor, key: Tensor, value: Tensor, options: TraceOptions): OnlineSoftmaxTrace {
    this.checkUsable();
    if (typeof options !== 'object' || options === null) throw new TypeError(`options must be an object with a row; got ${describe(options)}`);
    checkOptionNames('traceOnlineSoftmax', options, TRACE_OPTION_NAMES);
    const { batch = 0, head = 0, row, ...attentionOptions } = options;
    for (const [name, n] of [['batch', batch], ['head', head], ['row', row]] as const) checkNumber(name, n);
    const request = attentionRequest('traceOnlineSoftmax', query, key, value, attentionOptions);
    const plan = this.module.planAttention(request);
    throwIfError(plan.error);
    const outputElements = product(plan.outputShape);
    const Ev = plan.outputShape[plan.outputShape.length - 1]!;
    const Lk = plan.weightsShape[plan.weightsShape.length - 1]!;
    const stepFloats = 3 + Ev;
    const maxSteps = Math.ceil(Lk / TRACE_TILE_KEYS);
    const Lq = plan.weightsShape[plan.weightsShape.length - 2]!;
    const mapShape: [number, number] = [Math.ceil(Lq / TRACE_BLOCK_ROWS), maxSteps];
    HeapScope.checkTotal(inputBytes(query, key, value, attentionOptions) + 4 * (outputElements + maxSteps * stepFloats) + mapShape[0] * mapShape[1] + plan.workspaceBytes.trace, 'traceOnlineSoftmax');
    return withHeap(this.module, (heap) => {
      const pointers = this.copyInputs(heap, query, key, value, attentionOptions);
      pointers.output = heap.alloc(4 * outputElements, 'output');
      pointers.steps = heap.alloc(4 * Math.max(1, maxSteps * stepFloats), 'the trace');
      pointers.visited = heap.copyIn(new Uint8Array(Math.max(1, mapShape[0] * mapShape[1])), 'the tile map');
      pointers.workspace = heap.alloc(plan.workspaceBytes.trace, 'the trace workspace');
      const traced = this.module.traceOnlineSoftmax(request, pointers, batch, head, row);
      throwIfError(traced.error);
      const data = heap.readFloat32(pointers.steps, traced.steps * stepFloats);
      const steps = Array.from({ length: traced.steps }, (_, n) => {
        const step = data.subarray(n * stepFloats, (n + 1) * stepFloats);
        return { firstKey: step[0]!, max: step[1]!, sum: step[2]!, accumulator: step.slice(3) };
      });
      const visited = this.module.HEAPU8.slice(pointers.visited, pointers.visited + mapShape[0] * mapShape[1]);
      return {
        tileKeys: TRACE_TILE_KEYS,
        steps,
        tileMap: { blockRows: TRACE_BLOCK_ROWS, tileKeys: TRACE_TILE_KEYS, shape: mapShape, visited },
        output: { data: heap.readFloat32(pointers.output, outputElements), shape: plan.outputShape },
      };
    });
  }

  /**
   * One query row's online softmax, traced from the WebGPU flash kernel ('webgpu' instances):
   * after each key tile of the kernel's size on this device, the running max, sum and
   * unnormalized accumulator, and the output of the same run. Takes the options of
   * {@link Attention.traceOnlineSoftmax}; the call must run in one dispatch (RangeError otherwise).
   */
  async traceWebGpuOnlineSoftmax(query: Tensor, key: Tensor, value: Tensor, options: TraceOptions): Promise<WebGpuSoftmaxTrace> {
    this.checkUsable();
    if (this.currentBackend !== 'webgpu') {
      throw new TypeError(`sdpa-web: traceWebGpuOnlineSoftmax runs on 'webgpu' instances; this one uses '${this.currentBackend}' (traceOnlineSoftmax traces the SIMD kernel)`);
    }
    if (typeof options !== 'object' || options === null) throw new TypeError(`options must be an object with a row; got ${describe(options)}`);
    checkOptionNames('traceWebGpuOnlineSoftmax', options, TRACE_OPTION_NAMES);
    const { batch = 0, head = 0, row, ...attentionOptions } = options;
    for (const [name, n] of [['batch', batch], ['head', head], ['row', row]] as const) checkNumber(name, n);
    const request = attentionRequest('traceWebGpuOnlineSoftmax', query, key, value, attentionOptions);
    throwIfError(this.module.planAttention(request).error);
    const gpu = await this.liveGpu();
    if (!gpu) throw new WebGPUError('unavailable', `no WebGPU device to trace on: ${this.currentFallbackReason ?? 'it fell back to SIMD'}`);
    const layout = gpu.context.traceLayout(request);
    throwIfError(layout.error);
    if (!('floats' in layout)) throw new Error('unreachable');
    const result = await this.runWebGpu(query, key, value, attentionOptions, { batch, head, row, floats: layout.floats });
    if (!('trace' in result) || !result.trace) throw new Error('unreachable: a trace call returns its trace');
    const { output, trace } = result;
    const Ev = output.shape[output.shape.length - 1]!;
    const steps: WebGpuSoftmaxTrace['steps'] = [];
    for (let at = 0; at < trace.length; at += layout.stride) {
      if (trace[at] === 0) continue; // a tile the row's workgroup skipped or where it saw no key
      let sum = 0;
      for (let lane = 0; lane < layout.lanes; lane++) sum += trace[at + 2 + lane]!;
      steps.push({ firstKey: trace[at]! - 1, max: trace[at + 1]!, sum: Math.fround(sum), accumulator: trace.slice(at + 2 + layout.lanes, at + 2 + layout.lanes + Ev) });
    }
    // float32 inputs (attentionRequest took no others), so a float32 output.
    return { tileKeys: layout.tileKeys, kernel: layout.kernel, steps, output: output as Tensor };
  }

  /**
   * The float64 reference (the oracle every backend is tested against): same arguments and
   * semantics as {@link Attention.scaledDotProductAttention}, computed in double precision from
   * the float32 inputs. Always returns the weights.
   */
  referenceAttention(queryInput: CpuTensor, keyInput: CpuTensor, valueInput: CpuTensor, options?: AttentionOptions): AttentionResult64 {
    this.checkUsable();
    const [query, key, value] = widenedInputs(queryInput, keyInput, valueInput);
    const request = attentionRequest('referenceAttention', query, key, value, options);
    const plan = this.module.planAttention(request);
    throwIfError(plan.error);
    const outputElements = product(plan.outputShape);
    const weightsElements = product(plan.weightsShape);
    const scoresElements = request.returnScores !== 'none' ? weightsElements : 0;
    HeapScope.checkTotal(
      inputBytes(query, key, value, options) + 8 * (outputElements + weightsElements + scoresElements) + plan.workspaceBytes.reference64,
      'referenceAttention',
    );
    return withHeap(this.module, (heap) => {
      const pointers = this.copyInputs(heap, query, key, value, options);
      pointers.output = heap.alloc(8 * outputElements, 'output');
      pointers.weights = heap.alloc(8 * weightsElements, 'weights');
      const scoresName = request.returnScores === 'none' ? undefined : (`${request.returnScores}Scores` as const);
      if (scoresName) pointers[scoresName] = heap.alloc(8 * scoresElements, 'scores');
      pointers.workspace = heap.alloc(plan.workspaceBytes.reference64, 'the reference workspace');
      throwIfError(this.module.referenceAttention64(request, pointers));
      const result: AttentionResult64 = {
        output: { data: heap.readFloat64(pointers.output, outputElements), shape: plan.outputShape },
        weights: { data: heap.readFloat64(pointers.weights, weightsElements), shape: plan.weightsShape },
      };
      if (scoresName) result.scores = { data: heap.readFloat64(pointers[scoresName]!, scoresElements), shape: plan.weightsShape };
      return result;
    });
  }

  /**
   * Softmax over the last axis of `x` (any rank ≥ 1), numerically stable (subtracts each row's
   * max, so `[100, 200, 300]` does not overflow). `temperature` T divides the inputs first.
   * A row of `-Infinity` gives zeros.
   */
  softmax(x: Tensor, options: SoftmaxOptions = {}): Tensor {
    this.checkUsable();
    checkTensor('x', x);
    if (typeof options !== 'object' || options === null) throw new TypeError(`options must be an object { temperature }; got ${describe(options)}`);
    checkOptionNames('softmax', options, SOFTMAX_OPTION_NAMES);
    const temperature = checkNumber('temperature', options.temperature ?? 1);
    throwIfError(this.module.softmax(x.shape, temperature, undefined));
    return withHeap(this.module, (heap) => {
      const pointers = { x: heap.copyIn(x.data, 'x'), output: heap.alloc(x.data.byteLength, 'output') };
      throwIfError(this.module.softmax(x.shape, temperature, pointers));
      return { data: heap.readFloat32(pointers.output, x.data.length), shape: [...x.shape] };
    });
  }

  /**
   * Matrix product `a · b`: a `[..., M, K]` with b `[K, N]` (one matrix for every leading index,
   * e.g. a projection Q = X·W_Q) or b `[..., K, N]` with the same leading dims as a.
   */
  matmul(a: Tensor, b: Tensor): Tensor {
    this.checkUsable();
    checkTensor('a', a);
    checkTensor('b', b);
    const plan = this.module.matmul(a.shape, b.shape, undefined);
    throwIfError(plan.error);
    const n = product(plan.outputShape);
    HeapScope.checkTotal(a.data.byteLength + b.data.byteLength + 4 * n, 'matmul');
    return withHeap(this.module, (heap) => {
      const pointers = { a: heap.copyIn(a.data, 'a'), b: heap.copyIn(b.data, 'b'), output: heap.alloc(4 * n, 'output') };
      this.module.matmul(a.shape, b.shape, pointers);
      return { data: heap.readFloat32(pointers.output, n), shape: plan.outputShape };
    });
  }

  /**
   * Backward pass of {@link Attention.scaledDotProductAttention}: given `dOutput` = ∂L/∂output
   * (the output's shape), returns ∂L/∂query, ∂L/∂key, ∂L/∂value (and ∂L/∂attnMask for an additive
   * mask with `returnAttnMaskGrad`). Pass the forward's options (mask, `isCausal`, `scale`,
   * `enableGqa`). On the `'simd'` backend the weights are recomputed tile by tile from the
   * forward's per-row log-sum-exp (FlashAttention style, no `[Lq, Lk]` matrix): pass `output`
   * and `logSumExp` from a forward call with `returnLogSumExp: true` to skip recomputing them.
   *
   * Semantics match the forward: hidden keys are never read and get no gradient from rows they
   * are hidden from; rows that see no key have zero gradients; with GQA, dKey/dValue are summed
   * over the query heads sharing a key/value head. Bad input throws a TypeError/RangeError.
   *
   * @example
   * ```ts
   * const fwd = attn.scaledDotProductAttentionSync(q, k, v, { isCausal: true, returnLogSumExp: true });
   * const { dQuery, dKey, dValue } = attn.scaledDotProductAttentionBackward(q, k, v, dOut, {
   *   isCausal: true, output: fwd.output, logSumExp: fwd.logSumExp,
   * });
   * ```
   */
  scaledDotProductAttentionBackward(query: Tensor, key: Tensor, value: Tensor, dOutput: Tensor, options?: BackwardOptions): AttentionGradients {
    this.checkUsable();
    if ((key as unknown) instanceof KvCache) throw new TypeError('scaledDotProductAttentionBackward takes key and value tensors, not a KvCache (the backward is not supported on a cache)');
    return attentionBackward(this.module, this.cpuBackend, query, key, value, dOutput, options);
  }

  /** The float64 analytic gradients (the oracle the backward kernels are tested against). */
  referenceAttentionBackward(query: Tensor, key: Tensor, value: Tensor, dOutput: Tensor, options?: BackwardOptions): AttentionGradients64 {
    this.checkUsable();
    return referenceAttentionBackward(this.module, query, key, value, dOutput, options);
  }

  /**
   * A `[rows, cols]` Xavier/Glorot-uniform matrix: U(−a, a) with a = √(6 / (rows + cols)),
   * element i (row-major) from draw `offset + i` of the mulberry32 stream `seed` (README, "Random numbers").
   */
  xavierUniform(shape: readonly [number, number], seed: number, offset = 0): Tensor {
    this.checkUsable();
    return xavierUniform(this.module, shape, seed, offset);
  }

  /**
   * A tensor of `shape` drawn from U(low, high) (default U(−1, 1)): element i (row-major) is
   * low + u·(high − low), u from draw `offset + i` of the mulberry32 stream `seed`, rounded once
   * to float32. The same seed gives the same numbers on every platform.
   */
  randomUniform(shape: readonly number[], seed: number, options?: UniformOptions): Tensor {
    this.checkUsable();
    return randomUniform(this.module, shape, seed, options);
  }

  /**
   * Inverted dropout: element i (row-major) is zeroed when draw i of the mulberry32 stream
   * `seed` is < p, else scaled by 1/(1 − p). Deterministic for a seed, on every platform.
   */
  dropout(x: Tensor, options: DropoutOptions): Tensor {
    this.checkUsable();
    return dropout(this.module, x, options);
  }

  /**
   * Attention scores by one of four score functions (scaled dot-product, dot, multiplicative
   * (Luong), additive (Bahdanau)) and their row softmax, for side-by-side comparison. query
   * `[..., Lq, Dq]`, key `[..., Lk, Dk]`; computed in float32 by plain loops.
   */
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

  /**
   * Releases the instance: its share of the GPU pipelines, and a device it requested itself (a
   * `gpuDevice` you passed stays yours). Later calls, including a second `dispose()`, throw.
   */
  dispose(): void {
    this.checkUsable();
    this.disposed = true;
    if (this.gpu) releaseGpu(this.gpu);
    this.gpu = undefined;
  }

  /**
   * The live device, re-initialized after a loss: a new device from `gpu`/navigator.gpu; when
   * none can be had an `'auto'` instance falls back to SIMD (undefined), a `'webgpu'` one rejects.
   */
  private async liveGpu(): Promise<GpuState | undefined> {
    if (this.gpu && !this.gpu.isLost) return this.gpu;
    this.gpuInit ??= (async () => {
      const lost = this.gpu;
      this.gpu = undefined;
      if (lost) releaseGpu(lost);
      const got = await requestDevice(gpuSource(this.options), this.options.backend === 'webgpu');
      if (!got.device) throw new WebGPUError('unavailable', `the GPU device was lost and no new one can be had: ${got.reason}`);
      if (this.disposed) {
        got.device.destroy();
        throw new Error('sdpa-web: this Attention instance was disposed');
      }
      return acquireGpu(this.module, got.device, this.options.gpuLimits, true);
    })().finally(() => {
      this.gpuInit = undefined;
    });
    try {
      this.gpu = await this.gpuInit;
      return this.gpu;
    } catch (error) {
      if (this.options.backend !== 'auto' || !(error instanceof WebGPUError)) throw error;
      this.currentBackend = 'simd';
      this.currentFallbackReason = error.message;
      this.webgpuReason = error.message;
      return undefined;
    }
  }

  /**
   * One call on the WebGPU backend, the C++ core submitting: query/key/value written to the GPU
   * straight from the caller's arrays (or read in place: GPU-resident tensors, a GPU KV cache),
   * the output read back straight into the result array (or left on the GPU); masks and document
   * ids go through the wasm heap.
   */
  private async runWebGpu(
    query: TensorInput,
    key: TensorInput | KvCache,
    value: TensorInput | undefined,
    options?: AttentionOptions,
    trace?: { batch: number; head: number; row: number; floats: number },
  ): Promise<(AttentionResult<CpuTensor> & { trace?: Float32Array }) | GpuAttentionResult> {
    this.checkUsable();
    const where = trace ? 'traceWebGpuOnlineSoftmax' : 'scaledDotProductAttention';
    const cache = key instanceof KvCache ? this.ownCache(key, true) : undefined;
    let request: AttentionRequest;
    if (cache) {
      request = cacheRequest(where, query, cache, options);
    } else {
      checkInput('query', query);
      checkInput('key', key as TensorInput);
      checkInput('value', value!);
      request = withInputTypes(requestForShapes(where, query, (key as TensorInput).shape, value!.shape, options), query, key as TensorInput, value!);
    }
    const plan = this.module.planAttention(request);
    throwIfError(plan.error);
    const outputElements = product(plan.outputShape);
    const onGpu = checkOutputLocation(options?.outputLocation) === 'gpu';
    if (onGpu && (request.returnWeights || request.returnScores !== 'none' || options?.returnLogSumExp || trace)) {
      throw new TypeError("outputLocation 'gpu' returns the output only: returnWeights, returnScores and returnLogSumExp need outputLocation 'cpu'");
    }
    const dtype = outputDtype(options?.outputDtype, tensorDtype(query));
    // A float16 output on the GPU is packed halves, written in whole 4-byte words.
    const outputBytes = dtype === 'float16' ? 4 * Math.ceil(outputElements / 2) : 4 * outputElements;
    const outBuffer = onGpu && options?.out ? checkGpuBuffer('out', options.out, GPU_USAGE.STORAGE | GPU_USAGE.COPY_DST) : undefined;
    if (outBuffer && outBuffer.size < outputBytes) {
      throw new RangeError(`out is a ${outBuffer.size}-byte GPUBuffer but the ${dtype === 'float16' ? 'float16 ' : ''}output [${plan.outputShape.join(', ')}] needs ${outputBytes} bytes`);
    }
    for (const [name, input] of [['query', query], ['key', key], ['value', value]] as const) {
      if (outBuffer && isGpuTensor(input) && input.buffer === outBuffer) {
        throw new TypeError(`out is also the ${name}'s buffer: WebGPU cannot read and write one buffer in a dispatch; write to another buffer`);
      }
    }
    const out = onGpu ? undefined : checkOut(options?.out, outputElements, plan.outputShape, dtype);
    const weightsElements = request.returnWeights ? product(plan.weightsShape) : 0;
    const scoresElements = request.returnScores !== 'none' ? product(plan.weightsShape) : 0;
    HeapScope.checkTotal(inputBytes(undefined, undefined, undefined, options) + 4 * (weightsElements + scoresElements + (trace?.floats ?? 0)), 'this attention call');
    const gpu = await this.liveGpu();
    if (!gpu) {
      if (trace) throw new WebGPUError('unavailable', `no WebGPU device to trace on: ${this.currentFallbackReason ?? 'it fell back to SIMD'}`);
      return this.runCpu('scaledDotProductAttention', query, key, value, options); // fell back
    }
    if (cache && cache.gpu !== gpu) cache.checkUsable(); // the device was lost and replaced: the cache went with it
    const heap = new HeapScope(this.module);
    let job = 0;
    let created: GpuBufferLike | undefined;
    try {
      const sources: WebGpuSources = {
        query: inputSource(query),
        key: cache ? { buffer: cache.keyBuffer!, offset: 0 } : inputSource(key as TensorInput),
        value: cache ? { buffer: cache.valueBuffer!, offset: 0 } : inputSource(value!),
      };
      const pointers: Record<string, number> = {};
      if (options?.attnMask) pointers.mask = heap.copyIn(options.attnMask.data, 'attnMask');
      if (options?.queryDocuments) pointers.queryDocuments = heap.copyIn(options.queryDocuments.data, 'queryDocuments');
      if (options?.keyDocuments) pointers.keyDocuments = heap.copyIn(options.keyDocuments.data, 'keyDocuments');
      let output: Float32Array | undefined;
      if (onGpu) {
        const target = outBuffer ?? (created = (gpu.device as unknown as GpuDeviceApi).createBuffer({
          size: Math.max(4, outputBytes),
          usage: GPU_USAGE.STORAGE | GPU_USAGE.COPY_SRC | GPU_USAGE.COPY_DST,
        }));
        sources.output = { buffer: target, offset: 0, float16: dtype === 'float16' };
      } else {
        // A float16 output is read back as float32 and rounded here (toFloat16: ties to even).
        output = dtype === 'float32' && out ? (out as Float32Array) : new Float32Array(outputElements);
        sources.output = { array: output };
      }
      if (request.returnWeights) pointers.weights = heap.alloc(4 * weightsElements, 'weights');
      if (scoresElements) pointers.scores = heap.alloc(4 * scoresElements, 'scores');
      if (trace) pointers.trace = heap.copyIn(new Float32Array(trace.floats), 'the trace');
      let started: ReturnType<typeof gpu.context.run>;
      try {
        started = trace ? gpu.context.trace(request, pointers, trace.batch, trace.head, trace.row, sources) : gpu.context.run(request, pointers, sources);
      } catch (cause) {
        // The device threw part-way through submitting (Chromium throws a RangeError from
        // createBuffer for an allocation it cannot make): undo the partial call, type the error.
        gpu.context.abandon();
        const kind = cause instanceof RangeError ? 'out-of-memory' : 'internal';
        throw new WebGPUError(kind, `submitting the work failed: ${String(cause)}`, { cause });
      }
      throwIfError(started.error);
      if (!('promise' in started)) throw new Error('unreachable');
      job = started.job;
      let results: unknown[];
      try {
        results = await Promise.race([started.promise, gpu.lost]);
      } catch (cause) {
        if (cause instanceof WebGPUError) throw cause;
        // mapAsync rejects when the device is lost (or destroyed) under it.
        if (await settlesWithin(gpu.lost, 200)) {
          throw new WebGPUError('device-lost', `the GPU device was lost during the call: ${String(cause)}`, { cause });
        }
        throw new WebGPUError('internal', `reading the result back failed: ${String(cause)}`, { cause });
      }
      if (gpu.deleted) throw new Error('sdpa-web: this Attention instance was disposed during the call');
      if (gpu.isLost) throw new WebGPUError('device-lost', 'the GPU device was lost during the call');
      const fault = gpu.context.finish(job, results);
      if (fault) throw new WebGPUError(fault.kind, fault.message);
      if (onGpu) {
        const buffer = outBuffer ?? created!;
        created = undefined; // the caller's now
        return { output: dtype === 'float16' ? { buffer, shape: plan.outputShape, dtype } : { buffer, shape: plan.outputShape } };
      }
      const result: AttentionResult<CpuTensor> & { trace?: Float32Array } = {
        output: dtype === 'float16'
          ? float16Output(output!, plan.outputShape, out as Uint16Array | undefined, isGpuTensor(query) ? undefined : query.data)
          : { data: output!, shape: plan.outputShape },
      };
      if (trace) result.trace = heap.readFloat32(pointers.trace!, trace.floats);
      if (request.returnWeights) {
        result.weights = { data: heap.readFloat32(pointers.weights!, weightsElements), shape: plan.weightsShape };
      }
      if (scoresElements) result.scores = { data: heap.readFloat32(pointers.scores!, scoresElements), shape: plan.weightsShape };
      return result;
    } finally {
      created?.destroy();
      if (job && !gpu.deleted) gpu.context.release(job);
      heap.release();
    }
  }

  /** planAttention, or the last plan when `request` equals its request (see lastPlan). Throws its error. */
  private planOnce(request: AttentionRequest): AttentionPlanInfo {
    const last = this.lastPlan;
    if (last && sameRequest(last.request, request)) return last.plan;
    const plan = this.module.planAttention(request);
    throwIfError(plan.error);
    // Copies: the caller may change its shape arrays before the next call.
    const copy = { ...request, queryShape: [...request.queryShape], keyShape: [...request.keyShape], valueShape: [...request.valueShape], maskShape: [...request.maskShape] };
    this.lastPlan = { request: copy, plan };
    return plan;
  }

  /** The CPU kernels for CPU-only work (the sync API, the backward): 'scalar' on a scalar instance, else 'simd'. */
  private get cpuBackend(): CpuBackendName {
    return this.currentBackend === 'scalar' ? 'scalar' : 'simd';
  }

  private checkUsable(): void {
    if (this.disposed) throw new Error('sdpa-web: this Attention instance was disposed');
  }

  /** `cache`, checked usable and made by this instance's module (whose heap holds it). */
  private ownCache(cache: KvCache, onGpu = false): KvCache {
    if (!cache.gpu) cache.checkUsable(); // a GPU cache of a lost device is checked once the device is live
    if (onGpu !== Boolean(cache.gpu)) {
      throw new TypeError(
        onGpu
          ? "sdpa-web: this KvCache is in wasm memory (a CPU backend's); backend 'webgpu' reads a cache made by its own createKvCache"
          : `sdpa-web: this KvCache is in GPU memory (backend 'webgpu'); this instance uses '${this.currentBackend}': create the cache with its createKvCache`,
      );
    }
    if (cache.module !== this.module) {
      throw new TypeError('sdpa-web: this KvCache belongs to another wasm module (an Attention instance with another build): create it with this instance\'s createKvCache');
    }
    return cache;
  }

  /** The inputs' heap addresses: copied now, streamed in during the kernel (`stream`), or a cache's own. */
  private copyInputs(heap: HeapScope, query: CpuTensor, key: CpuTensor | KvCache, value: CpuTensor | undefined, options?: AttentionOptions, stream?: InputStream): Record<string, number> {
    const pointers: Record<string, number> = stream
      ? { query: stream.query, key: stream.key, value: stream.value, inputArrival: stream.record }
      : {
          query: heap.copyIn(query.data, 'query'),
          key: key instanceof KvCache ? key.keyAddress : heap.copyIn(key.data, 'key'),
          value: key instanceof KvCache ? key.valueAddress : heap.copyIn(value!.data, 'value'),
        };
    if (options?.attnMask) pointers.mask = heap.copyIn(options.attnMask.data, 'attnMask');
    if (options?.queryDocuments) pointers.queryDocuments = heap.copyIn(options.queryDocuments.data, 'queryDocuments');
    if (options?.keyDocuments) pointers.keyDocuments = heap.copyIn(options.keyDocuments.data, 'keyDocuments');
    return pointers;
  }
}

/** The GPUDevice call the WebGPU branch makes itself (an output buffer the caller will own). */
interface GpuDeviceApi {
  createBuffer(descriptor: { size: number; usage: number }): GpuBufferLike;
}

/** Keys per tile and query rows per block of the SIMD kernel (cpp/cpu/attention_f32_simd128.h). */
const TRACE_TILE_KEYS = 64;
const TRACE_BLOCK_ROWS = 32;

/** Float32 copies of float16 attention inputs (exact), float32 ones as they are. */
function widenedInputs(...tensors: CpuTensor[]): Tensor[] {
  return tensors.map((tensor, i) => {
    checkTensor(['query', 'key', 'value'][i]!, tensor, 'input');
    return tensorDtype(tensor) === 'float16' ? { data: fromFloat16(tensor.data as Uint16Array), shape: tensor.shape } : (tensor as Tensor);
  });
}

/** Bytes of a call's inputs in the heap: tensors, the mask, document ids. */
export function inputBytes(query: CpuTensor | undefined, key: CpuTensor | undefined, value: CpuTensor | undefined, options?: AttentionOptions): number {
  return tensorBytes([query, key, value, options?.attnMask, options?.queryDocuments, options?.keyDocuments]);
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Every field of the two requests equal (shapes element by element), so a field added to the
 * request can never be left out of the comparison and reuse a plan made without it.
 */
function sameRequest(a: AttentionRequest, b: AttentionRequest): boolean {
  const keys = Object.keys(a) as (keyof AttentionRequest)[];
  if (keys.length !== Object.keys(b).length) return false;
  for (const key of keys) {
    const x = a[key], y = b[key];
    if (Array.isArray(x) && Array.isArray(y) ? !sameShape(x, y) : x !== y) return false;
  }
  return true;
}

function joinReasons(...reasons: (string | undefined)[]): string | undefined {
  const present = reasons.filter((r): r is string => Boolean(r));
  return present.length ? present.join('; ') : undefined;
}

/**
 * The core's checks of the attention modules' configurations and inputs (extras/modules.ts):
 * pure functions of the wasm module, the same in every build.
 */
export type ModuleChecks = Pick<
  SdpaModule,
  'planSelfAttention' | 'checkSelfAttentionInput' | 'checkSelfAttentionWeights' | 'planMultihead' | 'checkMultiheadInputs'
>;

/**
 * Creates an attention engine. `backend: 'auto'` (default) picks the fastest backend available
 * here and reports why it fell back in `fallbackReason`; naming an unavailable backend rejects.
 * `threads` (simd backend): default every core where WebAssembly threads can run (Node; browsers
 * with cross-origin isolation), else 1 with the reason in `fallbackReason`; `threads: 1` forces
 * the single-thread module. More threads than cores are capped at the core count.
 * `relaxedSimd`: default the relaxed-SIMD build (fused multiply-add) where the engine has it;
 * `false` forces the SIMD128 build.
 */
export async function createAttention(options: CreateAttentionOptions = {}): Promise<Attention> {
  return (await createEngine(options)).attention;
}

/** {@link createAttention}, plus the {@link ModuleChecks} of the module the engine runs on. */
export async function createEngine(options: CreateAttentionOptions = {}): Promise<{ attention: Attention; checks: ModuleChecks }> {
  if (typeof options !== 'object' || options === null) throw new TypeError(`options must be an object; got ${describe(options)}`);
  checkOptionNames('createAttention', options, CREATE_ATTENTION_OPTION_NAMES);
  const { gpuLimits } = options;
  if (typeof gpuLimits === 'object' && gpuLimits !== null) {
    checkOptionNames('createAttention options.gpuLimits', gpuLimits, GPU_LIMIT_NAMES);
    if (gpuLimits.shaderF16 !== undefined) checkBoolean('gpuLimits.shaderF16', gpuLimits.shaderF16);
  }
  const backend = options.backend ?? 'auto';
  const threads = checkThreadsOption(options.threads);
  const relaxedRequested = checkRelaxedSimdOption(options.relaxedSimd);
  const chosen = await chooseBackend(backend, options);
  const normalized = { ...options, backend };
  const noRelaxed = relaxedRequested === false ? undefined : relaxedSimdUnavailableReason();
  const relaxedSimd = relaxedRequested !== false && !noRelaxed;
  // Saying why only matters when relaxed SIMD was asked for.
  const relaxedReason = relaxedRequested && noRelaxed ? `running the SIMD128 build: ${noRelaxed}` : undefined;
  const engine = async (build: { threads: boolean; relaxedSimd: boolean }, reason?: string) => {
    const module = await loadCoreModule(build);
    const fallbackReason = joinReasons(chosen.fallbackReason, relaxedReason, reason);
    return { attention: new Attention(module, { ...chosen, threads, relaxedSimd, fallbackReason }, normalized), checks: module };
  };
  // The pthreads module only for the simd backend, and only when its pool would have more than one thread.
  if (chosen.backend !== 'simd' || threads === 1 || coreCount() === 1) return engine({ threads: false, relaxedSimd });
  const unavailable = threadsUnavailableReason();
  if (unavailable) return engine({ threads: false, relaxedSimd }, `running on 1 thread: ${unavailable}`);
  try {
    return await engine({ threads: true, relaxedSimd });
  } catch (cause) {
    return engine({ threads: false, relaxedSimd }, `running on 1 thread: the threads module failed to load (${String(cause)})`);
  }
}
