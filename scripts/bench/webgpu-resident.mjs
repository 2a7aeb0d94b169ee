// Mode `webgpu`'s GPU-resident part, after the table of calls on CPU arrays: prefill with the
// tensors in GPUBuffers (uploaded once, the output written to an `out` GPUBuffer) and decode
// steps on a GPU KV cache (the shapes: B = 1, Hq = 32, Hkv = 8, E = Ev = 128, one query;
// B = 4 ragged), each step timed to queue.onSubmittedWorkDone(). Beside them, onnxruntime-web's
// WebGPU execution provider on the same device with gpu-buffer inputs and outputs: the
// MatMul/Softmax graph (prefill) and com.microsoft GroupQueryAttention (decode). Outputs are
// checked against the float64 reference before timing. With no GPU (dawn.node on SwiftShader)
// the numbers prove only that everything runs and is right, never speed.
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createAttention, toFloat16 } from '../../dist/index.js';
import { flops, makeCheck, makeInputs as prefillInputs } from './cases.mjs';
import { makeInputs as decodeInputs, oracle, parseDecodeCase } from './decode.mjs';
import { benchDevice, COPY_DST, COPY_SRC, readBack, STORAGE, upload } from './gpu-buffers.mjs';
import { gpuProfiler } from './gpu-profile.mjs';
import { attentionGraphModel, groupQueryAttentionModel } from './onnx.mjs';
import { baselineRatios, print } from './results.mjs';
import { log, printProfiles } from './run.mjs';
import { interleave, median, now, warmUp } from './timing.mjs';

const message = (e) => String(e?.message ?? e).split('\n')[0].slice(0, 200);

/**
 * dawn.node's GPUQueue.writeBuffer rejects views of a SharedArrayBuffer ("Invalid argument"),
 * which onnxruntime-web's wasm memory is; a browser accepts them. Such views are copied into an
 * ArrayBuffer first (TypedArray.slice), for every queue of dawn.node's GPUQueue class.
 */
async function acceptSharedViews(gpu) {
  const device = await (await gpu.requestAdapter()).requestDevice();
  const queue = Object.getPrototypeOf(device.queue);
  device.destroy();
  const write = queue.writeBuffer;
  queue.writeBuffer = function (buffer, offset, data, ...rest) {
    const shared = ArrayBuffer.isView(data) ? data.buffer instanceof SharedArrayBuffer : data instanceof SharedArrayBuffer;
    const copy = !shared ? data : ArrayBuffer.isView(data) ? data.slice() : new Uint8Array(data).slice().buffer;
    return write.call(this, buffer, offset, copy, ...rest);
  };
}

/** onnxruntime-web with its WebGPU EP on dawn.node's navigator.gpu; its device is shared with sdpa-web. */
async function ortWebGpu(gpu) {
  globalThis.navigator ?? Object.defineProperty(globalThis, 'navigator', { value: {}, configurable: true });
  if (!globalThis.navigator.gpu) Object.defineProperty(globalThis.navigator, 'gpu', { value: gpu, configurable: true });
  await acceptSharedViews(gpu);
  const ort = await import('onnxruntime-web/webgpu');
  ort.env.logLevel = 'error';
  // A first session makes ort's device (ort.env.webgpu.device); it is kept open for the whole
  // run (releasing ort's last session may release its device).
  const first = await ort.InferenceSession.create(attentionGraphModel({ B: 1, H: 1, Lq: 4, Lk: 4, E: 4, Ev: 4 }), { executionProviders: ['webgpu'] });
  return { ort, first, device: await ort.env.webgpu.device };
}

