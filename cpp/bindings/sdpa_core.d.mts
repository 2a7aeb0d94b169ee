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
/**
 * A core validation error, thrown by the TS layer (web/src/core-call.ts) as a TypeError or
 * RangeError. Its message may hold placeholders the TS layer fills in: {where} (the public call),
 * {got} (a description of `value`), {value} (String(value)) and {closest} ("; did you mean …?"
 * when `given` is close to one of `known`).
 */
export interface CoreError {
  name: 'TypeError' | 'RangeError';
  message: string;
  value?: unknown;
  given?: string;
  known?: string[];
}
/**
 * cpp/bindings/call_record.h: the float64 slots through which a call's tensors go in and its
 * results come out. Every number is a slot index into the Float64Array at `address`.
 */
export interface CallRecordLayout {
  address: number;
  size: number;
  tensorSlot: number;
  maxRank: number;
  tensors: Record<'query' | 'key' | 'value' | 'attnMask' | 'queryDocuments' | 'keyDocuments' | 'dOutput' | 'output' | 'logSumExp', number>;
  results: Record<CallResultName, number>;
  threads: number;
  keyHeadStride: number;
  valueHeadStride: number;
  keyValueFinite: number;
  inputArrival: number;
  block: number;
  outputRank: number;
  outputDims: number;
  weightsRank: number;
  weightsDims: number;
  outputFloat16: number;
  steps: number;
  traceTileKeys: number;
  traceBlockRows: number;
}
export type CallResultName =
  | 'output' | 'weights' | 'logSumExp' | 'scores' | 'dQuery' | 'dKey' | 'dValue' | 'dMask' | 'dSinks'
  | 'scaledScores' | 'maskedScores' | 'trace' | 'visited';
/** The options object of an attention call, read by the core (cpp/bindings/attention_options.def). */
export type CallOptions = object | undefined;
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
export interface WebGpuTraceLayout {
  floats: number;
  tileKeys: number;
  lanes: number;
  stride: number;
  kernel: string;
}
/** Where a WebGPU call's output goes, once its shape is known (see WebGpuAttention.run). */
export type PrepareOutput = (outputShape: number[], float16: boolean, onGpu: boolean) => WebGpuSource | { error: CoreError };
/** The tensors of a WebGPU call held outside the heap (their addresses are then left out). */
export interface WebGpuSources {
  query?: WebGpuSource;
  key?: WebGpuSource;
  value?: WebGpuSource;
  output?: WebGpuSource;
}

/** Where the backward's tensors live instead of the wasm heap (WebGpuAttention::run_backward). */
export interface WebGpuBackwardSources {
  query?: WebGpuSource;
  key?: WebGpuSource;
  value?: WebGpuSource;
  dOutput?: WebGpuSource;
  /** GPUBuffers (STORAGE | COPY_DST) that receive dQuery, dKey and dValue instead of the results block. */
  gradients?: { dQuery: object; dKey: object; dValue: object };
}

/** cpp/webgpu/device.h: one GPUDevice's pipelines and in-flight calls. */
export interface WebGpuAttention {
  /**
   * Plans the call (tensors from the call record), asks `prepareOutput(outputShape, float16,
   * onGpu)` where the output goes (a WebGpuSource, or { error }: it must not throw), and submits.
   * Weights, scores and a trace land in the record's results block once finish() has run.
   */
  run(options: CallOptions, sources: WebGpuSources, prepareOutput: PrepareOutput): { error: CoreError } | { error: null; promise: Promise<unknown[]>; job: number };
  /**
   * run() that also records the options' (batch, head, row)'s online softmax into the trace
   * result (record `steps` floats), laid out as `layout` says: tileKeys keys a tile, stride floats
   * a tile, lanes parts of ℓ.
   */
  trace(options: CallOptions, sources: WebGpuSources, prepareOutput: PrepareOutput):
    | { error: CoreError }
    | { error: null; promise: Promise<unknown[]>; job: number; layout: WebGpuTraceLayout };
  /**
   * The backward (tensors and options from the call record, as runAttentionBackward): the
   * gradients land in the record's results block once finish() has run (dQuery, dKey, dValue in
   * `sources.gradients` instead when given).
   */
  runBackward(options: CallOptions, sources: WebGpuBackwardSources | undefined): { error: CoreError } | { error: null; promise: Promise<unknown[]>; job: number };
  /** After the promise resolved: copies the readbacks into the heap; a fault, or null. */
  finish(job: number, results: unknown[]): { kind: 'validation' | 'out-of-memory' | 'internal'; message: string } | null;
  release(job: number): void;
  /** After run() threw part-way: pops its error scopes, destroys its buffers. */
  abandon(): void;
  /**
   * Writes float16 elements, for each of `writes`, into `destination` (a GPUBuffer of packed
   * halves) at `runs`: [destination element, source element, count] triples at any element
   * offsets; the source is a Uint16Array of halves, or a GPUBuffer of halves (`float32: true`: of
   * floats, rounded to the nearest half) from byte `offset`. One command buffer, submitted.
   */
  writeFloat16(writes: { destination: object; source: { array: Uint16Array } | { buffer: object; offset: number; float32?: boolean }; runs: number[] }[]): void;
  /**
   * Appends rows [B·Hkv, n, dim] of each `source` (a Float32Array, a Uint16Array of halves, or a
   * GPUBuffer from byte `offset`) to an int8/int4 KV cache's keys or values (`destination`),
   * quantized on the GPU: row t of batch b's heads to key held[b] + t when t < added[b]. One
   * command buffer for all the writes, submitted.
   */
  writeQuantized(
    writes: { destination: object; source: { array: Float32Array | Uint16Array } | { buffer: object; offset: number }; float16: boolean; dim: number }[],
    rows: { int4: boolean; kvHeads: number; n: number; maxLength: number; held: number[]; added: number[] },
  ): void;
  info(): {
    limits: {
      maxStorageBufferBindingSize: number;
      maxBufferSize: number;
      maxComputeWorkgroupsPerDimension: number;
      maxComputeWorkgroupStorageSize: number;
      maxComputeInvocationsPerWorkgroup: number;
      shaderF16: boolean;
      packedIntegerDotProduct: boolean;
      subgroups: boolean;
      subgroupMinSize: number;
      prefillSplitKeys: number;
    };
    pipelines: string[];
    jobsInFlight: number;
    float16: 'shader-f16' | 'unpack2x16float';
  };
  delete(): void;
}

