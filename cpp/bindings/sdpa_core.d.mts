// Types for the Emscripten output web/src/wasm/sdpa_core.mjs (3.1.6 cannot emit
// them). CMake copies this file next to the generated module as
// sdpa_core.d.mts; scripts/build.sh copies it on into dist/wasm/.
// EmscriptenModule is the runtime's part; `SdpaModule` mirrors the Embind surface of
// cpp/bindings/sdpa_bindings.cpp and changes with it.

export interface EmscriptenModule {
  /**
   * Heap views. They are replaced (the old ones become detached, length 0)
   * whenever the wasm memory grows, i.e. during any call that may allocate.
   * Always re-read `module.HEAPF32` / `module.HEAPU8` after such a call;
   * never keep a view across one.
   */
  readonly HEAPU8: Uint8Array;
  readonly HEAPF32: Float32Array;
  readonly HEAPU16: Uint16Array;
  /**
   * Returns a byte address, or 0 on failure (-sABORTING_MALLOC=0).
   * Addresses >= 2 GiB come back negative: use `ptr >>> 0`.
   */
  _malloc(bytes: number): number;
  _free(ptr: number): void;
}

// Embind surface of cpp/bindings/sdpa_bindings.cpp (internal: only web/src/ calls it).
export type ShapeLike = readonly number[];
/** A core validation error, thrown by the TS layer as a TypeError or RangeError. */
export interface CoreError {
  name: 'TypeError' | 'RangeError';
  message: string;
}
export interface AttentionRequest {
  queryShape: ShapeLike;
  keyShape: ShapeLike;
  valueShape: ShapeLike;
  maskKind: 'none' | 'bool' | 'additive';
  maskShape: ShapeLike;
  causal: 'none' | 'top-left' | 'bottom-right' | 'offset';
  /** With causal 'offset': query i sees keys j ≤ i + causalOffset (an integer, any sign). */
  causalOffset?: number;
  /** Softcap c > 0: each scaled score s becomes c·tanh(s / c) before masks; undefined or 0 = off. */
  softcap?: number;
  /** Per-batch key lengths [B]: keys j ≥ keyLengths[b] hidden ('bottom-right' aligns to them). */
  keyLengths?: ArrayLike<number>;
  /** Sliding window sides (non-negative integers): key j visible iff p − left ≤ j ≤ p + right. */
  windowLeft?: number;
  windowRight?: number;
  /** ALiBi with the standard slopes of Hq heads, or these slopes [Hq]. */
  alibi?: boolean;
  alibiSlopes?: ArrayLike<number>;
  /** One extra softmax logit per query head [Hq], with no value. */
  sinks?: ArrayLike<number>;
  /** Document id tensors' shapes ([B, Lq] and [B, Lk]; both or neither): their data in the pointer bag. */
  queryDocumentsShape?: ShapeLike;
  keyDocumentsShape?: ShapeLike;
  /** A stage of the scores to return beside the output. */
  returnScores?: 'none' | 'scaled' | 'softcapped' | 'masked';
  scale: number | undefined;
  enableGqa: boolean;
  returnWeights: boolean;
  /** Threads for the simd backend (absent: 1; 0: all this module may use). */
  threads?: number;
  /** A KV cache read in place: elements between (batch, KV head) blocks of key and value (maxLength·E, maxLength·Ev). */
  keyHeadStride?: number;
  valueHeadStride?: number;
  /** Element types of query, key and value (absent: float32): float16 data is passed as its bit patterns. */
  queryType?: 'float32' | 'float16';
  keyType?: 'float32' | 'float16';
  valueType?: 'float32' | 'float16';
  /** float16 keys and values known to hold no Inf/NaN (a KV cache tracks it): the decode kernel reads them in place. */
  keyValueFinite?: boolean;
}
export interface AttentionPlanInfo {
  error: CoreError | null;
  outputShape: number[];
  weightsShape: number[];
  maskElements: number;
  workspaceBytes: { scalar: number; simd: number; trace: number; reference64: number };
}
/**
 * Heap byte addresses by name (a pointer bag). Each binding reads a fixed set of names, some
 * optional: a required name that is absent, or a name the binding does not read (a misspelling),
 * is reported as a TypeError CoreError and nothing runs.
 */
