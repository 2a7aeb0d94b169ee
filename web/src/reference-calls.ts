// The calls that explain rather than serve: every stage of the float32 reference (explain), the
// SIMD kernel's online softmax traced (traceOnlineSoftmax), and the float64 oracle
// (referenceAttention). Each runs on the CPU whatever the backend, through the same record and
// crossing as the CPU call path.
import { checkTensor, optionTensors, product, tensorDtype } from './arguments.js';
import { readResults, type CallResults } from './core-call.js';
import type { Engine } from './engine.js';
import { cacheOptions, KvCache } from './kv-cache.js';
import { fromFloat16 } from './float16.js';
import { withHeap } from './heap.js';
import type { AttentionOptions, AttentionResult64, AttentionStages, CpuTensor, OnlineSoftmaxTrace, Tensor, TraceOptions } from './types.js';
import type { SdpaModule } from './wasm/sdpa_core.mjs';

/** float32 tensors copied in (or a KV cache's described), one crossing (`call`), `read` on its results. */
function referenceCall<T>(
  engine: Engine,
  where: string,
  tensors: { query: Tensor; key: Tensor; value: Tensor } | { query: Tensor; cache: KvCache },
  options: object | undefined,
  call: (module: SdpaModule) => ReturnType<SdpaModule['explainAttention']>,
  read: (results: CallResults) => T,
): T {
  for (const [name, tensor] of Object.entries(tensors)) if (name !== 'cache') checkTensor(name, tensor as Tensor);
  const masks = optionTensors(options);
  const { module, record } = engine;
  return withHeap(module, (heap) => {
    record.begin();
    record.copyIn(heap, 'query', tensors.query);
    if ('cache' in tensors) tensors.cache.describeIn(record);
    else {
      record.copyIn(heap, 'key', tensors.key);
      record.copyIn(heap, 'value', tensors.value);
    }
    record.copyIn(heap, 'attnMask', masks.attnMask);
    record.copyIn(heap, 'queryDocuments', masks.queryDocuments);
    record.copyIn(heap, 'keyDocuments', masks.keyDocuments);
    return readResults(record, where, () => call(module), read);
  });
}

/**
 * Every stage of one attention call (QKᵀ, ·scale, +mask, softmax, ·V), computed by the scalar
 * reference in float32: for explaining small examples.
 */
export function explain(engine: Engine, query: Tensor, key: Tensor, value: Tensor, options?: AttentionOptions): AttentionStages {
  return referenceCall(engine, 'explain', { query, key, value }, options, (m) => m.explainAttention(options), (results) => {
    const { outputShape, weightsShape } = results;
    const n = product(weightsShape);
    const read = (name: 'scores' | 'scaledScores' | 'maskedScores' | 'weights'): Tensor => ({ data: results.float32(name, n), shape: weightsShape });
    return {
      scores: read('scores'),
      scaledScores: read('scaledScores'),
      maskedScores: read('maskedScores'),
      weights: read('weights'),
      output: { data: results.float32('output', product(outputShape)), shape: outputShape },
    };
  });
}

/** One query row's online softmax, traced from the fused SIMD kernel on one thread. */
export function traceOnlineSoftmax(engine: Engine, query: Tensor, key: Tensor, value: Tensor, options: TraceOptions): OnlineSoftmaxTrace {
  return referenceCall(engine, 'traceOnlineSoftmax', { query, key, value }, options, (m) => m.traceOnlineSoftmax(options), (results) => {
    const { outputShape, weightsShape, steps: written } = results;
    const { tileKeys, blockRows } = results.traceTiles;
    const Ev = outputShape[outputShape.length - 1]!;
    const [Lq, Lk] = weightsShape.slice(-2) as [number, number];
    const stepFloats = 3 + Ev;
    const data = results.float32('trace', written * stepFloats);
    const steps = Array.from({ length: written }, (_, n) => {
      const step = data.subarray(n * stepFloats, (n + 1) * stepFloats);
      return { firstKey: step[0]!, max: step[1]!, sum: step[2]!, accumulator: step.slice(3) };
    });
    const shape: [number, number] = [Math.ceil(Lq / blockRows), Math.ceil(Lk / tileKeys)];
    return {
      tileKeys,
      steps,
      tileMap: { blockRows, tileKeys, shape, visited: results.bytes('visited', shape[0] * shape[1]) },
      output: { data: results.float32('output', product(outputShape)), shape: outputShape },
    };
  });
}

/** Float32 copies of float16 attention inputs (exact), float32 ones as they are. */
function widened<Name extends string>(tensors: Record<Name, CpuTensor>): Record<Name, Tensor> {
  const out = {} as Record<Name, Tensor>;
  for (const [name, tensor] of Object.entries(tensors) as [Name, CpuTensor][]) {
    checkTensor(name, tensor, 'input');
    out[name] = tensorDtype(tensor) === 'float16' ? { data: fromFloat16(tensor.data as Uint16Array), shape: tensor.shape } : (tensor as Tensor);
  }
  return out;
}

/**
 * The float64 reference: the oracle every backend is tested against (float16 inputs widened
 * exactly). On a CPU KV cache: its keys and values as it holds them (float16 widened, int8/int4
 * levels times their block scales in float32) and, on int8/int4, the query rounded through int8
 * blocks, as the call on the cache defines them.
 */
export function referenceAttention(
  engine: Engine,
  query: CpuTensor,
  key: CpuTensor | KvCache,
  value: CpuTensor | undefined,
  options?: AttentionOptions,
): AttentionResult64 {
  let inputs: { query: Tensor; key: Tensor; value: Tensor } | { query: Tensor; cache: KvCache };
  if (key instanceof KvCache) {
    key.checkUsable();
    if (key.gpu) throw new TypeError("sdpa-web: referenceAttention reads a KvCache in wasm memory; this one is in GPU memory (backend 'webgpu')");
    const cache = key.ownedBy(engine.module, engine.cpuBackend);
    options = cacheOptions(cache, query, options);
    inputs = { ...widened({ query }), cache };
  } else {
    inputs = widened({ query, key, value: value! });
  }
  return referenceCall(engine, 'referenceAttention', inputs, options, (m) => m.referenceAttention64(options), (results) => {
    const { outputShape, weightsShape } = results;
    const n = product(weightsShape);
    const result: AttentionResult64 = {
      output: { data: results.float64('output', product(outputShape)), shape: outputShape },
      weights: { data: results.float64('weights', n), shape: weightsShape },
    };
    if (results.has('scores')) result.scores = { data: results.float64('scores', n), shape: [...weightsShape] };
    if (results.has('logSumExp')) {
      const lseShape = outputShape.slice(0, -1);
      result.logSumExp = { data: results.float64('logSumExp', product(lseShape)), shape: lseShape };
    }
    return result;
  });
}
