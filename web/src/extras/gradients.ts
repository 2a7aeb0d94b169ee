// The backward pass of attention (the 'scalar'/'simd' kernels, the WebGPU kernels and the float64
// reference) through the call record: the tensors copied in, one crossing into the core (which reads the options,
// including the forward's, and checks the shapes), the gradients copied out.
import { checkTensor, optionTensors, product, tensorDtype } from '../arguments.js';
import { readResults, type CallResults } from '../core-call.js';
import type { Engine } from '../engine.js';
import { backendIndex } from '../engine.js';
import { HeapScope, withHeap } from '../heap.js';
import type { AttentionGradients, AttentionGradients64, BackwardOptions, GpuAttentionGradients } from './types.js';
import type { GpuBufferLike, Tensor, TensorInput } from '../types.js';
import type { CallOptions, SdpaModule, WebGpuBackwardSources } from '../wasm/sdpa_core.mjs';
import { submitWebGpuCall, type GpuEngine, type WebGpuCallHold } from '../webgpu-calls.js';
import { checkInput, GPU_USAGE, inputSource, isGpuTensor, WebGPUError } from '../webgpu.js';

type Gradients<D> = {
  dQuery: { data: D; shape: number[] };
  dKey: { data: D; shape: number[] };
  dValue: { data: D; shape: number[] };
  dAttnMask?: { data: D; shape: number[] };
  dSinks?: { data: D; shape: number[] };
};

/** One backward call: the inputs copied in, `call`, the gradients read back as `read` says. */
function backwardCall<D>(
  engine: Engine,
  where: string,
  tensors: { query: Tensor; key: Tensor; value: Tensor; dOutput: Tensor },
  options: BackwardOptions | undefined,
  call: (module: SdpaModule) => ReturnType<SdpaModule['runAttentionBackward']>,
  read: (results: CallResults, name: 'dQuery' | 'dKey' | 'dValue' | 'dMask' | 'dSinks', length: number) => D,
): Gradients<D> {
  for (const [name, tensor] of Object.entries(tensors)) checkTensor(name, tensor);
  const masks = optionTensors(options);
  const forward = typeof options === 'object' && options !== null ? options : {};
  for (const name of ['output', 'logSumExp'] as const) {
    if (forward[name] !== undefined && forward[name] !== null) checkTensor(name, forward[name]);
  }
  const { module, record } = engine;
  return withHeap(module, (heap) => {
    record.begin();
    for (const name of ['query', 'key', 'value', 'dOutput'] as const) record.copyIn(heap, name, tensors[name]);
    record.copyIn(heap, 'attnMask', masks.attnMask);
    record.copyIn(heap, 'queryDocuments', masks.queryDocuments);
    record.copyIn(heap, 'keyDocuments', masks.keyDocuments);
    record.copyIn(heap, 'output', forward.output);
    record.copyIn(heap, 'logSumExp', forward.logSumExp);
    return readResults(record, where, () => call(module), (results) => {
      const gradient = (name: 'dQuery' | 'dKey' | 'dValue' | 'dMask' | 'dSinks', shape: readonly number[]) => ({
        data: read(results, name, product(shape)),
        shape: [...shape],
      });
      const sinks = options?.sinks;
      return {
        dQuery: gradient('dQuery', tensors.query.shape),
        dKey: gradient('dKey', tensors.key.shape),
        dValue: gradient('dValue', tensors.value.shape),
        ...(results.has('dMask') ? { dAttnMask: gradient('dMask', masks.attnMask!.shape) } : {}),
        ...(results.has('dSinks') ? { dSinks: gradient('dSinks', [sinks!.length]) } : {}),
      };
    });
  });
}

export function attentionBackward(engine: Engine, query: Tensor, key: Tensor, value: Tensor, dOutput: Tensor, options?: BackwardOptions): AttentionGradients {
  const backend = backendIndex(engine.cpuBackend);
  return backwardCall(engine, 'scaledDotProductAttentionBackward', { query, key, value, dOutput }, options,
    (m) => m.runAttentionBackward(options, backend), (results, name, n) => results.float32(name, n));
}

/** The float64 analytic gradients; the reference recomputes the forward itself (a given output/logSumExp is not used). */
export function referenceAttentionBackward(engine: Engine, query: Tensor, key: Tensor, value: Tensor, dOutput: Tensor, options?: BackwardOptions): AttentionGradients64 {
  return backwardCall(engine, 'referenceAttentionBackward', { query, key, value, dOutput }, options,
    (m) => m.referenceAttentionBackward64(options), (results, name, n) => results.float64(name, n));
}

type GradientName = 'dQuery' | 'dKey' | 'dValue';

