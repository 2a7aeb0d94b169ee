// npm run bench:webgpu [-- options]: the WebGPU backend timed next to SIMD, in Node, on dawn.node
// (npm `webgpu`). Needs `npm run build:lib` (imports dist/).
//
//   --shapes 1x512x64,12x512x64   BHxNxD list (B = 1, H = BH, Lq = Lk = N, E = Ev = D)
//   --reps N                      timed calls per engine and shape (default 10)
//   --causal                      isCausal: true (GFLOP/s then count the visible half)
//   --engines webgpu,simd         subset (default both; simd uses every core)
//   --json FILE                   also write the results as JSON
//
// The adapter is whatever dawn.node finds: a GPU through its vendor's Vulkan driver, or, with no
// GPU, SwiftShader (VK_ICD_FILENAMES defaults to Debian Chromium's ICD; SwiftShader is Vulkan on
// the CPU: correctness, not GPU speed). Before it is timed, every engine's output is checked
// against the float64 reference with the tests' rule (max|o − o64| ≤ 4·e_ref + 1e-5·max(1,|V|max),
// e_ref the plain float32 error), on the first and last head's first 128 query rows (the float64
// reference of a whole large call would take minutes); a failing engine reports the error
// instead of a time. A call's time is what a user waits for: upload, kernels, read-back.
// GFLOP/s = 4·BH·N²·D / time (half of that with --causal).
import { writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { create, globals } from 'webgpu';
import { createAttention } from '../dist/index.js';
import { maxAbsError, uniformRandom } from './bench/data.mjs';

process.env.VK_ICD_FILENAMES ??= '/usr/lib/chromium/vk_swiftshader_icd.json';
Object.assign(globalThis, globals);
const gpu = create([]); // keep referenced for the whole run

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const shapes = opt('shapes', '1x128x64,1x512x64,1x1024x64,1x2048x64,12x512x64,1x4096x64,8x256x32,16x1024x64,32x2048x64,8x4096x128')
  .split(',')
  .map((s) => s.split('x').map(Number));
const reps = Number(opt('reps', 10));
const isCausal = args.includes('--causal');
const engines = opt('engines', 'webgpu,simd').split(',');
const jsonPath = opt('json', undefined);
const CHECK_ROWS = 128;

const adapter = await gpu.requestAdapter();
const info = adapter?.info ?? {};
console.log(`adapter: ${adapter ? `${info.vendor} ${info.architecture} ${info.description} (fallback: ${info.isFallbackAdapter})` : 'none'}`);
if (adapter) {
  const l = adapter.limits;
  console.log(`limits: maxComputeWorkgroupStorageSize ${l.maxComputeWorkgroupStorageSize}, maxStorageBufferBindingSize ${l.maxStorageBufferBindingSize}, maxComputeInvocationsPerWorkgroup ${l.maxComputeInvocationsPerWorkgroup}; features: ${[...adapter.features].sort().join(' ')}`);
}
const instances = {};
if (engines.includes('webgpu')) {
  instances.webgpu = await createAttention({ backend: 'webgpu', gpu }).catch((e) => {
    console.error(`WebGPU unavailable: ${e.message}`);
    return undefined;
  });
}
if (engines.includes('simd')) instances.simd = await createAttention({ backend: 'simd' });
const oracle = await createAttention({ backend: 'scalar' });
console.log(`simd threads: ${instances.simd?.threads ?? '-'}; causal: ${isCausal}; reps: ${reps}`);

/** The first CHECK_ROWS query rows of head `h` as a one-head problem (top-left causal keeps its meaning). */
function headSlice(t, h, rows) {
  const [BH, N, D] = t.shape;
  return { data: t.data.subarray(h * N * D, h * N * D + rows * D), shape: [1, 1, rows, D] };
}

/** Error of `got` against float64 on the first and last head's first rows, and the rule's bound. */
function check(got, q, k, v) {
  const [BH, N, D] = q.shape;
  const rows = Math.min(N, CHECK_ROWS);
  let err = 0, bound = Infinity;
  for (const h of new Set([0, BH - 1])) {
    const qs = headSlice(q, h, rows), ks = headSlice(k, h, N), vs = headSlice(v, h, N);
    const ref = oracle.referenceAttention(qs, ks, vs, { isCausal });
    const plain = oracle.scaledDotProductAttentionSync(qs, ks, vs, { isCausal });
    const mine = got.subarray(h * N * D, h * N * D + rows * D);
    err = Math.max(err, maxAbsError(mine, ref.output.data));
    const vmax = vs.data.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
    bound = Math.min(bound, 4 * maxAbsError(plain.output.data, ref.output.data) + 1e-5 * Math.max(1, vmax));
  }
  return { err, bound };
}

const results = [];
console.log('BHxNxD        engine   median ms    min ms   GFLOP/s   max err (bound)');
for (const [BH, N, D] of shapes) {
  const shape = [1, BH, N, D];
  const q = { data: uniformRandom(BH * N * D, 1, -0.5, 0.5), shape };
  const k = { data: uniformRandom(BH * N * D, 2, -0.5, 0.5), shape };
  const v = { data: uniformRandom(BH * N * D, 3, -0.5, 0.5), shape };
  const flat = { q: { data: q.data, shape: [BH, N, D] }, k: { data: k.data, shape: [BH, N, D] }, v: { data: v.data, shape: [BH, N, D] } };
  const flops = 4 * BH * N * N * D * (isCausal ? 0.5 : 1);
  for (const [name, attn] of Object.entries(instances)) {
    if (!attn) continue;
    const label = `${`${BH}x${N}x${D}`.padEnd(13)} ${name.padEnd(8)}`;
    const first = await attn.scaledDotProductAttention(q, k, v, { isCausal }); // also compiles pipelines
    const { err, bound } = check(first.output.data, flat.q, flat.k, flat.v);
    if (!(err <= bound)) {
      console.log(`${label} ERROR: max error ${err.toExponential(2)} > bound ${bound.toExponential(2)}`);
      results.push({ shape: [BH, N, D], engine: name, error: `max error ${err} > ${bound}` });
      continue;
    }
    const times = [];
    for (let r = 0; r < reps; r++) {
      const t0 = performance.now();
      await attn.scaledDotProductAttention(q, k, v, { isCausal });
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    const median = times[Math.floor(times.length / 2)];
    const gflops = flops / median / 1e6;
    console.log(`${label} ${median.toFixed(2).padStart(9)} ${times[0].toFixed(2).padStart(9)} ${gflops.toFixed(1).padStart(9)}   ${err.toExponential(1)} (${bound.toExponential(1)})`);
    results.push({ shape: [BH, N, D], engine: name, medianMs: median, minMs: times[0], gflops, maxError: err, bound });
  }
}
if (jsonPath) writeFileSync(jsonPath, JSON.stringify({ adapter: info, causal: isCausal, results }, null, 2));
for (const attn of Object.values(instances)) attn?.dispose();
oracle.dispose();
process.exit(0);
