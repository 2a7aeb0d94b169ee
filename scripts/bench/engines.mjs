// The engines the bench compares. make(ctx) -> { info, setup(c, inputs), dispose() } or throws why
// it cannot run; setup (may be async) -> { run(), dispose() }, run() resolving to the outputs as Float32Arrays:
// forward [output [B, H, Lq, Ev]], backward [dQuery, dKey, dValue]. Inputs are the tensors of
// cases.mjs; the scale is 1/√E. ctx: { threads, causal, backward, baseline (a dist/ directory),
// profile (GPU-resident instances get profile(): one call's GPU time per kernel) }.
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { benchDevice, COPY_DST, COPY_SRC, readBack, STORAGE, upload } from './gpu-buffers.mjs';
import { gpuProfiler } from './gpu-profile.mjs';
import { attentionGraphModel } from './onnx.mjs';
import { subgroupsWithheld, withoutSubgroups } from '../webgpu-subgroups.mjs';

const require = createRequire(import.meta.url);

/**
 * navigator.gpu where the runtime has it, else dawn.node (npm `webgpu`), kept for the whole run;
 * its adapters without 'subgroups' under SDPA_WEBGPU_SUBGROUPS=0, as the test suites' (so its
 * devices run the workgroup-memory kernels).
 */
let gpuEntry;
export async function webgpuEntry() {
  return gpu();
}

async function gpu() {
  if (!gpuEntry) {
    let source = globalThis.navigator?.gpu;
    if (!source) {
      // with no GPU, dawn.node finds only SwiftShader (Vulkan on the CPU: correctness, not GPU speed)
      process.env.VK_ICD_FILENAMES ??= '/usr/lib/chromium/vk_swiftshader_icd.json';
      const { create, globals } = await import('webgpu');
      Object.assign(globalThis, globals);
      // SDPA_DAWN_FLAGS: comma-separated dawn.node options (gpu-check, docs/webgpu.md).
      source = create(process.env.SDPA_DAWN_FLAGS?.split(',').filter(Boolean) ?? []);
    }
    gpuEntry = subgroupsWithheld(process.env.SDPA_WEBGPU_SUBGROUPS) ? withoutSubgroups(source) : source;
  }
  return gpuEntry;
}

/**
 * sdpa-web with createAttention(`options`); threads: 'many' takes ctx.threads (default every core)
 * and needs 2 or more. `baseline`: the package from ctx.baseline instead of this one's dist/.
 * `recompute`: the backward recomputes the forward instead of taking its output and log-sum-exp.
 * `float16`: the forward on float16 query/key/value (converted once, untimed), output float32.
 * `forwardBeside`: in backward mode, the forward with the log-sum-exp a backward needs (checked as
 * a forward: its engine has `checks: 'forward'`), to set the backward's time against.
 * `resident` ('webgpu'): query, key, value and dOutput uploaded once to GPU buffers, the output
 * (or the gradients) left on the GPU, each call timed until the GPU is done; a forward beside a
 * backward then returns no log-sum-exp (which needs a CPU output), and the backward still
 * uploads the saved output and log-sum-exp it is given as CPU arrays.
 */
