// The call path of the CPU backends ('scalar', 'simd'): the inputs copied into the wasm heap (or
// streamed in while the helper threads start, or a KV cache read in place), one crossing into the
// core (which reads the options, plans, allocates and runs), the results copied out.
import { checkOut, checkTensor, optionTensors, product, tensorDtype, throwIfError } from './arguments.js';
import type { CallResults } from './core-call.js';
import { backendIndex, type Engine } from './engine.js';
import { float16Output } from './float16.js';
import { pagedInFloat32Array, withHeap } from './heap.js';
import { InputStream } from './input-stream.js';
import { cacheOptions, KvCache } from './kv-cache.js';
import type { AttentionOptions, AttentionResult, CpuTensor, Tensor } from './types.js';
import { checkCpuInputs } from './webgpu.js';

/**
 * A threaded call whose fresh float32 result arrays hold at least this many bytes makes them
 * while its helper threads run the kernel (their page faults then overlap it): below, the call
 * back from wasm costs more than the faults it hides.
 */
const OVERLAPPED_RESULT_BYTES = 64 * 1024;

type ResultArrays = Partial<Record<'output' | 'weights' | 'logSumExp' | 'scores', Float32Array>>;

/** One forward call on a CPU backend, on tensors or on a KV cache read in place; `where` names the public method in errors. */
export function runCpuAttention(
  engine: Engine,
  where: string,
  query: CpuTensor,
  key: CpuTensor | KvCache,
  value: CpuTensor | undefined,
  options: AttentionOptions | undefined,
): AttentionResult<CpuTensor> {
  checkCpuInputs(engine.backend, query, key, value);
  const cache = key instanceof KvCache ? key.ownedBy(engine.module, engine.backend) : undefined;
  const callOptions = cache ? cacheOptions(cache, query, options) : options;
  if (!cache) {
    checkTensor('query', query, 'input');
    checkTensor('key', key, 'input');
    checkTensor('value', value, 'input');
  }
  const tensors = optionTensors(callOptions);
  const { module, record } = engine;
  return withHeap(module, (heap) => {
    record.begin(engine.requestedThreads);
    const dense = key as CpuTensor;
    // Threaded: large float32 inputs are copied in while the helper threads start on them.
    const stream = engine.threads > 1 && engine.cpuBackend === 'simd' && !cache && InputStream.worthwhile(query, dense, value!)
      ? new InputStream(heap, module, query as Tensor, dense as Tensor, value as Tensor)
      : undefined;
    if (stream) {
      record.tensor('query', stream.query, query.shape);
      record.tensor('key', stream.key, dense.shape);
      record.tensor('value', stream.value, value!.shape);
      record.streamed(stream.record);
    } else {
      record.copyIn(heap, 'query', query, tensorDtype(query) === 'float16');
      if (cache) cache.describeIn(record);
      else {
        record.copyIn(heap, 'key', dense, tensorDtype(dense) === 'float16');
        record.copyIn(heap, 'value', value, tensorDtype(value!) === 'float16');
      }
    }
    record.copyIn(heap, 'attnMask', tensors.attnMask);
    record.copyIn(heap, 'queryDocuments', tensors.queryDocuments);
    record.copyIn(heap, 'keyDocuments', tensors.keyDocuments);

    // While the helper threads run the kernel: the streamed inputs' copy, then the float32 result arrays.
    const allocate = engine.threads > 1 && expectedResultBytes(query, cache ?? dense, value, callOptions) >= OVERLAPPED_RESULT_BYTES;
    let fresh: ResultArrays = {};
    let overlappedError: unknown;
    const whileHelpersRun = stream || allocate ? () => {
      try {
        stream?.copy();
        if (allocate) fresh = resultArrays(record.results(), options?.out === undefined || options.out === null);
      } catch (error) {
        overlappedError = error; // thrown once the kernel is done: an exception must not unwind through wasm
      }
    } : undefined;
    const error = module.runAttention(callOptions, backendIndex(engine.cpuBackend), whileHelpersRun);
    const results = record.results();
    try {
      throwIfError(error, where);
      if (overlappedError) throw overlappedError;
      return cpuResult(results, query, options, fresh);
    } finally {
      results.free();
    }
  });
}

/** The result arrays of a planned call (`withOutput`: the output's too), each page written once. */
function resultArrays(results: CallResults, withOutput: boolean): ResultArrays {
  const { outputShape, weightsShape, outputFloat16 } = results;
  const arrays: ResultArrays = {};
  if (withOutput && !outputFloat16) arrays.output = pagedInFloat32Array(product(outputShape));
  if (results.has('weights')) arrays.weights = pagedInFloat32Array(product(weightsShape));
  if (results.has('logSumExp')) arrays.logSumExp = pagedInFloat32Array(product(outputShape.slice(0, -1)));
  if (results.has('scores')) arrays.scores = pagedInFloat32Array(product(weightsShape));
  return arrays;
}

/** About the bytes of a call's float32 results, from its inputs' shapes (whether to make them during the kernel). */
function expectedResultBytes(query: CpuTensor, key: CpuTensor | KvCache, value: CpuTensor | undefined, options: AttentionOptions | undefined): number {
  const rows = product(query.shape.slice(0, -1));
  const Lk = key instanceof KvCache ? key.length : (key.shape[key.shape.length - 2] ?? 0);
  const Ev = key instanceof KvCache ? key.valueDim : (value!.shape[value!.shape.length - 1] ?? 0);
  const matrices = (options?.returnWeights ? 1 : 0) + (options?.returnScores ? 1 : 0);
  return 4 * rows * (Ev + matrices * Lk);
}

/** The call's results copied out of the heap: into `out`, the arrays made during the kernel, or new ones. */
function cpuResult(results: CallResults, query: CpuTensor, options: AttentionOptions | undefined, fresh: ResultArrays): AttentionResult<CpuTensor> {
  const { outputShape, weightsShape, outputFloat16 } = results;
  const outputElements = product(outputShape);
  const out = checkOut(options?.out, outputElements, outputShape, outputFloat16 ? 'float16' : 'float32');
  const result: AttentionResult<CpuTensor> = {
    output: outputFloat16
      ? float16Output(results.view32('output', outputElements), outputShape, out as Uint16Array | undefined, query.data)
      : { data: results.float32('output', outputElements, (out as Float32Array | undefined) ?? fresh.output), shape: outputShape },
  };
  if (results.has('weights')) result.weights = { data: results.float32('weights', product(weightsShape), fresh.weights), shape: weightsShape };
  if (results.has('logSumExp')) {
    const lseShape = outputShape.slice(0, -1);
    result.logSumExp = { data: results.float32('logSumExp', product(lseShape), fresh.logSumExp), shape: lseShape };
  }
  if (results.has('scores')) result.scores = { data: results.float32('scores', product(weightsShape), fresh.scores), shape: [...weightsShape] };
  return result;
}
