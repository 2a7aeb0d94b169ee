/**
 * sdpa-web: scaled dot-product attention, `softmax(QKᵀ·scale + M)·V`, computed by a C++ core
 * compiled to WebAssembly (SIMD128). This file is the package's public API and the only code
 * that loads the wasm module.
 *
 * @example
 * ```ts
 * import { createAttention } from 'sdpa-web';
 * const attn = await createAttention();
 * const { output } = await attn.scaledDotProductAttention(q, k, v, { isCausal: true });
 * attn.dispose();
 * ```
 * @packageDocumentation
 */
import createSdpaModule from './wasm/sdpa_core.mjs';
import type { AttentionRequest, CoreError, SdpaModule } from './wasm/sdpa_core.mjs';
import { attentionRequest, checkTensor, describe } from './arguments.js';
import { HeapScope } from './heap.js';
import { checkThreadsOption, coreCount, loadThreadedModule, threadsUnavailableReason } from './threads.js';
import type {
  AttentionOptions,
  AttentionResult,
  AttentionResult64,
  AttentionStages,
  BackendChoice,
  BackendInfo,
  BackendName,
  CreateAttentionOptions,
  MemoryStats,
  SoftmaxOptions,
  Tensor,
} from './types.js';

export type * from './types.js';

let modulePromise: Promise<SdpaModule> | undefined;

/** The wasm module is instantiated once per JS realm and shared by every Attention instance. */
function loadModule(): Promise<SdpaModule> {
  modulePromise ??= createSdpaModule().catch((cause: unknown) => {
    modulePromise = undefined;
    throw new Error(`sdpa-web: could not instantiate its WebAssembly module (it needs wasm SIMD128): ${String(cause)}`, { cause });
  });
  return modulePromise;
}

function throwIfError(error: CoreError | null): void {
  if (error) throw error.name === 'TypeError' ? new TypeError(error.message) : new RangeError(error.message);
}

const BACKENDS: readonly BackendInfo[] = [
  { name: 'simd', available: true },
  { name: 'scalar', available: true },
];

/**
 * The one place that picks a backend: `'auto'` takes the first available of `BACKENDS`
 * (fastest first).
 */
function chooseBackend(choice: BackendChoice): { backend: BackendName; fallbackReason?: string } {
  if (choice === 'auto') {
    const best = BACKENDS.find((b) => b.available)!;
    return { backend: best.name };
  }
  const info = BACKENDS.find((b) => b.name === choice);
  if (!info) {
    throw new TypeError(`backend must be 'auto', ${BACKENDS.map((b) => `'${b.name}'`).join(', ')}; got ${describe(choice)}`);
  }
  if (!info.available) throw new Error(`backend '${choice}' is not available: ${info.reason}`);
  return { backend: info.name };
}

/** One attention engine bound to a backend. Create with {@link createAttention}. */
export class Attention {
  /** The backend in use. */
  readonly backend: BackendName;
  /** Why `'auto'` did not pick a faster backend, or why fewer threads run than asked for. */
  readonly fallbackReason: string | undefined;
  /** Threads each call runs on (1 for 'scalar', and where WebAssembly threads are unavailable). */
  readonly threads: number;
  private disposed = false;

  /** @internal */
  constructor(
    private readonly module: SdpaModule,
    chosen: { backend: BackendName; fallbackReason?: string; threads?: number },
  ) {
    this.backend = chosen.backend;
    this.fallbackReason = chosen.fallbackReason;
    this.threads = chosen.threads ?? 1;
  }

  /** Every backend this build knows, whether it can run here, and why not. */
  get availableBackends(): BackendInfo[] {
    return BACKENDS.map((b) => ({ ...b }));
  }