export type Addresses = Record<string, number>;

/**
 * Where a tensor of a WebGPU call lives instead of the heap: a caller's Float32Array (a float16
 * input's: a Uint16Array of its bits), or a caller's GPUBuffer at a byte offset (an output with
 * `float16: true` receives packed halves).
 */
export type WebGpuSource = { array: Float32Array | Uint16Array } | { buffer: object; offset: number; float16?: boolean };
/** The tensors of a WebGPU call held outside the heap (their addresses are then left out). */
export interface WebGpuSources {
  query?: WebGpuSource;
  key?: WebGpuSource;
  value?: WebGpuSource;
  output?: WebGpuSource;
}

/** cpp/webgpu/device.h: one GPUDevice's pipelines and in-flight calls. */
export interface WebGpuAttention {
  run(
    request: AttentionRequest,
    pointers: Addresses,
    sources: WebGpuSources | undefined,
  ): { error: CoreError } | { error: null; promise: Promise<unknown[]>; job: number };
  /** run() that also records query row (batch, head, row)'s online softmax into pointers.trace. */
  trace(
    request: AttentionRequest,
    pointers: Addresses,
    batch: number,
    head: number,
    row: number,
    sources: WebGpuSources | undefined,
  ): { error: CoreError } | { error: null; promise: Promise<unknown[]>; job: number };
  /** The trace's size and layout for `request` on this device: tileKeys keys a tile, stride floats a tile, lanes parts of ℓ. */
  traceLayout(request: AttentionRequest): { error: CoreError } | { error: null; floats: number; tileKeys: number; lanes: number; stride: number; kernel: string };
  /** After the promise resolved: copies the readbacks into the heap; a fault, or null. */
  finish(job: number, results: unknown[]): { kind: 'validation' | 'out-of-memory' | 'internal'; message: string } | null;
  release(job: number): void;
  /** After run() threw part-way: pops its error scopes, destroys its buffers. */
  abandon(): void;
  /**
   * Writes halves into `destination` (packed float16, STORAGE) and submits: `runs` holds
   * [destination element, source element, count] triples at any element offsets; the source is
   * a Uint16Array of halves, or a GPUBuffer of halves (`float32: true`: of floats, rounded to the
   * nearest half) from byte `offset`.
   */
  writeFloat16(destination: object, source: { array: Uint16Array } | { buffer: object; offset: number; float32?: boolean }, runs: number[]): void;
  info(): {
    limits: {
      maxStorageBufferBindingSize: number;
      maxBufferSize: number;
      maxComputeWorkgroupsPerDimension: number;
      maxComputeWorkgroupStorageSize: number;
      maxComputeInvocationsPerWorkgroup: number;
      shaderF16: boolean;
    };
    pipelines: string[];
    jobsInFlight: number;
    float16: 'shader-f16' | 'unpack2x16float';
  };
  delete(): void;
}