function sdpa(options, { baseline = false, recompute = false, float16 = false, forwardBeside = false, resident = false } = {}) {
  return async (ctx) => {
    if (forwardBeside && !ctx.backward) throw new Error('backward mode only (the forward beside the backward)');
    if (recompute && !ctx.backward) throw new Error('backward only');
    if (float16 && ctx.backward) throw new Error('forward only');
    if (baseline && !ctx.baseline) throw new Error('needs --baseline');
    const dist = baseline ? pathToFileURL(resolve(ctx.baseline, 'index.js')).href : '../../dist/index.js';
    const { createAttention, toFloat16 } = await import(dist);
    const create = { ...options, threads: options.threads === 'many' ? ctx.threads : options.threads };
    if (options.backend === 'webgpu') create.gpu = await gpu();
    let device;
    if (resident) {
      const adapter = await create.gpu.requestAdapter();
      device = await benchDevice(adapter, { profile: ctx.profile });
      create.gpuDevice = device;
    }
    const attn = await createAttention(create);
    if (options.threads === 'many' && attn.threads < 2) throw new Error(`threads unavailable: ${attn.fallbackReason ?? 'one core'}`);
    const info = { backend: attn.backend, threads: attn.threads, relaxedSimd: attn.relaxedSimd, fallbackReason: attn.fallbackReason };
    if (options.backend === 'webgpu') {
      const adapter = (await create.gpu.requestAdapter())?.info ?? {};
      const withheld = subgroupsWithheld(process.env.SDPA_WEBGPU_SUBGROUPS) ? "; 'subgroups' withheld (SDPA_WEBGPU_SUBGROUPS=0)" : '';
      info.adapter = `${adapter.vendor} ${adapter.architecture} ${adapter.description}${adapter.isFallbackAdapter ? ' (fallback adapter)' : ''}${withheld}`;
    }
    return {
      info,
      async setup(c, { q, k, v, dOut }) {
        const forward = { isCausal: ctx.causal };
        if (float16) {
          [q, k, v] = [q, k, v].map((t) => ({ data: toFloat16(t.data), shape: t.shape, dtype: 'float16' }));
          forward.outputDtype = 'float32';
        }
        if (resident) {
          const instance = await residentRun(attn, device, forward, { q, k, v, dOut }, forwardBeside || !ctx.backward);
          if (!ctx.profile) return instance;
          const profiler = gpuProfiler(device);
          return { ...instance, profile: async () => (profiler.unavailable ? { error: profiler.unavailable } : profiler.profile(instance.run)), dispose: () => (profiler.dispose?.(), instance.dispose()) };
        }
        if (forwardBeside) {
          const withLse = { ...forward, returnLogSumExp: true };
          return { run: async () => [(await attn.scaledDotProductAttention(q, k, v, withLse)).output.data], dispose() {} };
        }
        if (!ctx.backward) {
          const run = attn.backend === 'webgpu'
            ? async () => [(await attn.scaledDotProductAttention(q, k, v, forward)).output.data]
            : async () => [attn.scaledDotProductAttentionSync(q, k, v, forward).output.data];
          return { run, dispose() {} };
        }
        // the forward's output and log-sum-exp, saved once (untimed) as training keeps them
        const withLse = { ...forward, returnLogSumExp: true };
        const saved = recompute ? {} : attn.backend === 'webgpu' ? await attn.scaledDotProductAttention(q, k, v, withLse) : attn.scaledDotProductAttentionSync(q, k, v, withLse);
        const backward = { ...forward, output: saved.output, logSumExp: saved.logSumExp };
        return {
          run: async () => {
            const g = await attn.scaledDotProductAttentionBackward(q, k, v, dOut, backward);
            return [g.dQuery.data, g.dKey.data, g.dValue.data];
          },
          dispose() {},
        };
      },
      dispose: () => attn.dispose(),
      ...(forwardBeside ? { checks: 'forward' } : {}),
    };
  };
}

/** An sdpa engine's calls on GPU-resident tensors (see `resident`): { run, result, dispose }. */
async function residentRun(attn, device, forward, { q, k, v, dOut }, asForward) {
  const tensors = (asForward ? [q, k, v] : [q, k, v, dOut]).map((t) => ({ buffer: upload(device, t.data), shape: t.shape }));
  const [gq, gk, gv, gd] = tensors;
  const size = (shape) => shape.reduce((a, b) => a * b, 1);
  if (asForward) {
    const floats = size([...q.shape.slice(0, -1), v.shape.at(-1)]);
    const out = device.createBuffer({ size: 4 * floats, usage: STORAGE | COPY_SRC | COPY_DST });
    const run = async () => {
      await attn.scaledDotProductAttention(gq, gk, gv, { ...forward, outputLocation: 'gpu', out });
      await device.queue.onSubmittedWorkDone();
    };
    return { run, result: async () => (await run(), [await readBack(device, out, floats)]), dispose: () => [...tensors.map((t) => t.buffer), out].forEach((b) => b.destroy()) };
  }
  const saved = await attn.scaledDotProductAttention(q, k, v, { ...forward, returnLogSumExp: true });
  const options = { ...forward, output: saved.output, logSumExp: saved.logSumExp, outputLocation: 'gpu' };
  const gradients = async () => {
    const g = await attn.scaledDotProductAttentionBackward(gq, gk, gv, gd, options);
    return [g.dQuery, g.dKey, g.dValue];
  };
  return {
    run: async () => {
      const g = await gradients();
      await device.queue.onSubmittedWorkDone();
      g.forEach((t) => t.buffer.destroy());
    },
    result: async () => {
      const g = await gradients();
      const data = await Promise.all(g.map((t) => readBack(device, t.buffer, size(t.shape))));
      g.forEach((t) => t.buffer.destroy());
      return data;
    },
    dispose: () => tensors.forEach((t) => t.buffer.destroy()),
  };
}

