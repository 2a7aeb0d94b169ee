// The page's heavy work, off the main thread: the precision lab's measurements and the cost
// benchmark's timed calls run here on this worker's own sdpa-web instances, so the page keeps
// painting and taking input while they run. Messages: { id, op, args } in, { id, result | error } out.
import { createAttention, type Attention, type BackendChoice } from 'sdpa-web';
import { randn, scoreStatsFor } from '../lib/compute';
import { float16Precision, precisionInputs, precisionOf, worstError, type Float16Precision, type PrecisionResult } from '../lib/explainers';
import type { EngineInfo, HeavyOps } from '../lib/heavy';

/** The precision lab's engines: each created once here, or the library's reason it cannot run. */
const ENGINE_SPECS: { name: string; short: string; how: string; options: { backend: BackendChoice; relaxedSimd?: boolean }; gpu: boolean }[] = [
  { name: 'scalar', short: 'scalar', how: 'plain float32 loops', options: { backend: 'scalar' }, gpu: false },
  { name: 'simd128', short: 'SIMD128', how: 'multiply, then add', options: { backend: 'simd', relaxedSimd: false }, gpu: false },
  { name: 'relaxed', short: 'relaxed SIMD', how: 'fused multiply-add', options: { backend: 'simd', relaxedSimd: true }, gpu: false },
  { name: 'webgpu', short: 'WebGPU', how: 'GPU kernels', options: { backend: 'webgpu' }, gpu: true },
];

let engines: Promise<{ info: EngineInfo; attn?: Attention }[]> | undefined;
let reference: Promise<Attention> | undefined;
const instances = new Map<string, Promise<Attention>>();

function loadEngines(): Promise<{ info: EngineInfo; attn?: Attention }[]> {
  engines ??= Promise.all(ENGINE_SPECS.map(async ({ options, ...info }) => {
    try {
      const attn = await createAttention(options);
      if (options.relaxedSimd && !attn.relaxedSimd) {
        const reason = attn.fallbackReason ?? 'relaxed SIMD is not available here';
        attn.dispose();
        return { info: { ...info, reason } };
      }
      return { info, attn };
    } catch (e) {
      return { info: { ...info, reason: e instanceof Error ? e.message : String(e) } };
    }
  }));
  return engines;
}

const referenceInstance = () => (reference ??= createAttention({ backend: 'scalar' }));

/** This worker's instance of `backend` (created once). */
function instanceOf(backend: string): Promise<Attention> {
  let inst = instances.get(backend);
  if (!inst) {
    inst = createAttention({ backend: backend as BackendChoice });
    instances.set(backend, inst);
    inst.catch(() => instances.delete(backend));
  }
  return inst;
}

/** Each op, with `progress(done)` to report the share done to the page. */
type WorkerOps = { [K in keyof HeavyOps]: (args: Parameters<HeavyOps[K]>[0], progress: (done: number) => void) => ReturnType<HeavyOps[K]> };

const ops: WorkerOps = {
  async engines() {
    return (await loadEngines()).map((e) => e.info);
  },
  async precision({ length, scale, withFloat16 }) {
    const all = await loadEngines();
    const ref = await referenceInstance();
    const inputs = precisionInputs(ref, length, scale);
    const o64 = ref.referenceAttention(inputs.q, inputs.k, inputs.v, inputs.options).output.data;
    const outputs: (Float32Array | undefined)[] = [];
    for (const e of all) outputs.push(e.attn ? ((await e.attn.scaledDotProductAttention(inputs.q, inputs.k, inputs.v, inputs.options)).output.data as Float32Array) : undefined);
    const eRef = worstError(outputs[0]!, o64, inputs.v.shape[1]).error;
    const results: (PrecisionResult | undefined)[] = all.map((e, i) => (outputs[i] ? precisionOf(outputs[i]!, o64, inputs, eRef, e.info.gpu) : undefined));
    const simd128 = all.find((e) => e.info.name === 'simd128')?.attn;
    const scalar = all.find((e) => e.info.name === 'scalar')?.attn;
    const float16: Float16Precision | undefined = withFloat16 && simd128 && scalar ? float16Precision(simd128, scalar, precisionInputs(ref, length, scale)) : undefined;
    return { results, float16 };
  },
  async bench({ backend, n, headDim }) {
    const attn = await instanceOf(backend);
    const ref = await referenceInstance();
    const q = randn(ref, [n, headDim], n), k = randn(ref, [n, headDim], n + 1), v = randn(ref, [n, headDim], n + 2);
    await attn.scaledDotProductAttention(q, k, v); // warm-up
    const times: number[] = [];
    const start = performance.now();
    while (times.length < 3 || (times.length < 15 && performance.now() - start < 250)) {
      const t0 = performance.now();
      await attn.scaledDotProductAttention(q, k, v);
      times.push(performance.now() - t0);
    }
    times.sort((a, c) => a - c);
    return { ms: Math.max(times[Math.floor(times.length / 2)]!, 1e-3) };
  },
  async scoreStats({ backend, dk, samples, seed }, progress) {
    let reported = 0;
    return scoreStatsFor(await instanceOf(backend), dk, samples, seed, async (done) => {
      if (done - reported < 0.01) return;
      reported = done;
      progress(done);
    });
  },
};

onmessage = async (e: MessageEvent<{ id: number; op: keyof HeavyOps; args: never }>) => {
  const { id, op, args } = e.data;
  try {
    const result = await (ops[op] as (a: unknown, progress: (done: number) => void) => Promise<unknown>)(args, (progress) => postMessage({ id, progress }));
    postMessage({ id, result });
  } catch (err) {
    postMessage({ id, error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) });
  }
};
