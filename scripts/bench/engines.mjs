// The engines the bench compares. Each has setup(shape, inputs) -> { run(): Promise<Float32Array>
// (the output in [BH, n, d] layout), dispose() }, or throws/rejects with why it cannot run.
// Inputs are Float32Arrays q, k, v of [BH, n, d]; the scale is 1/sqrt(d); no mask.
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { attentionGraphModel, multiHeadAttentionModel } from './onnx.mjs';

const require = createRequire(import.meta.url);

// ---------------------------------------------------------------------------------- sdpa-web --
/** `reuseOutput`: every call writes into one array (options.out) instead of a new one. */
async function sdpaEngine(options, { reuseOutput = false } = {}) {
  const { createAttention } = await import('../../dist/index.js');
  const attn = await createAttention(options);
  return {
    info: { backend: attn.backend, threads: attn.threads, relaxedSimd: attn.relaxedSimd, fallbackReason: attn.fallbackReason, reuseOutput },
    attn,
    setup([bh, n, d], { q, k, v }) {
      const t = (data) => ({ data, shape: [bh, n, d] });
      const [tq, tk, tv] = [t(q), t(k), t(v)];
      const callOptions = reuseOutput ? { out: new Float32Array(bh * n * d) } : {};
      const run =
        attn.backend === 'simd' || attn.backend === 'scalar'
          ? async () => attn.scaledDotProductAttentionSync(tq, tk, tv, callOptions).output.data
          : async () => (await attn.scaledDotProductAttention(tq, tk, tv, callOptions)).output.data;
      return { run, dispose() {} };
    },
  };
}

// --------------------------------------------------------------------------- onnxruntime-web --
let ortModule;
async function ort(threads) {
  if (!ortModule) {
    ortModule = await import('onnxruntime-web');
    // Fixed for the process from the first session on: 1 and 2 threads run in separate processes.
    ortModule.env.wasm.numThreads = threads;
    ortModule.env.logLevel = 'error';
  } else if (ortModule.env.wasm.numThreads !== threads) {
    throw new Error(`onnxruntime-web already initialised with ${ortModule.env.wasm.numThreads} threads in this process`);
  }
  return ortModule;
}

function toInterleaved(x, bh, n, d) {
  // [BH, n, d] -> [1, n, BH·d]
  const out = new Float32Array(x.length);
  for (let h = 0; h < bh; h++) {
    for (let i = 0; i < n; i++) out.set(x.subarray((h * n + i) * d, (h * n + i + 1) * d), (i * bh + h) * d);
  }
  return out;
}

function fromInterleaved(x, bh, n, d) {
  const out = new Float32Array(x.length);
  for (let h = 0; h < bh; h++) {
    for (let i = 0; i < n; i++) out.set(x.subarray((i * bh + h) * d, (i * bh + h + 1) * d), (h * n + i) * d);
  }
  return out;
}

/**
 * `reuseOutput`: run with a pre-allocated output tensor (fetches), ONNX Runtime's counterpart of
 * options.out. In onnxruntime-web 1.30 a pre-allocated CPU output comes back unfilled
 * (microsoft/onnxruntime#25786), which the bench's accuracy check reports.
 */
async function ortEngine(threads, kind, { reuseOutput = false } = {}) {
  const o = await ort(threads);
  return {
    info: { numThreads: threads, version: o.env.versions?.web ?? require('onnxruntime-web/package.json').version, reuseOutput },
    async setup([bh, n, d], { q, k, v }) {
      const mha = kind === 'mha';
      const model = mha ? multiHeadAttentionModel(bh, n, d) : attentionGraphModel(bh, n, d);
      const session = await o.InferenceSession.create(model, {
        executionProviders: ['wasm'],
        graphOptimizationLevel: 'all',
      });
      const dims = mha ? [1, n, bh * d] : [bh, n, d];
      const prep = (x) => new o.Tensor('float32', mha ? toInterleaved(x, bh, n, d) : x, dims);
      const feeds = { q: prep(q), k: prep(k), v: prep(v) };
      const fetches = reuseOutput ? { o: new o.Tensor('float32', new Float32Array(bh * n * d), dims) } : undefined;
      return {
        run: async () => {
          const result = fetches ? await session.run(feeds, fetches) : await session.run(feeds);
          const data = result.o.data;
          if (!fetches) result.o.dispose?.();
          return mha ? fromInterleaved(data, bh, n, d) : data;
        },
        dispose: () => session.release(),
      };
    },
  };
}

// -------------------------------------------------------------------------- tfjs wasm backend --
let tfModule;
async function tfjsEngine() {
  if (!tfModule) {
    const tf = await import('@tensorflow/tfjs-core');
    const { setWasmPaths } = await import('@tensorflow/tfjs-backend-wasm');
    setWasmPaths(dirname(require.resolve('@tensorflow/tfjs-backend-wasm/package.json')) + '/dist/');
    if (!(await tf.setBackend('wasm'))) throw new Error('tfjs wasm backend failed to initialise');
    await tf.ready();
    tfModule = tf;
  }
  const tf = tfModule;
  return {
    info: { version: tf.version_core, backend: tf.getBackend() },
    setup([bh, n, d], { q, k, v }) {
      const [tq, tk, tv] = [q, k, v].map((x) => tf.tensor3d(x, [bh, n, d]));
      const scale = tf.scalar(1 / Math.sqrt(d));
      return {
        run: async () => {
          const out = tf.tidy(() => tf.matMul(tf.softmax(tf.mul(tf.matMul(tq, tk, false, true), scale)), tv));
          const data = out.dataSync();
          out.dispose();
          return data;
        },
        dispose: () => tf.dispose([tq, tk, tv, scale]),
      };
    },
  };
}