/** Each engine: { name, run() (timed: until the GPU is done), result() (the output, read back), dispose() }. */
async function prefillEngines(c, inputs, attn, device, ortEnv, isCausal) {
  const engines = [];
  const outFloats = c.B * c.H * c.Lq * c.Ev;
  const out = device.createBuffer({ size: 4 * outFloats, usage: STORAGE | COPY_SRC | COPY_DST });
  let live = 0;
  // The same (float16-exact) inputs as float32 and as float16 GPU tensors; the output is float32.
  for (const dtype of ['float32', 'float16']) {
    const buffers = [inputs.q, inputs.k, inputs.v].map((t) => upload(device, dtype === 'float16' ? toFloat16(t.data) : t.data));
    const [q, k, v] = buffers.map((buffer, i) => ({ buffer, shape: [inputs.q, inputs.k, inputs.v][i].shape, dtype }));
    const submit = () => attn.scaledDotProductAttention(q, k, v, { isCausal, outputDtype: 'float32', outputLocation: 'gpu', out });
    const run = async () => {
      await submit();
      await device.queue.onSubmittedWorkDone();
    };
    live++;
    const dispose = () => {
      buffers.forEach((b) => b.destroy());
      if (--live === 0) out.destroy();
    };
    engines.push({ name: `sdpa-webgpu (GPU tensors ${dtype})`, run, submit, result: async () => (await run(), readBack(device, out, outFloats)), dispose });
  }
  // onnxruntime-web's MatMul/Softmax graph has no causal mask: it runs beside the full calls only.
  if (ortEnv.ort && !isCausal) {
    const { ort } = ortEnv;
    const [q, k, v] = [inputs.q, inputs.k, inputs.v].map((t) => ({ buffer: upload(device, t.data), shape: t.shape }));
    const destroyInputs = () => [q, k, v].forEach((t) => t.buffer.destroy());
    try {
      const session = await ort.InferenceSession.create(attentionGraphModel(c), { executionProviders: ['webgpu'], preferredOutputLocation: 'gpu-buffer' });
      const flat = (t) => [c.B * c.H, ...t.shape.slice(2)];
      const feeds = { q: ort.Tensor.fromGpuBuffer(q.buffer, { dataType: 'float32', dims: flat(inputs.q) }), k: ort.Tensor.fromGpuBuffer(k.buffer, { dataType: 'float32', dims: flat(inputs.k) }), v: ort.Tensor.fromGpuBuffer(v.buffer, { dataType: 'float32', dims: flat(inputs.v) }) };
      const run = async () => {
        const { o } = await session.run(feeds);
        await device.queue.onSubmittedWorkDone();
        return o;
      };
      engines.push({ name: 'ort-webgpu graph (gpu-buffer)', run: async () => (await run()).dispose(), result: async () => { const o = await run(); const data = await o.getData(true); return data; }, dispose: () => (session.release(), destroyInputs()) });
    } catch (e) {
      destroyInputs();
      engines.push({ name: 'ort-webgpu graph (gpu-buffer)', error: message(e) });
    }
  }
  return engines;
}

/**
 * The KV cache dtypes tried on the GPU, in this order: each one `createKvCache` accepts is timed,
 * one it rejects (a dtype this build does not have) is reported as such.
 */
export const KV_CACHE_DTYPES = ['float32', 'float16', 'int8', 'int4'];
/** Bytes a cache of each dtype holds per key or value element (int8/int4: levels and a float32 scale per 32). */
const CACHE_ELEMENT_BYTES = { float32: 4, float16: 2, int8: 36 / 32, int4: 20 / 32 };

