// The call path of the WebGPU backend: query/key/value written to the GPU straight from the
// caller's arrays (or read in place: GPU-resident tensors, a GPU KV cache), masks and document ids
// through the wasm heap, one crossing into the core (which reads the options, plans and submits,
// asking here where the output goes once its shape is known), then the readback awaited.
import { checkOut, checkTensor, optionTensors, product, tensorDtype, throwIfError } from './arguments.js';
import type { CallRecord, CallResults } from './core-call.js';
import { runCpuAttention } from './cpu-calls.js';
import type { Engine } from './engine.js';
import { float16Output } from './float16.js';
import { HeapScope } from './heap.js';
import { cacheOptions, KvCache } from './kv-cache.js';
import type { AttentionOptions, AttentionResult, CpuTensor, GpuAttentionResult, GpuBufferLike, Tensor, TensorInput, TraceOptions, WebGpuSoftmaxTrace } from './types.js';
import type { CoreError, PrepareOutput, WebGpuSources, WebGpuTraceLayout } from './wasm/sdpa_core.mjs';
import { checkGpuBuffer, checkInput, GPU_USAGE, inputSource, isGpuTensor, settlesWithin, WebGPUError, type GpuSession, type GpuState } from './webgpu.js';

export interface GpuEngine extends Engine {
  readonly gpu: GpuSession;
  /** Why the instance no longer runs on WebGPU, when it fell back. */
  readonly fallbackReason: string | undefined;
}

/** The GPUDevice call made here (an output buffer the caller will own). */
interface GpuDeviceApi {
  createBuffer(descriptor: { size: number; usage: number }): GpuBufferLike;
}

type TracedResult = AttentionResult<CpuTensor> & { trace?: { data: Float32Array; layout: WebGpuTraceLayout } };
type GpuCallResult = TracedResult | GpuAttentionResult;

/** One call on the WebGPU backend (with `traced`: recording that row's online softmax). */
export async function runWebGpuAttention(
  engine: GpuEngine,
  query: TensorInput,
  key: TensorInput | KvCache,
  value: TensorInput | undefined,
  options: AttentionOptions | TraceOptions | undefined,
  traced = false,
): Promise<GpuCallResult> {
  const where = traced ? 'traceWebGpuOnlineSoftmax' : 'scaledDotProductAttention';
  const cache = key instanceof KvCache ? key.ownedBy(engine.module, 'webgpu') : undefined;
  const callOptions = cache ? cacheOptions(cache, query, options) : options;
  if (!cache) {
    checkInput('query', query);
    checkInput('key', key as TensorInput);
    checkInput('value', value!);
  }
  const tensors = optionTensors(callOptions);
  const forward = options as AttentionOptions | undefined;
  const outBuffer = forward?.outputLocation === 'gpu' && forward.out ? checkGpuBuffer('out', forward.out, GPU_USAGE.STORAGE | GPU_USAGE.COPY_DST) : undefined;
  for (const [name, input] of [['query', query], ['key', key], ['value', value]] as const) {
    if (outBuffer && isGpuTensor(input) && input.buffer === outBuffer) {
      throw new TypeError(`out is also the ${name}'s buffer: WebGPU cannot read and write one buffer in a dispatch; write to another buffer`);
    }
  }
  const gpu = await engine.gpu.live();
  if (!gpu) {
    if (traced) throw new WebGPUError('unavailable', `no WebGPU device to trace on: ${engine.fallbackReason ?? 'it fell back to SIMD'}`);
    return runCpuAttention(engine, 'scaledDotProductAttention', query as CpuTensor, key as CpuTensor | KvCache, value as CpuTensor | undefined, forward);
  }
  if (cache && cache.gpu !== gpu) cache.checkUsable(); // the device was lost and replaced: the cache went with it
  const { record } = engine;
  const heap = new HeapScope(engine.module);
  const hold: WebGpuCallHold = { job: 0 };
  let created: GpuBufferLike | undefined;
  let output: Float32Array | undefined;
  try {
    record.begin();
    const sources: WebGpuSources = {};
    const describe = (name: 'query' | 'key' | 'value', tensor: TensorInput) => {
      record.tensor(name, 0, tensor.shape, tensorDtype(tensor));
      sources[name] = inputSource(tensor);
    };
    describe('query', query);
    if (cache) cache.describeIn(record, sources);
    else {
      describe('key', key as TensorInput);
      describe('value', value!);
    }
    record.copyIn(heap, 'attnMask', tensors.attnMask);
    record.copyIn(heap, 'queryDocuments', tensors.queryDocuments);
    record.copyIn(heap, 'keyDocuments', tensors.keyDocuments);
    const prepareOutput: PrepareOutput = (shape, float16, onGpu) => {
      try {
        const elements = product(shape);
        if (onGpu) {
          // A float16 output on the GPU is packed halves, written in whole 4-byte words.
          const bytes = float16 ? 4 * Math.ceil(elements / 2) : 4 * elements;
          if (outBuffer && outBuffer.size < bytes) {
            throw new RangeError(`out is a ${outBuffer.size}-byte GPUBuffer but the ${float16 ? 'float16 ' : ''}output [${shape.join(', ')}] needs ${bytes} bytes`);
          }
          const target = outBuffer ?? (created = (gpu.device as unknown as GpuDeviceApi).createBuffer({
            size: Math.max(4, bytes),
            usage: GPU_USAGE.STORAGE | GPU_USAGE.COPY_SRC | GPU_USAGE.COPY_DST,
          }));
          return { buffer: target, offset: 0, float16 };
        }
        // A float16 output is read back as float32 and rounded here (toFloat16: ties to even).
        const out = checkOut(forward?.out, elements, shape, float16 ? 'float16' : 'float32');
        output = !float16 && out ? (out as Float32Array) : new Float32Array(elements);
        return { array: output };
      } catch (error) {
        // It must not throw through wasm: the core hands the error back.
        return { error: { name: error instanceof RangeError ? 'RangeError' : 'TypeError', message: (error as Error).message } };
      }
    };
    const { started, results } = await submitWebGpuCall(gpu, record, where, hold, () =>
      traced ? gpu.context.trace(callOptions, sources, prepareOutput) : gpu.context.run(callOptions, sources, prepareOutput),
    );
    const { outputShape, weightsShape, outputFloat16 } = results;
    if (!output) {
      const buffer = outBuffer ?? created!;
      created = undefined; // the caller's now
      return { output: outputFloat16 ? { buffer, shape: outputShape, dtype: 'float16' } : { buffer, shape: outputShape } };
    }
    const result: TracedResult = {
      output: outputFloat16
        ? float16Output(output, outputShape, forward?.out as Uint16Array | undefined, isGpuTensor(query) ? undefined : query.data)
        : { data: output, shape: outputShape },
    };
    const matrix = product(weightsShape);
    if (results.has('weights')) result.weights = { data: results.float32('weights', matrix), shape: weightsShape };
    if (results.has('scores')) result.scores = { data: results.float32('scores', matrix), shape: [...weightsShape] };
    if (results.has('logSumExp')) {
      const lseShape = outputShape.slice(0, -1);
      result.logSumExp = { data: results.float32('logSumExp', product(lseShape)), shape: lseShape };
    }
    const layout = (started as { layout?: WebGpuTraceLayout }).layout;
    if (layout) result.trace = { data: results.float32('trace', results.steps), layout };
    return result;
  } finally {
    created?.destroy();
    hold.results?.free();
    if (hold.job && !gpu.deleted) gpu.context.release(hold.job);
    heap.release();
  }
}