export interface SdpaModule extends EmscriptenModule {
  WebGpuAttention: new (device: object, caps: object | undefined) => WebGpuAttention;
  planAttention(request: AttentionRequest): AttentionPlanInfo;
  /**
   * `whileHelpersRun`: called once on this thread while helper threads run the kernel (on one
   * thread, before it); it must not throw. With `pointers.inputArrival` (an InputArrivalRecord,
   * cpp/core/input_arrival.h) it is what copies the query, key and value in, in that order.
   */
  runAttention(request: AttentionRequest, backend: 'scalar' | 'simd', pointers: Addresses, whileHelpersRun: (() => void) | undefined): CoreError | null;
  explainAttention(request: AttentionRequest, pointers: Addresses): CoreError | null;
  /** The SIMD kernel on 1 thread, tracing row `row` of head (batch, head): steps [tiles, 3 + Ev], visited [blocks, tiles]. */
  traceOnlineSoftmax(request: AttentionRequest, pointers: Addresses, batch: number, head: number, row: number): { error: CoreError | null; steps: number };
  referenceAttention64(request: AttentionRequest, pointers: Addresses): CoreError | null;
  /** Plans only when `pointers` is undefined (Embind needs every argument passed). */
  matmul(aShape: ShapeLike, bShape: ShapeLike, pointers: Addresses | undefined): { error: CoreError | null; outputShape: number[] };
  softmax(shape: ShapeLike, temperature: number, pointers: Addresses | undefined): CoreError | null;
  heapBytesInUse(): number;
  /** Most threads a call may use: 1 in sdpa_core, preloaded workers + 1 in sdpa_core_mt. */
  maxThreads(): number;
  setMaxThreads(n: number): void;
  // Gradients, PRNG, score functions and module validation.
  planAttentionBackward(request: AttentionRequest, backward: BackwardRequest): BackwardPlanInfo;
  runAttentionBackward(request: AttentionRequest, backward: BackwardRequest, backend: 'scalar' | 'simd', pointers: Addresses): CoreError | null;
  referenceAttentionBackward64(request: AttentionRequest, backward: BackwardRequest, pointers: Addresses): CoreError | null;
  xavierUniform(fanIn: number, fanOut: number, seed: number, offset: number, pointers?: Addresses): CoreError | null;
  randomUniform(n: number, low: number, high: number, seed: number, offset: number, pointers?: Addresses): CoreError | null;
  dropout(n: number, p: number, seed: number, pointers?: Addresses): CoreError | null;
  planScores(request: ScoreRequest): { error: CoreError | null; scoresShape: number[]; workspaceBytes: number };
  runScores(request: ScoreRequest, pointers: Addresses): CoreError | null;
  runScoresBackward(request: ScoreRequest, pointers: Addresses): CoreError | null;
  planSelfAttention(dModel: number, dK: number, dV: number, seed: number): CoreError | null;
  checkSelfAttentionInput(xShape: ShapeLike, dModel: number): CoreError | null;
  checkSelfAttentionWeights(shapes: Record<string, ShapeLike>, dModel: number, dK: number, dV: number): CoreError | null;
  planMultihead(config: {
    embedDim: number; numHeads: number; numKvHeads: number; kdim: number; vdim: number; seed: number; bias: boolean;
    weightShapes: Record<string, ShapeLike>;
  }): CoreError | null;
  checkMultiheadInputs(inputs: {
    embedDim: number; numHeads: number; kdim: number; vdim: number; batchFirst: boolean;
    queryShape: ShapeLike; keyShape: ShapeLike; valueShape: ShapeLike;
    keyPaddingMaskShape?: ShapeLike; attnMaskShape?: ShapeLike;
  }): { error: CoreError | null; B: number; L: number; S: number; unbatched: boolean };
}
export interface BackwardRequest {
  dOutputShape: ShapeLike;
  /** With lseShape: the forward's output and log-sum-exp are passed in (pointers output, lse). */
  outputShape?: ShapeLike;
  lseShape?: ShapeLike;
  returnAttnMaskGrad: boolean;
}
export interface BackwardPlanInfo {
  error: CoreError | null;
  workspaceBytes: { scalar: number; simd: number; reference64: number };
}
export interface ScoreRequest {
  kind: 'dot' | 'scaled-dot' | 'multiplicative' | 'additive';
  queryShape: ShapeLike;
  keyShape: ShapeLike;
  wShape: ShapeLike;
  w1Shape: ShapeLike;
  w2Shape: ShapeLike;
  vShape: ShapeLike;
  scale: number | undefined;
}

export interface SdpaModuleOptions {
  locateFile?(path: string, prefix: string): string;
  wasmBinary?: ArrayBuffer | Uint8Array;
  print?(text: string): void;
  printErr?(text: string): void;
  [key: string]: unknown;
}

declare function createSdpaModule(options?: SdpaModuleOptions): Promise<SdpaModule>;
export default createSdpaModule;
