// A/B of two builds of the package in one process, for a machine shared with other jobs:
//   node --experimental-wasm-relaxed-simd scripts/bench/ab.mjs forward|decode OLD_DIST NEW_DIST [options]
// Both dist/ directories are imported side by side; for each case the old and the new instance
// are called alternately, round by round (the order swapped every round), 1 thread, and each
// side's outputs are checked against each other first. Each timed sample is a batch of calls;
// it records wall time and the process's CPU time (process.cpuUsage): CPU time leaves out the time
// the process waited for a core, the steadier measure on a loaded machine.
//   forward: scaledDotProductAttentionSync(q, k, v) on H×L×E shapes (B = 1, float32, no mask)
//   decode:  one step (B = 1, Hq = 32, Hkv = 8, E = Ev = 128, isCausal) on a KvCache of L
//            tokens of each cache dtype
// Options: --cases LIST (forward: HxLxE,...; decode: L,...), --rounds N (default 15),
// --dtypes LIST (decode; default float32,float16,int8,int4), --simd128 (the SIMD128 build instead
// of relaxed SIMD).
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    cases: { type: 'string' },
    rounds: { type: 'string', default: '15' },
    dtypes: { type: 'string', default: 'float32,float16,int8,int4' },
    simd128: { type: 'boolean', default: false },
  },
});
const [mode, oldDist, newDist] = positionals;
if (!['forward', 'decode'].includes(mode) || !oldDist || !newDist) {
  throw new Error('usage: ab.mjs forward|decode OLD_DIST NEW_DIST [--cases LIST] [--rounds N] [--dtypes LIST] [--simd128]');
}
const rounds = Number(values.rounds);
const load = (dist) => import(pathToFileURL(resolve(dist, 'index.js')).href);
const attns = await Promise.all(
  [oldDist, newDist].map(async (dist) => (await load(dist)).createAttention({ backend: 'simd', threads: 1, relaxedSimd: !values.simd128 })),
);

/** Deterministic uniform floats in [-1, 1). */
function uniform(n, seed) {
  let a = seed >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    a = (Math.imul(a, 1664525) + 1013904223) >>> 0;
    out[i] = a / 2 ** 31 - 1;
  }
  return out;
}

/** Old and new calls of each case: { name, flops, calls: [old, new] }. */
function forwardCases(list) {
  return list.split(',').map((text) => {
    const [H, L, E] = text.split('x').map(Number);
    const tensor = (seed) => ({ data: uniform(H * L * E, seed), shape: [1, H, L, E] });
    const [q, k, v] = [tensor(1), tensor(2), tensor(3)];
    return { name: text, flops: 4 * H * L * L * E, calls: attns.map((attn) => () => attn.scaledDotProductAttentionSync(q, k, v).output.data) };
  });
}

function decodeCases(list) {
  const Hq = 32, Hkv = 8, E = 128;
  return list.split(',').flatMap((text) => {
    const L = Number(text);
    const key = { data: uniform(Hkv * L * E, 1), shape: [1, Hkv, L, E] };
    const value = { data: uniform(Hkv * L * E, 2), shape: [1, Hkv, L, E] };
    const query = { data: uniform(Hq * E, 3), shape: [1, Hq, 1, E] };
    return values.dtypes.split(',').map((dtype) => ({
      name: `L=${L} ${dtype}`,
      flops: 4 * Hq * L * E,
      calls: attns.map((attn) => {
        const cache = attn.createKvCache({ batch: 1, kvHeads: Hkv, maxLength: L, headDim: E, dtype });
        cache.append(key, value);
        const options = { enableGqa: true, isCausal: true };
        return () => attn.scaledDotProductAttentionSync(query, cache, options).output.data;
      }),
    }));
  });
}

const cases = mode === 'forward'
  ? forwardCases(values.cases ?? '1x128x64,1x512x64,1x1024x64,12x512x64,8x256x32,1x2048x64')
  : decodeCases(values.cases ?? '2048,8192,32768');
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const fixed = (x) => x.toFixed(3);
console.log(`ab ${mode}: old ${oldDist}, new ${newDist}, ${values.simd128 ? 'SIMD128' : 'relaxed SIMD'} build, 1 thread, ${rounds} rounds`);
for (const c of cases) {
  const [oldOut, newOut] = c.calls.map((call) => call());
  let diff = 0;
  for (let i = 0; i < oldOut.length; i++) diff = Math.max(diff, Math.abs(oldOut[i] - newOut[i]));
  if (!(diff <= 1e-4)) throw new Error(`${c.name}: the builds differ by ${diff}`);
  const batch = Math.max(2, Math.round(2e8 / c.flops));  // about 0.2 GFLOP a sample
  const wall = [[], []], cpu = [[], []];
  for (let round = 0; round < rounds; round++) {
    for (const side of round % 2 ? [1, 0] : [0, 1]) {
      c.calls[side]();
      const cpu0 = process.cpuUsage(), wall0 = performance.now();
      for (let i = 0; i < batch; i++) c.calls[side]();
      wall[side].push((performance.now() - wall0) / batch);
      const used = process.cpuUsage(cpu0);
      cpu[side].push((used.user + used.system) / 1000 / batch);
    }
  }
  const [cpuOld, cpuNew] = cpu.map(median), [wallOld, wallNew] = wall.map(median);
  const minRatio = Math.min(...cpu[1]) / Math.min(...cpu[0]);
  console.log(
    `${c.name.padEnd(16)} CPU ms old ${fixed(cpuOld)} new ${fixed(cpuNew)}: new/old ${fixed(cpuNew / cpuOld)} (of minima ${fixed(minRatio)}); ` +
      `wall ms old ${fixed(wallOld)} new ${fixed(wallNew)}: new/old ${fixed(wallNew / wallOld)}`,
  );
}