// ------------------------------------------------------------------------------ plain JS --
function jsEngine() {
  return {
    info: {},
    setup([bh, n, d], { q, k, v }) {
      return {
        run: async () => jsAttention(q, k, v, bh, n, d, Float32Array),
        dispose() {},
      };
    },
  };
}

/**
 * Plain JavaScript attention, one query row at a time (scores row, max, exp-sum, ·V), in the
 * precision of `Array` (Float32Array: the "plain JS" engine; Float64Array: the bench's oracle).
 */
export function jsAttention(q, k, v, bh, n, d, Array = Float64Array) {
  const out = new Array(bh * n * d);
  const s = new Array(n);
  const o = new Array(d);
  const scale = 1 / Math.sqrt(d);
  for (let h = 0; h < bh; h++) {
    const base = h * n * d;
    for (let i = 0; i < n; i++) {
      const qi = base + i * d;
      let max = -Infinity;
      for (let j = 0; j < n; j++) {
        const kj = base + j * d;
        let dot = 0;
        for (let e = 0; e < d; e++) dot += q[qi + e] * k[kj + e];
        s[j] = dot * scale;
        if (s[j] > max) max = s[j];
      }
      let sum = 0;
      for (let j = 0; j < n; j++) {
        s[j] = Math.exp(s[j] - max);
        sum += s[j];
      }
      o.fill(0);
      for (let j = 0; j < n; j++) {
        const w = s[j];
        const vj = base + j * d;
        for (let e = 0; e < d; e++) o[e] += w * v[vj + e];
      }
      for (let e = 0; e < d; e++) out[qi + e] = o[e] / sum;
    }
  }
  return out;
}

async function threadedSdpaEngine(threads, flags) {
  const e = await sdpaEngine({ backend: 'simd', threads }, flags);
  if (e.info.threads < 2) throw new Error(`threads unavailable: ${e.info.fallbackReason ?? 'one core'}`);
  return e;
}

/** name -> async factory; `threads` is the sdpa-simd-mt thread count (undefined: every core). */
export function engineFactories(threads) {
  return {
    'sdpa-scalar': () => sdpaEngine({ backend: 'scalar' }),
    'sdpa-simd-1t': () => sdpaEngine({ backend: 'simd', threads: 1 }),
    'sdpa-simd128-1t': () => sdpaEngine({ backend: 'simd', threads: 1, relaxedSimd: false }),
    'sdpa-simd-mt': () => threadedSdpaEngine(threads),
    'sdpa-simd-1t-out': () => sdpaEngine({ backend: 'simd', threads: 1 }, { reuseOutput: true }),
    'sdpa-simd-mt-out': () => threadedSdpaEngine(threads, { reuseOutput: true }),
    'sdpa-webgpu': async () => {
      const { createAttention } = await import('../../dist/index.js');
      const probe = await createAttention({ backend: 'simd', threads: 1 });
      const webgpu = probe.availableBackends.find((b) => b.name === 'webgpu');
      if (!webgpu) throw new Error('no webgpu backend in this build');
      if (!webgpu.available) throw new Error(`webgpu unavailable: ${webgpu.reason}`);
      return sdpaEngine({ backend: 'webgpu' });
    },
    'ort-1t': () => ortEngine(1, 'graph'),
    'ort-1t-out': () => ortEngine(1, 'graph', { reuseOutput: true }),
    'ort-mha-1t': () => ortEngine(1, 'mha'),
    'ort-2t': () => ortEngine(2, 'graph'),
    'ort-mha-2t': () => ortEngine(2, 'mha'),
    'tfjs-wasm': () => tfjsEngine(),
    js: () => jsEngine(),
  };
}

export const ENGINE_LABELS = {
  'sdpa-scalar': 'sdpa-web scalar',
  'sdpa-simd-1t': 'sdpa-web SIMD 1 thread',
  'sdpa-simd-mt': 'sdpa-web SIMD threads',
  'sdpa-simd128-1t': 'sdpa-web SIMD128 1 thread',
  'sdpa-simd-1t-out': 'sdpa-web SIMD 1 thread, out',
  'sdpa-simd-mt-out': 'sdpa-web SIMD threads, out',
  'sdpa-webgpu': 'sdpa-web WebGPU',
  'ort-1t': 'onnxruntime-web graph 1t',
  'ort-1t-out': 'onnxruntime-web graph 1t, out',
  'ort-mha-1t': 'onnxruntime-web MHA 1t',
  'ort-2t': 'onnxruntime-web graph 2t',
  'ort-mha-2t': 'onnxruntime-web MHA 2t',
  'tfjs-wasm': 'tfjs wasm',
  js: 'plain JS',
};