  /**
   * Scaled dot-product attention with PyTorch's `scaled_dot_product_attention` semantics.
   *
   * - A query row that may attend to no key (all masked, or hidden by a causal alignment)
   *   returns zeros in `output` and `weights`, never NaN (PyTorch's `_safe_softmax`).
   * - Keys hidden by the mask are never read: NaN/Inf stored there cannot leak into the result.
   *   NaN in a visible input propagates to the rows it touches.
   * - Bad input throws (rejects with) a TypeError or RangeError naming the argument and the
   *   expected shape, before any memory is allocated; the instance stays usable.
   */
  async scaledDotProductAttention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    options?: AttentionOptions,
  ): Promise<AttentionResult> {
    return this.scaledDotProductAttentionSync(query, key, value, options);
  }

  /** Synchronous {@link Attention.scaledDotProductAttention} (CPU backends). */
  scaledDotProductAttentionSync(query: Tensor, key: Tensor, value: Tensor, options?: AttentionOptions): AttentionResult {
    this.checkUsable();
    const request = attentionRequest(query, key, value, options);
    request.threads = this.threads;
    const plan = this.module.planAttention(request);
    throwIfError(plan.error);
    const outputElements = product(plan.outputShape);
    const weightsElements = request.returnWeights ? product(plan.weightsShape) : 0;
    const workspaceBytes = plan.workspaceBytes[this.backend];
    HeapScope.checkTotal(
      inputBytes(query, key, value, options) + 4 * (outputElements + weightsElements) + workspaceBytes,
      'this attention call',
    );
    return this.withHeap((heap) => {
      const pointers = this.copyInputs(heap, query, key, value, options);
      pointers.output = heap.alloc(4 * outputElements, 'output');
      if (request.returnWeights) pointers.weights = heap.alloc(4 * weightsElements, 'weights');
      pointers.workspace = heap.alloc(workspaceBytes, `the ${this.backend} workspace`);
      throwIfError(this.module.runAttention(request, this.backend, pointers));
      const result: AttentionResult = {
        output: { data: heap.readFloat32(pointers.output, outputElements), shape: plan.outputShape },
      };
      if (request.returnWeights) {
        result.weights = { data: heap.readFloat32(pointers.weights!, weightsElements), shape: plan.weightsShape };
      }
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
    const request = attentionRequest(query, key, value, options);
    const plan = this.module.planAttention(request);
    throwIfError(plan.error);
    const n = product(plan.weightsShape);
    const outputElements = product(plan.outputShape);
    HeapScope.checkTotal(inputBytes(query, key, value, options) + 4 * (4 * n + outputElements) + plan.workspaceBytes.scalar, 'explain');
    return this.withHeap((heap) => {
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
   * The float64 reference (the oracle every backend is tested against): same arguments and
   * semantics as {@link Attention.scaledDotProductAttention}, computed in double precision from
   * the float32 inputs. Always returns the weights.
   */
  referenceAttention(query: Tensor, key: Tensor, value: Tensor, options?: AttentionOptions): AttentionResult64 {
    this.checkUsable();
    const request = attentionRequest(query, key, value, options);
    const plan = this.module.planAttention(request);
    throwIfError(plan.error);
    const outputElements = product(plan.outputShape);
    const weightsElements = product(plan.weightsShape);
    HeapScope.checkTotal(
      inputBytes(query, key, value, options) + 8 * (outputElements + weightsElements) + plan.workspaceBytes.reference64,
      'referenceAttention',
    );
    return this.withHeap((heap) => {
      const pointers = this.copyInputs(heap, query, key, value, options);
      pointers.output = heap.alloc(8 * outputElements, 'output');
      pointers.weights = heap.alloc(8 * weightsElements, 'weights');
      pointers.workspace = heap.alloc(plan.workspaceBytes.reference64, 'the reference workspace');
      throwIfError(this.module.referenceAttention64(request, pointers));
      return {
        output: { data: heap.readFloat64(pointers.output, outputElements), shape: plan.outputShape },
        weights: { data: heap.readFloat64(pointers.weights, weightsElements), shape: plan.weightsShape },
      };
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
    const temperature = options.temperature ?? 1;
    if (typeof temperature !== 'number') throw new TypeError(`temperature must be a number; got ${describe(temperature)}`);
    throwIfError(this.module.softmax(x.shape, temperature));
    return this.withHeap((heap) => {
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
    const plan = this.module.matmul(a.shape, b.shape);
    throwIfError(plan.error);
    const n = product(plan.outputShape);
    HeapScope.checkTotal(a.data.byteLength + b.data.byteLength + 4 * n, 'matmul');
    return this.withHeap((heap) => {
      const pointers = { a: heap.copyIn(a.data, 'a'), b: heap.copyIn(b.data, 'b'), output: heap.alloc(4 * n, 'output') };
      this.module.matmul(a.shape, b.shape, pointers);
      return { data: heap.readFloat32(pointers.output, n), shape: plan.outputShape };
    });
  }

  /** Wasm heap usage, for leak checks: `heapBytesInUse` returns to its baseline after every call. */
  memoryStats(): MemoryStats {
    return { heapBytesInUse: this.module.heapBytesInUse(), memoryBytes: this.module.HEAPU8.byteLength };
  }

  /** Releases the instance. Later calls, including a second `dispose()`, throw. */
  dispose(): void {
    this.checkUsable();
    this.disposed = true;
  }

  private checkUsable(): void {
    if (this.disposed) throw new Error('sdpa-web: this Attention instance was disposed');
  }

  private withHeap<T>(body: (heap: HeapScope) => T): T {
    const heap = new HeapScope(this.module);
    try {
      return body(heap);
    } finally {
      heap.release();
    }
  }

  private copyInputs(heap: HeapScope, query: Tensor, key: Tensor, value: Tensor, options?: AttentionOptions): Record<string, number> {
    const pointers: Record<string, number> = {
      query: heap.copyIn(query.data, 'query'),
      key: heap.copyIn(key.data, 'key'),
      value: heap.copyIn(value.data, 'value'),
    };
    if (options?.attnMask) pointers.mask = heap.copyIn(options.attnMask.data, 'attnMask');
    return pointers;
  }
}

function product(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

function inputBytes(query: Tensor, key: Tensor, value: Tensor, options?: AttentionOptions): number {
  return query.data.byteLength + key.data.byteLength + value.data.byteLength + (options?.attnMask?.data.byteLength ?? 0);
}

/**
 * Creates an attention engine. `backend: 'auto'` (default) picks the fastest backend available
 * here and reports why it fell back in `fallbackReason`; naming an unavailable backend rejects.
 * `threads` (simd backend): default every core where WebAssembly threads can run (Node; browsers
 * with cross-origin isolation), else 1 with the reason in `fallbackReason`; `threads: 1` forces
 * the single-thread module. More threads than cores are capped at the core count.
 */
export async function createAttention(options: CreateAttentionOptions = {}): Promise<Attention> {
  if (typeof options !== 'object' || options === null) throw new TypeError(`options must be an object; got ${describe(options)}`);
  const chosen = chooseBackend(options.backend ?? 'auto');
  const requested = checkThreadsOption(options.threads);
  if (chosen.backend !== 'simd' || requested === 1) return new Attention(await loadModule(), chosen);
  const threads = Math.min(requested ?? coreCount(), coreCount());
  const unavailable = threads > 1 ? threadsUnavailableReason() : undefined;
  if (threads > 1 && !unavailable) {
    try {
      return new Attention(await loadThreadedModule(), { ...chosen, threads });
    } catch (cause) {
      return new Attention(await loadModule(), { ...chosen, fallbackReason: `running on 1 thread: the threads module failed to load (${String(cause)})` });
    }
  }
  const fallbackReason = unavailable ? `running on 1 thread: ${unavailable}` : chosen.fallbackReason;
  return new Attention(await loadModule(), { ...chosen, fallbackReason });
}