async function decodeEngines(c, inputs, attn, device, ortEnv) {
  const engines = [];
  const { B, Hq, Hkv, E } = c, L = inputs.L;
  const query = { buffer: upload(device, inputs.query.data), shape: inputs.query.shape };
  const out = device.createBuffer({ size: 4 * B * Hq * E, usage: STORAGE | COPY_SRC | COPY_DST });
  const submitStep = (cache) => () => attn.scaledDotProductAttention(query, cache, { enableGqa: true, isCausal: true, outputLocation: 'gpu', out });
  const step = (cache) => async () => {
    await submitStep(cache)();
    await device.queue.onSubmittedWorkDone();
  };
  let live = 0;
  for (const dtype of KV_CACHE_DTYPES) {
    const name = `sdpa-webgpu (GPU cache ${dtype})`;
    let cache;
    try {
      cache = attn.createKvCache({ batch: B, kvHeads: Hkv, maxLength: L + 32, headDim: E, dtype });
    } catch (e) {
      if (!(e instanceof TypeError)) throw e;
      engines.push({ name, unsupported: message(e) });
      continue;
    }
    live++;
    cache.append(inputs.key, inputs.value, B > 1 ? { lengths: c.lengths } : undefined);
    const run = step(cache);
    // The last cache disposed frees what the steps share.
    const dispose = () => {
      cache.dispose();
      if (--live === 0) (query.buffer.destroy(), out.destroy());
    };
    engines.push({ name, dtype, elementBytes: CACHE_ELEMENT_BYTES[dtype], run, submit: submitStep(cache), result: async () => (await run(), readBack(device, out, B * Hq * E)), dispose });
  }
  if (ortEnv.ort) {
    const { ort } = ortEnv;
    try {
      const session = await ort.InferenceSession.create(groupQueryAttentionModel({ B, Hq, Hkv, L, E }), { executionProviders: ['webgpu'], preferredOutputLocation: 'gpu-buffer' });
      const lastOf = (t) => {
        const data = new Float32Array(B * Hkv * E);
        for (let b = 0; b < B; b++) for (let h = 0; h < Hkv; h++) data.set(t.data.subarray(((b * Hkv + h) * L + c.lengths[b] - 1) * E, ((b * Hkv + h) * L + c.lengths[b]) * E), (b * Hkv + h) * E);
        return data;
      };
      const gpuTensor = (data, dims) => ort.Tensor.fromGpuBuffer(upload(device, data), { dataType: 'float32', dims });
      const feeds = {
        query: gpuTensor(inputs.query.data, [B, 1, Hq * E]),
        key: gpuTensor(lastOf(inputs.key), [B, 1, Hkv * E]),
        value: gpuTensor(lastOf(inputs.value), [B, 1, Hkv * E]),
        past_key: gpuTensor(inputs.key.data, [B, Hkv, L, E]),
        past_value: gpuTensor(inputs.value.data, [B, Hkv, L, E]),
        seqlens_k: new ort.Tensor('int32', Int32Array.from(c.lengths.map((n) => n - 1)), [B]),
        total_sequence_length: new ort.Tensor('int32', Int32Array.of(L), []),
      };
      const run = async () => {
        const results = await session.run(feeds);
        await device.queue.onSubmittedWorkDone();
        return results;
      };
      const release = (results) => Object.values(results).forEach((t) => t.dispose());
      engines.push({
        name: 'ort-webgpu GQA (gpu-buffer)',
        run: async () => release(await run()),
        result: async () => { const r = await run(); const data = await r.output.getData(true); return data; },
        dispose: () => session.release(),
      });
    } catch (e) {
      engines.push({ name: 'ort-webgpu GQA (gpu-buffer)', error: message(e) });
    }
  }
  return engines;
}

const PROFILE_ROUNDS = 5;
const PIPELINED_ROUNDS = 3;

/** Of profiled calls, the one whose GPU time is the median (and, of several, their range). */
function medianProfile(profiles) {
  const sorted = [...profiles].sort((a, b) => a.gpuMs - b.gpuMs);
  const rounds = sorted.length;
  return { ...sorted[rounds >> 1], ...(rounds > 1 ? { rounds, gpuMsRange: [sorted[0].gpuMs, sorted[rounds - 1].gpuMs] } : {}) };
}