/** What a WebGPU call lets go of when it ends: its job (to release, 0 for none) and its results (to free). */
export interface WebGpuCallHold {
  job: number;
  results?: CallResults;
}

type StartedCall = { error: CoreError } | { error: null; promise: Promise<unknown[]>; job: number };

/**
 * Submits a call's work (`submit`: the context's run, trace or runBackward) and awaits its readback
 * into the heap, noting its results and job in `hold` as they come. A throw part-way through
 * submitting (Chromium throws a RangeError from createBuffer for an allocation it cannot make) undoes
 * the partial call and becomes a WebGPUError; the core's own error is thrown as it describes.
 */
export async function submitWebGpuCall<Started extends StartedCall>(
  gpu: GpuState,
  record: CallRecord,
  where: string,
  hold: WebGpuCallHold,
  submit: () => Started,
): Promise<{ started: Extract<Started, { error: null }>; results: CallResults }> {
  let started: Started;
  try {
    started = submit();
  } catch (cause) {
    gpu.context.abandon();
    hold.results = record.results(true);
    const kind = cause instanceof RangeError ? 'out-of-memory' : 'internal';
    throw new WebGPUError(kind, `submitting the work failed: ${String(cause)}`, { cause });
  }
  const results = (hold.results = record.results(true));
  throwIfError(started.error, where);
  if (!('promise' in started)) throw new Error('unreachable');
  hold.job = started.job;
  await readback(gpu, started.promise, started.job);
  return { started: started as Extract<Started, { error: null }>, results };
}

/** Awaits a submitted call's readback and copies it into the heap; the device's faults as WebGPUErrors. */
export async function readback(gpu: GpuState, promise: Promise<unknown[]>, job: number): Promise<void> {
  let resolved: unknown[];
  try {
    resolved = await Promise.race([promise, gpu.lost]);
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
  const fault = gpu.context.finish(job, resolved);
  if (fault) throw new WebGPUError(fault.kind, fault.message);
}

/**
 * One query row's online softmax, traced from the WebGPU flash kernel: after each key tile of
 * the kernel's size on this device, the running max, sum and unnormalized accumulator, and the
 * output of the same run.
 */
export async function traceWebGpuOnlineSoftmax(engine: GpuEngine, query: Tensor, key: Tensor, value: Tensor, options: TraceOptions): Promise<WebGpuSoftmaxTrace> {
  checkTensor('query', query);
  checkTensor('key', key);
  checkTensor('value', value);
  const result = await runWebGpuAttention(engine, query, key, value, options, true);
  if (!('trace' in result) || !result.trace) throw new Error('unreachable: a trace call returns its trace');
  const { output, trace: { data: trace, layout } } = result;
  const Ev = output.shape[output.shape.length - 1]!;
  const steps: WebGpuSoftmaxTrace['steps'] = [];
  for (let at = 0; at < trace.length; at += layout.stride) {
    if (trace[at] === 0) continue; // a tile the row's workgroup skipped or where it saw no key
    let sum = 0;
    for (let lane = 0; lane < layout.lanes; lane++) sum += trace[at + 2 + lane]!;
    steps.push({ firstKey: trace[at]! - 1, max: trace[at + 1]!, sum: Math.fround(sum), accumulator: trace.slice(at + 2 + layout.lanes, at + 2 + layout.lanes + Ev) });
  }
  // float32 inputs only, so a float32 output.
  return { tileKeys: layout.tileKeys, kernel: layout.kernel, steps, output: output as Tensor };
}
