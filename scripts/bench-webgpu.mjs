// Times the WebGPU backend next to SIMD on benchmark shapes, in Node: `npm run bench:webgpu`
// (options: --shapes B,H,L,E;... --reps N --causal). Needs `npm run build:lib` (imports dist/).
// The device is dawn.node (npm `webgpu`); with no GPU that is SwiftShader (Vulkan on the CPU:
// correctness, not GPU speed). GFLOP/s counts 2·Lq·Lk·(E + Ev) per head (QKᵀ and ·V).
import { performance } from 'node:perf_hooks';
import { create, globals } from 'webgpu';
import { createAttention } from '../dist/index.js';

process.env.VK_ICD_FILENAMES ??= '/usr/lib/chromium/vk_swiftshader_icd.json';
Object.assign(globalThis, globals);
const gpu = create([]); // keep referenced for the whole run

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : fallback;
};
const shapes = opt('shapes', '1,8,256,64;1,8,512,64;1,4,1024,64;1,1,2048,128')
  .split(';')
  .map((s) => s.split(',').map(Number));
const reps = Number(opt('reps', 5));
const isCausal = args.includes('--causal');

function random(n, seed) {
  let a = seed >>> 0;
  return Float32Array.from({ length: n }, () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296 - 0.5;
  });
}

const webgpu = await createAttention({ backend: 'webgpu', gpu }).catch((e) => {
  console.error(`WebGPU unavailable: ${e.message}`);
  return undefined;
});
const simd = await createAttention({ backend: 'simd' });
const adapter = await gpu.requestAdapter();
console.log(`device: ${adapter ? JSON.stringify({ vendor: adapter.info?.vendor, architecture: adapter.info?.architecture, description: adapter.info?.description }) : 'none'}`);
console.log('shape [B,H,L,E]      backend  median ms   GFLOP/s');
for (const [B, H, L, E] of shapes) {
  const q = { data: random(B * H * L * E, 1), shape: [B, H, L, E] };
  const k = { data: random(B * H * L * E, 2), shape: [B, H, L, E] };
  const v = { data: random(B * H * L * E, 3), shape: [B, H, L, E] };
  const flops = 2 * B * H * L * L * (E + E) * (isCausal ? 0.5 : 1);
  for (const [name, attn] of [['webgpu', webgpu], ['simd', simd]]) {
    if (!attn) continue;
    await attn.scaledDotProductAttention(q, k, v, { isCausal }); // warm-up (pipelines compile)
    const times = [];
    for (let r = 0; r < reps; r++) {
      const t0 = performance.now();
      await attn.scaledDotProductAttention(q, k, v, { isCausal });
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    const ms = times[Math.floor(times.length / 2)];
    console.log(`${`[${B},${H},${L},${E}]`.padEnd(20)} ${name.padEnd(8)} ${ms.toFixed(1).padStart(9)} ${(flops / ms / 1e6).toFixed(2).padStart(9)}`);
  }
}
webgpu?.dispose();
simd.dispose();
process.exit(0);