/** Checks then times each case's engines; rows { part, case, engine, ms, gflops | gbPerS, error }. */
export async function benchWebGpuResident(opts, gpu) {
  let ortEnv = {};
  try {
    ortEnv = await ortWebGpu(gpu);
  } catch (e) {
    log(`onnxruntime-web WebGPU EP unavailable: ${message(e)}`);
  }
  let device = ortEnv.device;
  if (!device) {
    const adapter = await gpu.requestAdapter();
    device = await benchDevice(adapter, { profile: opts.profile });
  }
  const profiler = opts.profile ? gpuProfiler(device) : undefined;
  const attn = await createAttention({ backend: 'webgpu', gpuDevice: device });
  // --baseline DIR: the same engines from another build's dist/ on the same device (named
  // "… @baseline"), in the same interleaved rounds, so that a kernel change is timed against its
  // predecessor in one process; each profiled call is then the median of PROFILE_ROUNDS.
  const baseline = opts.baseline ? await (await import(pathToFileURL(resolve(opts.baseline, 'index.js')).href)).createAttention({ backend: 'webgpu', gpuDevice: device }) : undefined;
  const withBaseline = async (engines) => {
    if (!baseline) return engines(attn, ortEnv);
    const theirs = (await engines(baseline, {})).map((e) => ({ ...e, name: `${e.name} @baseline` }));
    return [...(await engines(attn, ortEnv)), ...theirs];
  };
  const scalar = await createAttention({ backend: 'scalar' });
  const rows = [];
  // Calls submitted back to back and waited for once: the GPU's time per call without the
  // submission-to-completion latency of one call (about 0.4 ms through dawn.node on an H100),
  // unless submitting (encoding on the CPU) is slower: submitMs is that CPU time per call.
  const pipelinedBurst = async (e, calls = 20) => {
    await e.run();
    const start = now();
    for (let i = 0; i < calls; i++) await e.submit();
    const submitMs = (now() - start) / calls;
    await device.queue.onSubmittedWorkDone();
    return { ms: (now() - start) / calls, submitMs };
  };
  const time = async (part, c, engines, check, metric) => {
    const ok = [];
    for (const e of engines) {
      const row = { part, case: c.name, engine: e.name };
      rows.push(row);
      if (e.error) { row.failure = e.error; continue; }
      if (e.unsupported) { row.unsupported = e.unsupported; continue; }
      try {
        row.maxError = check(await e.result(), e);
        await warmUp(e.run);
        ok.push({ e, row });
      } catch (err) {
        row.failure = message(err);
        e.dispose();
      }
    }
    log(`${part} ${c.name}: ${ok.map(({ e }) => e.name).join(', ')} interleaved, ${opts.reps} rounds`);
    const timed = await interleave(ok.map(({ e }) => ({ run: e.run, reps: opts.reps })));
    for (const [i, { e, row }] of ok.entries()) Object.assign(row, { ms: timed[i].medianMs }, metric(timed[i].medianMs, e));
    // The pipelined bursts and the profiled calls in rounds as well, each round's order rotated:
    // the GPU lowers its clocks in the idle gaps of one call at a time, and the engine measured
    // first after them would otherwise meet the low clocks alone (on an H200, the same kernels
    // 2-3x apart). sdpa-web's calls only are profiled: the profiler stands in for the compute
    // passes of every encoder the device makes while it runs, and onnxruntime-web's passes may
    // use what it does not model.
    const profileRounds = baseline ? PROFILE_ROUNDS : 1;
    const samples = ok.map(() => ({ bursts: [], profiles: [], error: undefined }));
    const profiled = (e) => profiler && !e.name.startsWith('ort');
    for (let round = 0; round < Math.max(PIPELINED_ROUNDS, profileRounds); round++) {
      for (let i = 0; i < ok.length; i++) {
        const index = (i + round) % ok.length;
        const { e } = ok[index];
        const s = samples[index];
        if (e.submit && round < PIPELINED_ROUNDS) s.bursts.push(await pipelinedBurst(e));
        if (profiled(e) && !profiler.unavailable && round < profileRounds && !s.error) {
          try {
            s.profiles.push(await profiler.profile(e.run));
          } catch (err) {
            s.error = message(err);
          }
        }
      }
    }
    for (const [i, { e, row }] of ok.entries()) {
      const { bursts, profiles, error } = samples[i];
      if (bursts.length) {
        const ms = median(bursts.map((b) => b.ms));
        row.pipelined = { ms, submitMs: median(bursts.map((b) => b.submitMs)), ...metric(ms, e) };
      }
      if (profiled(e)) row.profile = profiler.unavailable ? { error: profiler.unavailable } : error ? { error } : medianProfile(profiles);
      e.dispose();
    }
  };
  for (const c of opts.cases) {
    const inputs = prefillInputs(scalar, c);
    // Each case without and with a causal mask (GFLOP/s count the visible half).
    for (const causal of [false, true]) {
      const check = makeCheck(scalar, inputs, { causal, backward: false });
      const verdict = (outputs) => {
        const v = check([outputs], 4);
        if (!v.ok) throw new Error(`wrong result: max error ${v.error.toExponential(2)} > bound ${v.bound.toExponential(2)}`);
        return v.error;
      };
      const engines = await withBaseline((a, ort) => prefillEngines(c, inputs, a, device, ort, causal));
      await time(causal ? 'prefill causal' : 'prefill', c, engines, verdict, (ms) => ({ gflops: flops(c, { causal }) / ms / 1e6 }));
    }
  }
  for (const text of opts.decodeCases) {
    const c = parseDecodeCase(text);
    const inputs = decodeInputs(c);
    const check = oracle(scalar, c, inputs);
    // K/V bytes a step reads: every visible key and value once.
    const elements = c.Hkv * c.lengths.reduce((a, b) => a + b, 0) * 2 * c.E;
    const engines = await withBaseline((a, ort) => decodeEngines(c, inputs, a, device, ort));
    await time('decode', c, engines, (output, e) => check('webgpu', output, e.dtype), (ms, e) => ({ gbPerS: (e.elementBytes ?? 4) * elements / ms / 1e6 }));
  }
  profiler?.dispose?.();
  attn.dispose();
  baseline?.dispose();
  scalar.dispose();
  await ortEnv.first?.release();
  // The kernels a device runs depend on its features (subgroups, shader-f16): onnxruntime-web's
  // device, where it runs, has those it asked for.
  return { rows, device: { from: ortEnv.device ? 'onnxruntime-web' : 'the bench', features: [...device.features].sort() } };
}