/**
 * The backward on the WebGPU backend: query, key, value and dOutput written to the GPU straight
 * from the caller's arrays (or read in place: GPU-resident tensors), masks, document ids and the
 * forward's output/logSumExp through the wasm heap, one crossing into the core, which plans the
 * call like the CPU backward and submits the backward kernels; then the readback awaited. float16
 * query/key/value are read as halves and widened by the kernels. With `outputLocation: 'gpu'`
 * dQuery, dKey and dValue go to new GPUBuffers the caller owns.
 */
export async function webgpuAttentionBackward(
  engine: GpuEngine,
  query: TensorInput,
  key: TensorInput,
  value: TensorInput,
  dOutput: TensorInput,
  options: BackwardOptions | undefined,
): Promise<AttentionGradients | GpuAttentionGradients> {
  const where = 'scaledDotProductAttentionBackward';
  const tensors = { query, key, value, dOutput };
  // query, key and value may be float16 (the kernels widen them as they load); dOutput is float32.
  for (const name of ['query', 'key', 'value'] as const) checkInput(name, tensors[name]);
  if (!isGpuTensor(dOutput)) checkTensor('dOutput', dOutput);
  else {
    checkInput('dOutput', dOutput);
    if (tensorDtype(dOutput) === 'float16') throw new TypeError("dOutput is a float16 GPU tensor: the backward takes dOutput in float32 (dtype 'float32')");
  }
  const masks = optionTensors(options);
  const forward = typeof options === 'object' && options !== null ? options : {};
  for (const name of ['output', 'logSumExp'] as const) {
    if (forward[name] !== undefined && forward[name] !== null) checkTensor(name, forward[name]);
  }
  const onGpu = forward.outputLocation === 'gpu';
  const gpu = await engine.gpu.live();
  if (!gpu) {
    // The device was lost and none could be had: the instance fell back to SIMD.
    if (onGpu || Object.values(tensors).some(isGpuTensor)) {
      throw new WebGPUError('unavailable', `no WebGPU device for GPU-resident gradients: ${engine.fallbackReason ?? 'it fell back to SIMD'}`);
    }
    return attentionBackward(engine, query as Tensor, key as Tensor, value as Tensor, dOutput as Tensor, options);
  }
  const { record } = engine;
  const heap = new HeapScope(engine.module);
  const hold: WebGpuCallHold = { job: 0 };
  let created: GpuBufferLike[] = [];
  try {
    record.begin();
    const sources: WebGpuBackwardSources = {};
    for (const name of ['query', 'key', 'value', 'dOutput'] as const) {
      record.tensor(name, 0, tensors[name].shape, tensorDtype(tensors[name]));
      sources[name] = inputSource(tensors[name]);
    }
    record.copyIn(heap, 'attnMask', masks.attnMask);
    record.copyIn(heap, 'queryDocuments', masks.queryDocuments);
    record.copyIn(heap, 'keyDocuments', masks.keyDocuments);
    record.copyIn(heap, 'output', forward.output);
    record.copyIn(heap, 'logSumExp', forward.logSumExp);
    const shapes: Record<GradientName, readonly number[]> = { dQuery: query.shape, dKey: key.shape, dValue: value.shape };
    if (onGpu) {
      const device = gpu.device as unknown as { createBuffer(descriptor: { size: number; usage: number }): GpuBufferLike };
      const make = (name: GradientName) => {
        const buffer = device.createBuffer({ size: Math.max(4, 4 * product(shapes[name])), usage: GPU_USAGE.STORAGE | GPU_USAGE.COPY_SRC | GPU_USAGE.COPY_DST });
        created.push(buffer);
        return buffer;
      };
      sources.gradients = { dQuery: make('dQuery'), dKey: make('dKey'), dValue: make('dValue') };
    }
    const { results } = await submitWebGpuCall(gpu, record, where, hold, () => gpu.context.runBackward(options as CallOptions, sources));
    const extras = {
      ...(results.has('dMask') ? { dAttnMask: { data: results.float32('dMask', product(masks.attnMask!.shape)), shape: [...masks.attnMask!.shape] } } : {}),
      ...(results.has('dSinks') ? { dSinks: { data: results.float32('dSinks', options!.sinks!.length), shape: [options!.sinks!.length] } } : {}),
    };
    if (onGpu) {
      const [dQuery, dKey, dValue] = created as [GpuBufferLike, GpuBufferLike, GpuBufferLike];
      created = []; // the caller's now
      return {
        dQuery: { buffer: dQuery, shape: [...shapes.dQuery] },
        dKey: { buffer: dKey, shape: [...shapes.dKey] },
        dValue: { buffer: dValue, shape: [...shapes.dValue] },
        ...extras,
      };
    }
    const gradient = (name: GradientName) => ({ data: results.float32(name, product(shapes[name])), shape: [...shapes[name]] });
    return { dQuery: gradient('dQuery'), dKey: gradient('dKey'), dValue: gradient('dValue'), ...extras };
  } finally {
    for (const buffer of created) buffer.destroy();
    hold.results?.free();
    if (hold.job && !gpu.deleted) gpu.context.release(hold.job);
    heap.release();
  }
}