export interface SdpaModule extends EmscriptenModule {
  WebGpuAttention: new (device: object, caps: object | undefined) => WebGpuAttention;
  /** The call record's layout (call_record.h). */
  callRecordLayout(): CallRecordLayout;
  /** The known option names of each call (attention_options.def); `modules`: those the modules pass through. */
  optionNames(): { forward: string[]; backward: string[]; trace: string[]; modules: string[] };
  /**
   * The forward on backend 0 'scalar' or 1 'simd', its tensors in the call record. `whileHelpersRun`:
   * called once on this thread while helper threads run the kernel (on one thread, before it); it
   * must not throw. With the record's inputArrival (an InputArrivalRecord, cpp/core/input_arrival.h)
   * it is what copies the query, key and value in, in that order.
   */
  runAttention(options: CallOptions, backend: 0 | 1, whileHelpersRun: (() => void) | undefined): CoreError | null;
  /** Workspace bytes of the forward of the record's tensors on backend 0 'scalar' or 1 'simd' (the bench's diagnostics), or its error. */
  forwardWorkspaceBytes(options: CallOptions, backend: 0 | 1): number | CoreError;
  /** Every stage of the float32 reference: results scores, scaledScores, maskedScores, weights, output. */
  explainAttention(options: CallOptions): CoreError | null;
  /** The SIMD kernel on 1 thread, tracing the options' row: results output, trace [tiles, 3 + Ev], visited [blocks, tiles]. */
  traceOnlineSoftmax(options: CallOptions): CoreError | null;
  /** The float64 reference: results output, weights (and scores) as float64. */
  referenceAttention64(options: CallOptions): CoreError | null;
  /** Plans only when `pointers` is undefined (Embind needs every argument passed). */
  matmul(aShape: ShapeLike, bShape: ShapeLike, pointers: Addresses | undefined): { error: CoreError | null; outputShape: number[] };
  softmax(shape: ShapeLike, temperature: number, pointers: Addresses | undefined): CoreError | null;
  heapBytesInUse(): number;
  /** KvCache.append on an int8/int4 cache: quantizes appended rows into the cache (sdpa_bindings.cpp quantize_kv_rows_js). */
  quantizeKvRows(int4: boolean, tensor: number, allHeads: number, maxLength: number, dim: number, source: number, float16: boolean, n: number, firstHead: number, heads: number, firstRow: number, rows: number): void;
  /** KvCache.append on a float16 cache, or of float16 rows to a float32 one (sdpa_bindings.cpp store_kv_rows_js): copied, rounded or widened; whether a stored half is Inf or NaN. */
  storeKvRows(toFloat16: boolean, fromFloat16: boolean, tensor: number, maxLength: number, dim: number, source: number, n: number, firstHead: number, heads: number, firstRow: number, rows: number): boolean;
  /** Most threads a call may use: 1 in sdpa_core, preloaded workers + 1 in sdpa_core_mt. */
  maxThreads(): number;
  setMaxThreads(n: number): void;
  // Gradients, PRNG, score functions and module validation.
  /** The backward on backend 0 'scalar' or 1 'simd': results dQuery, dKey, dValue (dMask, dSinks). */
  runAttentionBackward(options: CallOptions, backend: 0 | 1): CoreError | null;
  /** The float64 analytic gradients: results as float64. */
  referenceAttentionBackward64(options: CallOptions): CoreError | null;
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