export function printWebGpuResident({ rows, device }) {
  print('\nGPU-resident: prefill (GPU tensors in, out GPUBuffer) and decode (GPU KV cache): one call to onSubmittedWorkDone; pipelined: 20 calls, one wait');
  print(`device (made by ${device.from}) features: ${device.features.join(', ')}`);
  print('part           case                        engine                           ms    GFLOP/s or GB/s   pipelined ms  GFLOP/s or GB/s  submit ms   max error');
  for (const r of rows) {
    const rate = (x) => (x.gflops !== undefined ? `${x.gflops.toFixed(1)} GFLOP/s` : x.gbPerS !== undefined ? `${x.gbPerS.toFixed(2)} GB/s` : '');
    const pipelined = r.pipelined ? `${r.pipelined.ms.toFixed(3).padStart(12)}  ${rate(r.pipelined).padStart(16)}  ${r.pipelined.submitMs.toFixed(3).padStart(9)}` : ' '.repeat(41);
    const tail = r.unsupported ? `not in this build: ${r.unsupported}` : r.failure ? `error: ${r.failure}` : `${r.ms.toFixed(3).padStart(9)}  ${rate(r).padStart(16)}   ${pipelined}   ${r.maxError.toExponential(1)}`;
    print(`${r.part.padEnd(14)} ${r.case.padEnd(27)} ${r.engine.padEnd(31)} ${tail}`);
  }
  printProfiles(rows);
  const ratios = baselineRatios(rows);
  if (ratios.length) {
    print('\ntime new/old (this dist/ over --baseline, same device and rounds; below 1: the new build is faster): one call, pipelined, GPU time of the profiled call');
    const shown = (x) => (x === undefined ? '-' : x.toFixed(3)).padStart(6);
    for (const { row, oneCall, pipelined, gpu } of ratios) {
      print(`  ${row.part.padEnd(14)} ${row.case.padEnd(27)} ${row.engine.padEnd(31)} ${shown(oneCall)}  ${shown(pipelined)}  ${shown(gpu)}`);
    }
  }
}