/** The peers compute softmax(Q·Kᵀ/√E)·V on [B·H, L, D] arrays: no mask, no backward. */
function plainForward(ctx, name) {
  if (ctx.backward || ctx.causal) throw new Error(`${name}: no ${ctx.backward ? 'backward' : 'causal mask'} here`);
}
const flat = (c, t) => [c.B * c.H, ...t.shape.slice(2)];

let ortThreads;
/** onnxruntime-web's wasm execution provider on the plain MatMul/Softmax graph (onnx.mjs). */
function ortEngine(threads) {
  return async (ctx) => {
    plainForward(ctx, 'onnxruntime-web');
    // fixed for the process from the first session on: 1 and 2 threads run in separate processes
    if ((ortThreads ??= threads) !== threads) throw new Error(`onnxruntime-web runs ${ortThreads} threads in this process`);
    const ort = await import('onnxruntime-web');
    ort.env.wasm.numThreads = threads;
    ort.env.logLevel = 'error';
    return {
      info: { threads, version: ort.env.versions.web },
      async setup(c, { q, k, v }) {
        const session = await ort.InferenceSession.create(attentionGraphModel(c), { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
        const feeds = Object.fromEntries(Object.entries({ q, k, v }).map(([name, t]) => [name, new ort.Tensor('float32', t.data, flat(c, t))]));
        return {
          run: async () => {
            const { o } = await session.run(feeds);
            const data = o.data;
            o.dispose();
            return [data];
          },
          dispose: () => session.release(),
        };
      },
      dispose() {},
    };
  };
}

/** TensorFlow.js functional ops on its wasm backend (1 thread in Node). */
async function tfjsEngine(ctx) {
  plainForward(ctx, 'tfjs');
  const tf = await import('@tensorflow/tfjs-core');
  const { setWasmPaths } = await import('@tensorflow/tfjs-backend-wasm');
  setWasmPaths(dirname(require.resolve('@tensorflow/tfjs-backend-wasm/package.json')) + '/dist/');
  if (!(await tf.setBackend('wasm'))) throw new Error('tfjs wasm backend failed to initialise');
  return {
    info: { version: tf.version_core },
    setup(c, { q, k, v }) {
      const [tq, tk, tv] = [q, k, v].map((t) => tf.tensor3d(t.data, flat(c, t)));
      const scale = tf.scalar(1 / Math.sqrt(c.E));
      return {
        run: async () => {
          const out = tf.tidy(() => tf.matMul(tf.softmax(tf.mul(tf.matMul(tq, tk, false, true), scale)), tv));
          const data = out.dataSync();
          out.dispose();
          return [data];
        },
        dispose: () => tf.dispose([tq, tk, tv, scale]),
      };
    },
    dispose() {},
  };
}

/** name -> make(ctx). */
export const ENGINES = {
  'sdpa-simd-1t': sdpa({ backend: 'simd', threads: 1 }),
  'sdpa-simd-mt': sdpa({ backend: 'simd', threads: 'many' }),
  'sdpa-simd-1t-f16': sdpa({ backend: 'simd', threads: 1 }, { float16: true }),
  'sdpa-simd-mt-f16': sdpa({ backend: 'simd', threads: 'many' }, { float16: true }),
  'sdpa-simd128-1t': sdpa({ backend: 'simd', threads: 1, relaxedSimd: false }),
  'sdpa-simd-1t-recompute': sdpa({ backend: 'simd', threads: 1 }, { recompute: true }),
  'sdpa-scalar': sdpa({ backend: 'scalar' }),
  'sdpa-webgpu': sdpa({ backend: 'webgpu' }),
  'sdpa-webgpu-f16': sdpa({ backend: 'webgpu' }, { float16: true }),
  'sdpa-webgpu-forward': sdpa({ backend: 'webgpu' }, { forwardBeside: true }),
  'sdpa-webgpu-resident': sdpa({ backend: 'webgpu' }, { resident: true }),
  'sdpa-webgpu-forward-resident': sdpa({ backend: 'webgpu' }, { forwardBeside: true, resident: true }),
  'sdpa-simd-1t@baseline': sdpa({ backend: 'simd', threads: 1 }, { baseline: true }),
  'sdpa-simd-mt@baseline': sdpa({ backend: 'simd', threads: 'many' }, { baseline: true }),
  'ort-1t': ortEngine(1),
  'ort-2t': ortEngine(2),
  'tfjs-wasm': tfjsEngine,
};

/** The check's factor f: the tests allow WebGPU twice the CPU engines' multiple of e_ref. */
export const checkFactor = (name) => (name.startsWith('sdpa-webgpu') ? 4 : 2);
