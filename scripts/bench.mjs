#!/usr/bin/env node
// npm run bench [-- options]: scaled dot-product attention, sdpa-web against its peers, in Node.
//
//   --shapes 1x128x64,1x512x64   BHxNxD list (Lq = Lk = N, E = Ev = D; default: the issue's set)
//   --engines a,b                 subset of: sdpa-scalar sdpa-simd-1t sdpa-simd-mt sdpa-simd128-1t
//                                 sdpa-simd-1t-out sdpa-simd-mt-out sdpa-webgpu ort-1t ort-1t-out
//                                 ort-mha-1t ort-2t ort-mha-2t tfjs-wasm js (default: all)
//                                 (*-out: every call writes into one reused output array,
//                                 sdpa-web's options.out and onnxruntime-web's pre-allocated output)
//   --reps N                      timed repetitions per engine and shape (default 15)
//   --threads N                   threads for sdpa-simd-mt (default: every core)
//   --budget-ms MS                fewer reps (>= 3) for an engine whose three calls take longer
//                                 than MS / reps (default 6000: the slow plain-JS/scalar runs)
//   --long / --no-long            the long-context runs (32k, 16k causal; default on)
//   --backward / --no-backward    the backward pass (scripts/bench-backward.mjs; default on)
//   --two-cores / --no-two-cores  the two-core ceiling (scripts/bench/two-cores.mjs), where a
//                                 call's time goes on 1 and 2 threads (scripts/bench/call-
//                                 breakdown.mjs) and waking a thread after idle (scripts/bench/
//                                 wake-after-idle.mjs); default on when sdpa-simd-mt runs on 2 or
//                                 more threads
//   --out DIR                     where the JSON + SVG go (default bench-output/)
//
// Method: one Node process times every engine on a shape, interleaved round by round (the
// machine is shared and noisy: medians and ratios from the same rounds are what to compare).
// In a round each engine, after a pause of at least 20 ms that lasts until no thread of the
// process is busy (other engines' thread pools have stopped spinning), makes three calls back to
// back and the third is timed: the steady state of a model that calls attention layer after
// layer. The first ("cold": helper threads asleep, caches holding other data) is reported too.
// onnxruntime-web fixes its thread count per process, so its 2-thread engines run in a child
// process that also times sdpa-simd-mt for a same-process ratio. Every engine's output is first
// checked against a float64 plain-JS reference (max abs error <= 1e-4 on inputs in [-1, 1]); a
// failing engine reports the error instead of a time. GFLOP/s = 4·BH·N²·D / time. The peak
// probe measures f32x4 mul+add throughput on one core, and f32x4.relaxed_madd throughput where
// the engine has relaxed SIMD (scripts/bench/peak.mjs).
// sdpa-simd-* run the relaxed-SIMD build (fused multiply-add) where the engine has it, as users
// get by default; node 20 has it behind --experimental-wasm-relaxed-simd, so the bench re-runs
// itself with that flag there. sdpa-simd128-1t is the SIMD128 build (relaxedSimd: false).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { callBreakdown } from './bench/call-breakdown.mjs';
import { maxAbsError, uniformRandom } from './bench/data.mjs';
import { ENGINE_LABELS, engineFactories, jsAttention } from './bench/engines.mjs';
import { peakProbe } from './bench/peak.mjs';
import { svgChart } from './bench/plot.mjs';
import { twoCoreCeiling } from './bench/two-cores.mjs';
import { wakeAfterIdle } from './bench/wake-after-idle.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DEFAULT_SHAPES = '1x128x64,1x512x64,1x1024x64,1x2048x64,12x512x64,1x4096x64,8x256x32';
const ALL_ENGINES = ['sdpa-scalar', 'sdpa-simd-1t', 'sdpa-simd-mt', 'sdpa-simd128-1t', 'sdpa-simd-1t-out', 'sdpa-simd-mt-out', 'sdpa-webgpu', 'ort-1t', 'ort-1t-out', 'ort-mha-1t', 'ort-2t', 'ort-mha-2t', 'tfjs-wasm', 'js'];
const CHILD_ENGINES = new Set(['ort-2t', 'ort-mha-2t']);
const TOLERANCE = 1e-4;
/** Shortest call whose CPU time on several threads is worth printing: 10 scheduler ticks of 4 ms. */
const CPU_TIME_MIN_CALL_MS = 40;
/**
 * Pause before each engine's calls in a round: at least ENGINE_PAUSE_MS, then on in steps until
 * the process used under a tenth of a core in a step. A fixed pause is not enough: onnxruntime-web's
 * 2-thread pool keeps spinning for 20–45 ms after a call on this VM, and sdpa-web's threads then
 * shared the two cores with it.
 */
const ENGINE_PAUSE_MS = 20;
const QUIET_STEP_MS = 5;
const QUIET_MAX_MS = 500;

async function pauseUntilQuiet() {
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const start = performance.now();
  await sleep(ENGINE_PAUSE_MS);
  while (performance.now() - start < QUIET_MAX_MS) {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await sleep(QUIET_STEP_MS);
    const cpu = process.cpuUsage(cpu0);
    if ((cpu.user + cpu.system) / 1000 < 0.1 * (performance.now() - t0)) break;
  }
  return performance.now() - start;
}

function parseArgs(argv) {
  const o = { shapes: DEFAULT_SHAPES, engines: ALL_ENGINES.join(','), reps: 15, threads: undefined, budgetMs: 6000, long: true, backward: true, twoCores: true, out: join(ROOT, 'bench-output'), child: undefined };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--shapes') o.shapes = value();
    else if (a === '--engines') o.engines = value();
    else if (a === '--reps') o.reps = Math.max(1, parseInt(value(), 10));
    else if (a === '--threads') o.threads = parseInt(value(), 10);
    else if (a === '--budget-ms') o.budgetMs = Number(value());
    else if (a === '--long') o.long = true;
    else if (a === '--no-long') o.long = false;
    else if (a === '--backward') o.backward = true;
    else if (a === '--no-backward') o.backward = false;
    else if (a === '--two-cores') o.twoCores = true;
    else if (a === '--no-two-cores') o.twoCores = false;
    else if (a === '--out') o.out = value();
    else if (a === '--child') o.child = value();
    else if (a === '--help' || a === '-h') {
      console.log(readHelp());
      process.exit(0);
    } else throw new Error(`unknown option ${a} (see --help)`);
  }
  o.shapeList = o.shapes.split(',').map((s) => {
    const dims = s.trim().split('x').map(Number);
    if (dims.length !== 3 || dims.some((x) => !Number.isInteger(x) || x < 1)) throw new Error(`bad shape ${s}: want BHxNxD`);
    return dims;
  });
  o.engineList = o.engines.split(',').map((e) => e.trim());
  for (const e of o.engineList) if (!ALL_ENGINES.includes(e)) throw new Error(`unknown engine ${e}; known: ${ALL_ENGINES.join(' ')}`);
  return o;
}

function readHelp() {
  return '(see the header of scripts/bench.mjs)';
}

const flops = ([bh, n, d]) => 4 * bh * n * n * d;
const shapeName = ([bh, n, d]) => `${bh}x${n}x${d}`;

function randomInputs([bh, n, d], seed) {
  const make = (stream) => uniformRandom(bh * n * d, seed * 3 + stream);
  return { q: make(0), k: make(1), v: make(2) };
}

function stats(times) {
  const t = [...times].sort((a, b) => a - b);
  return { medianMs: t[t.length >> 1], minMs: t[0], reps: t.length };
}

/** Times `engines` (name -> factory) on every shape, interleaved. Returns rows and engine infos. */
async function benchShapes(opts, names) {
  const factories = engineFactories(opts.threads);
  const engines = {};
  const infos = {};
  for (const name of names) {
    try {
      engines[name] = await factories[name]();
      infos[name] = engines[name].info;
    } catch (e) {
      engines[name] = { error: String(e?.message ?? e) };
      infos[name] = { error: engines[name].error };
    }
  }
  const rows = [];
  for (const shape of opts.shapeList) {
    const inputs = randomInputs(shape, 1234 + shape[1]);
    log(`${shapeName(shape)}: float64 reference...`);
    const reference = jsAttention(inputs.q, inputs.k, inputs.v, ...shape, Float64Array);
    const live = [];
    for (const name of names) {
      const row = { shape: shapeName(shape), engine: name, flops: flops(shape) };
      rows.push(row);
      if (engines[name].error) {
        row.error = engines[name].error;
        continue;
      }
      try {
        const instance = await engines[name].setup(shape, inputs);
        const t0 = performance.now();
        const out = await instance.run();
        const firstMs = performance.now() - t0;
        row.maxAbsError = maxAbsError(out, reference);
        if (!(row.maxAbsError <= TOLERANCE)) {
          row.error = `wrong result: max abs error ${row.maxAbsError} > ${TOLERANCE}`;
          instance.dispose();
          continue;
        }
        // warm-up: V8 runs wasm in its baseline tier first and swaps in optimized code once a
        // function is hot, so time only after a few calls / a few hundred ms
        let lastMs = firstMs;
        for (let w = 0, spent = firstMs; w < 30 && (w < 3 || spent < 400) && spent < 3000; w++) {
          const tw = performance.now();
          await instance.run();
          lastMs = performance.now() - tw;
          spent += lastMs;
        }
        const reps = Math.min(opts.reps, Math.max(3, Math.floor(opts.budgetMs / (3 * Math.max(lastMs, 1e-3)))));
        live.push({ name, row, instance, reps, times: [], cold: [], cpu: [], pauses: [] });
      } catch (e) {
        row.error = String(e?.message ?? e).split('\n')[0].slice(0, 300);
      }
    }
    log(`${shapeName(shape)}: timing ${live.map((l) => `${l.name}×${l.reps}`).join(' ')}`);
    const rounds = Math.max(0, ...live.map((l) => l.reps));
    for (let r = 0; r < rounds; r++) {
      // rotate the order every round, so no engine always runs right after another
      for (let i = 0; i < live.length; i++) {
        const l = live[(i + r) % live.length];
        if (l.times.length >= l.reps) continue;
        // A pause first, so that thread pools other engines left spinning (onnxruntime-web's,
        // sdpa-web's) go idle and do not compete with this engine's calls.
        l.pauses.push(await pauseUntilQuiet());
        // Two untimed calls first: the timed call then finds the engine in its steady state
        // (caches warm, helper threads awake), as a model calling attention layer after layer
        // does. The first call, made after the pause, is kept as the cold time.
        const tc = performance.now();
        await l.instance.run();
        l.cold.push(performance.now() - tc);
        await l.instance.run();
        const cpu0 = process.cpuUsage();
        const t = performance.now();
        await l.instance.run();
        l.times.push(performance.now() - t);
        const cpu = process.cpuUsage(cpu0);
        l.cpu.push((cpu.user + cpu.system) / 1000);
      }
    }
    for (const l of live) {
      Object.assign(l.row, stats(l.times));
      // process CPU time per call (all threads): robust to being descheduled on a shared machine
      l.row.cpuMedianMs = stats(l.cpu).medianMs;
      l.row.coldMedianMs = stats(l.cold).medianMs;
      l.row.pauseMedianMs = stats(l.pauses).medianMs;
      l.row.gflops = l.row.flops / l.row.medianMs / 1e6;
      l.instance.dispose();
    }
  }
  return { rows, infos };
}

/**
 * The long-context runs, in a fresh process (clean wasm memory for the heap-growth figure):
 * Lq = Lk = 32768 and 16384 (full and causal), E = Ev = 64, one head, no weights, on 1 thread
 * and on every core. Full and causal runs of a length alternate (rounds), so their ratio is
 * taken under the same load; CPU seconds are reported too (robust to being descheduled).
 */
async function benchLong() {
  const { createAttention } = await import('../dist/index.js');
  const { attentionRequest } = await import('../dist/arguments.js');
  const results = [];
  const one = await createAttention({ backend: 'simd', threads: 1 });
  const many = await createAttention({ backend: 'simd' });
  const engines = many.threads > 1 ? [one, many] : [one];
  const cases = [
    { n: 32768, causal: false, rounds: 1 },
    { n: 16384, causal: false, rounds: 3 },
    { n: 16384, causal: true, rounds: 3 },
  ];
  const state = new Map();
  for (const attn of engines) {
    const before = attn.memoryStats();
    for (const n of [32768, 16384]) {
      const shape = [1, n, 64];
      const { q, k, v } = randomInputs(shape, 7);
      const t = (data) => ({ data, shape });
      const mine = cases.filter((c) => c.n === n);
      for (let r = 0; r < Math.max(...mine.map((c) => c.rounds)); r++) {
        for (const c of mine) {
          if (r >= c.rounds) continue;
          const key = `${attn.threads}/${n}/${c.causal}`;
          if (!state.has(key)) state.set(key, { c, attn, times: [], cpu: [], out: undefined, q, k, v });
          const st = state.get(key);
          const cpu0 = process.cpuUsage();
          const start = performance.now();
          st.out = attn.scaledDotProductAttentionSync(t(q), t(k), t(v), { isCausal: c.causal }).output.data;
          st.times.push(performance.now() - start);
          const cpu = process.cpuUsage(cpu0);
          st.cpu.push((cpu.user + cpu.system) / 1000);
          log(`long: n=${n}${c.causal ? ' causal' : ''} threads=${attn.threads}: ${st.times.at(-1).toFixed(0)} ms`);
        }
      }
    }
    const after = attn.memoryStats();
    for (const st of state.values()) {
      if (st.attn !== attn || st.done) continue;
      st.done = true;
      const { c } = st;
      // the workspace this call allocates, from the plan (internal, for this report only)
      const shape = [1, c.n, 64];
      const request = attentionRequest({ data: st.q, shape }, { data: st.k, shape }, { data: st.v, shape }, { isCausal: c.causal });
      const plan = attn.module.planAttention({ ...request, threads: attn.threads });
      let err = 0;
      for (const i of [0, 1, 777, c.n >> 1, c.n - 3, c.n - 1]) err = Math.max(err, rowError(st.q, st.k, st.v, st.out, c.n, 64, i, c.causal));
      const s = stats(st.times);
      results.push({
        n: c.n, d: 64, causal: c.causal, threads: attn.threads, ...s, cpuMs: Math.min(...st.cpu),
        gflopsNominal: (4 * c.n * c.n * 64) / s.medianMs / 1e6,
        memoryBytesBefore: before.memoryBytes, memoryBytesAfter: after.memoryBytes,
        heapGrowthBytes: after.memoryBytes - before.memoryBytes,
        inputOutputBytes: 4 * 4 * c.n * 64, workspaceBytes: plan.workspaceBytes.simd, spotCheckMaxAbsError: err,
      });
    }
  }
  return results;
}

function rowError(q, k, v, out, n, d, i, causal) {
  const last = causal ? i : n - 1;
  const s = new Float64Array(last + 1);
  let max = -Infinity;
  for (let j = 0; j <= last; j++) {
    let dot = 0;
    for (let e = 0; e < d; e++) dot += q[i * d + e] * k[j * d + e];
    s[j] = dot / Math.sqrt(d);
    max = Math.max(max, s[j]);
  }
  let sum = 0;
  for (let j = 0; j <= last; j++) sum += s[j] = Math.exp(s[j] - max);
  let err = 0;
  for (let e = 0; e < d; e++) {
    let o = 0;
    for (let j = 0; j <= last; j++) o += s[j] * v[j * d + e];
    err = Math.max(err, Math.abs(o / sum - out[i * d + e]));
  }
  return err;
}

function log(msg) {
  process.stderr.write(`[bench] ${msg}\n`);
}

function runChild(mode, opts, engines) {
  const args = [fileURLToPath(import.meta.url), '--child', mode, '--shapes', opts.shapes, '--reps', String(opts.reps), '--budget-ms', String(opts.budgetMs)];
  if (engines) args.push('--engines', engines.join(','));
  if (opts.threads) args.push('--threads', String(opts.threads));
  const out = execFileSync(process.execPath, [...process.execArgv, ...args], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 26 });
  return JSON.parse(out.slice(out.lastIndexOf('\n{') + 1));
}

function fmt(x, digits = 2) {
  return x === undefined ? '' : x >= 100 ? x.toFixed(0) : x.toFixed(digits);
}

function printTable(rows, peak) {
  const byShape = new Map();
  for (const r of rows) {
    if (!byShape.has(r.shape)) byShape.set(r.shape, []);
    byShape.get(r.shape).push(r);
  }
  const header = ['shape', 'engine', 'median ms', 'min ms', 'cold ms', 'GFLOP/s', '×ort-1t', '%peak', 'CPU ms', 'max err'];
  const lines = [header];
  for (const [shape, list] of byShape) {
    const ort1 = list.find((r) => r.engine === 'ort-1t' && r.medianMs);
    for (const r of list) {
      if (r.error) {
        lines.push([shape, ENGINE_LABELS[r.engine] ?? r.engine, 'error: ' + r.error.slice(0, 90), '', '', '', '', '', '', '']);
        continue;
      }
      r.ratioToOrt1 = ort1 ? ort1.medianMs / r.medianMs : undefined;
      r.percentOfPeak = peak ? (100 * r.gflops) / peak : undefined;
      lines.push([shape, ENGINE_LABELS[r.engine] ?? r.engine, fmt(r.medianMs, 3), fmt(r.minMs, 3), fmt(r.coldMedianMs, 3), fmt(r.gflops, 1), r.ratioToOrt1 ? fmt(r.ratioToOrt1) + '×' : '', r.engine.startsWith('sdpa-simd') ? fmt(r.percentOfPeak, 0) + '%' : '', fmt(r.cpuMedianMs, 3), r.maxAbsError?.toExponential(1) ?? '']);
    }
  }
  const widths = header.map((_, c) => Math.max(...lines.filter((l) => !String(l[2]).startsWith('error') || c < 2).map((l) => String(l[c]).length)));
  for (const [i, l] of lines.entries()) {
    if (String(l[2]).startsWith('error')) console.log(`${l[0].padEnd(widths[0])}  ${l[1].padEnd(widths[1])}  ${l[2]}`);
    else console.log(l.map((x, c) => (c < 2 ? String(x).padEnd(widths[c]) : String(x).padStart(widths[c]))).join('  '));
    if (i === 0) console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  }
}

const RELAXED_SIMD_FLAG = '--experimental-wasm-relaxed-simd';

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (!existsSync(join(ROOT, 'dist/index.js'))) {
    console.error('dist/ is missing: build first (npm run build:lib, or bash scripts/build.sh)');
    process.exit(1);
  }
  // The library's own check (not exported from the package; this is its build output).
  const { relaxedSimdUnavailableReason } = await import('../dist/relaxed-simd.js');
  if (relaxedSimdUnavailableReason() && !process.execArgv.includes(RELAXED_SIMD_FLAG)) {
    const run = spawnSync(process.execPath, [RELAXED_SIMD_FLAG, ...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit' });
    process.exit(run.status ?? 1);
  }
  if (opts.child === 'shapes') {
    const result = await benchShapes(opts, opts.engineList);
    process.stdout.write('\n' + JSON.stringify(result) + '\n');
    process.exit(0);
  }
  if (opts.child === 'long') {
    process.stdout.write('\n' + JSON.stringify({ long: await benchLong() }) + '\n');
    process.exit(0);
  }

  const startedAt = new Date().toISOString();
  const machine = { cpu: cpus()[0]?.model, cores: availableParallelism(), node: process.version, v8: process.versions.v8 };
  log(`machine: ${machine.cpu}, ${machine.cores} cores, node ${machine.node}`);
  const peakBefore = await peakProbe();
  log(`peak probe: ${peakBefore.medianGflops.toFixed(1)} GFLOP/s median (max ${peakBefore.maxGflops.toFixed(1)})`);
  const fusedBefore = await peakProbe(9, true);
  if (fusedBefore) log(`relaxed_madd peak probe: ${fusedBefore.medianGflops.toFixed(1)} GFLOP/s median (max ${fusedBefore.maxGflops.toFixed(1)})`);

  const parentEngines = opts.engineList.filter((e) => !CHILD_ENGINES.has(e));
  const childEngines = opts.engineList.filter((e) => CHILD_ENGINES.has(e));
  let child = { rows: [], infos: {} };
  if (childEngines.length) {
    // ort 2 threads, with sdpa-simd-mt again for a same-process comparison
    log(`child process: ${childEngines.join(', ')} + sdpa-simd-mt`);
    child = runChild('shapes', opts, [...childEngines, 'sdpa-simd-mt']);
  }
  const parent = await benchShapes(opts, parentEngines);
  const peakAfter = await peakProbe();
  const fusedAfter = await peakProbe(9, true);
  const mulAddPeak = Math.max(peakBefore.medianGflops, peakAfter.medianGflops);
  const fusedPeak = fusedBefore && Math.max(fusedBefore.medianGflops, fusedAfter.medianGflops);
  // %peak is against the higher of the two: a fused multiply-add must not make the bar lower.
  const peak = Math.max(mulAddPeak, fusedPeak ?? 0);
  log(`peak probes again: mul+add ${peakAfter.medianGflops.toFixed(1)}${fusedAfter ? `, relaxed_madd ${fusedAfter.medianGflops.toFixed(1)}` : ''} GFLOP/s median`);

  // rows in engine order, shape by shape
  const rows = [];
  for (const shape of opts.shapeList.map(shapeName)) {
    for (const e of opts.engineList) {
      const r = (CHILD_ENGINES.has(e) ? child.rows : parent.rows).find((x) => x.shape === shape && x.engine === e);
      if (r) rows.push(r);
    }
  }
  console.log(`\nsdpa-web bench — ${startedAt} — ${machine.cpu}, ${machine.cores} cores, node ${machine.node}`);
  console.log(`peak probe (f32x4 mul+add, 12 chains, 1 core): ${fmt(mulAddPeak, 1)} GFLOP/s (median of a run before and after; best single run ${fmt(Math.max(peakBefore.maxGflops, peakAfter.maxGflops), 1)})`);
  if (fusedPeak) console.log(`peak probe (f32x4.relaxed_madd, 12 chains, 1 core): ${fmt(fusedPeak, 1)} GFLOP/s (best single run ${fmt(Math.max(fusedBefore.maxGflops, fusedAfter.maxGflops), 1)})`);
  console.log(`sdpa-web SIMD build: ${parent.infos['sdpa-simd-1t']?.relaxedSimd ? 'relaxed SIMD (fused multiply-add)' : 'SIMD128'}; sdpa-web SIMD128 = relaxedSimd: false`);
  console.log(`medians over interleaved rounds (the third of three back-to-back calls; cold ms = the first's median); ×ort-1t = onnxruntime-web graph 1 thread median / engine median; %peak = GFLOP/s / the higher peak probe;`);
  console.log(`CPU ms = median process CPU time per call (all threads; for 1-thread engines a load-robust cost; Linux counts a thread running on another core in scheduler ticks, 4 ms on the benchmark VM, so for threaded engines it means something only for calls of tens of ms)\n`);
  printTable(rows, peak);

  const sameProcess = [];
  for (const shape of opts.shapeList.map(shapeName)) {
    const mt = child.rows.find((r) => r.shape === shape && r.engine === 'sdpa-simd-mt' && r.medianMs);
    for (const e of childEngines) {
      const o = child.rows.find((r) => r.shape === shape && r.engine === e && r.medianMs);
      if (mt && o) sameProcess.push({ shape, engine: e, sdpaThreadsMedianMs: mt.medianMs, otherMedianMs: o.medianMs, sdpaSpeedup: o.medianMs / mt.medianMs, coldSpeedup: o.coldMedianMs / mt.coldMedianMs });
    }
  }
  if (sameProcess.length) {
    console.log('\nsame-process check (child process): sdpa-web SIMD threads vs onnxruntime-web 2 threads');
    for (const s of sameProcess) console.log(`  ${s.shape.padEnd(10)} ${ENGINE_LABELS[s.engine].padEnd(26)} ${fmt(s.otherMedianMs, 3)} ms vs ${fmt(s.sdpaThreadsMedianMs, 3)} ms: sdpa-web ${fmt(s.sdpaSpeedup)}× (cold calls ${fmt(s.coldSpeedup)}×)`);
  }

  const scaling = [];
  for (const [oneName, mtName, outputs] of [['sdpa-simd-1t', 'sdpa-simd-mt', 'new'], ['sdpa-simd-1t-out', 'sdpa-simd-mt-out', 'out']]) {
    for (const shape of opts.shapeList.map(shapeName)) {
      const one = rows.find((r) => r.shape === shape && r.engine === oneName && r.medianMs);
      const mt = rows.find((r) => r.shape === shape && r.engine === mtName && r.medianMs);
      if (!one || !mt) continue;
      // Other threads' CPU time arrives in scheduler ticks (see the table's note): too coarse for short calls.
      const cpuCounts = mt.medianMs >= CPU_TIME_MIN_CALL_MS;
      scaling.push({ shape, outputs, speedup: one.medianMs / mt.medianMs, coldSpeedup: one.coldMedianMs / mt.coldMedianMs, threads: parent.infos[mtName]?.threads, coresUsed: cpuCounts ? mt.cpuMedianMs / mt.medianMs : undefined, cpuOverhead: cpuCounts ? mt.cpuMedianMs / one.cpuMedianMs : undefined });
    }
  }
  if (scaling.length) {
    console.log(`\nsdpa-web SIMD threads vs its own 1 thread (same rounds; outputs: new arrays, or one reused out array): speedup of the median (and of the cold calls' median); for calls of ${CPU_TIME_MIN_CALL_MS} ms or more, cores it kept busy (CPU ms / ms) and its CPU time over the 1-thread CPU time (threading overhead)`);
    for (const s of scaling) console.log(`  ${s.shape.padEnd(10)} ${s.outputs.padEnd(3)} ${s.threads} threads: ${fmt(s.speedup)}× (cold ${fmt(s.coldSpeedup)}×)${s.coresUsed === undefined ? '' : `, ${fmt(s.coresUsed)} cores busy, CPU ${fmt(s.cpuOverhead)}×`}`);
  }

  const twoCores = [];
  const breakdown = [];
  const threadCount = parent.infos['sdpa-simd-mt']?.threads ?? 0;
  const threadProbes = opts.twoCores && threadCount >= 2;
  if (threadProbes) {
    const { createAttention } = await import('../dist/index.js');
    const threaded = await createAttention({ backend: 'simd', threads: opts.threads });
    for (const shape of opts.shapeList) {
      log(`${shapeName(shape)}: two-core ceiling...`);
      const { q, k, v } = randomInputs(shape, 99);
      const tensors = [q, k, v].map((data) => ({ data, shape }));
      twoCores.push(await twoCoreCeiling({ dist: new URL('../dist/index.js', import.meta.url).href, shape: shapeName(shape), tensors, flops: flops(shape), threaded }));
    }
    const one = await createAttention({ backend: 'simd', threads: 1 });
    for (const shape of opts.shapeList) {
      log(`${shapeName(shape)}: call breakdown...`);
      const { q, k, v } = randomInputs(shape, 98);
      breakdown.push({ shape: shapeName(shape), ...(await callBreakdown({ one, many: threaded, shape, tensors: [q, k, v] })) });
    }
    one.dispose();
    threaded.dispose();
    console.log(`\ntwo-core ceiling (throughput of back-to-back calls for 0.5 s, median of 5 rounds): one 1-thread worker alone; two such workers at once, each with its own instance (the machine's own 2-core scaling: nothing shared); sdpa-web on ${threadCount} threads in between`);
    for (const t of twoCores) console.log(`  ${t.shape.padEnd(10)} alone ${fmt(t.aloneGflops, 1)}, two at once ${fmt(t.pairGflops, 1)} (${fmt(t.machineScaling)}×), sdpa-web threads ${fmt(t.threadsGflops, 1)} GFLOP/s (${fmt(t.threadsScaling)}× alone, ${fmt(100 * t.ofCeiling, 0)}% of two at once)`);
  }

  if (breakdown.length) {
    const phases = (x) => `${fmt(x.copyIn, 1)} + ${fmt(x.kernel, 1)} + ${fmt(x.copyOut, 1)}`;
    console.log('\ncall breakdown (scripts/bench/call-breakdown.mjs; back-to-back calls, median of 5 rounds): µs per call copying the inputs into the heap + in the kernel + reading the output; the copies are serial, and into the threads module\'s shared memory slower');
    for (const b of breakdown) console.log(`  ${b.shape.padEnd(10)} 1 thread ${phases(b.oneThread)}, ${b.threads} threads ${phases(b.manyThreads)}: kernel ${fmt(b.kernelSpeedup)}×, call ${fmt(b.callSpeedup)}×`);
  }

  let wake;
  if (threadProbes) {
    log('waking a thread after idle...');
    wake = await wakeAfterIdle();
    console.log(`\nwaking after idle (scripts/bench/wake-after-idle.mjs; median of 9): after the process idled, the main thread wakes a worker from Atomics.wait and both run a ${fmt(wake.loopMs)} ms loop; 2× = both on their own core`);
    for (const w of wake.results) console.log(`  idle ${String(w.idleMs).padStart(3)} ms: worker running ${fmt(w.wakeMs, 3)} ms after the notify, both loops done ${fmt(w.speedup)}× as fast as one alone`);
  }

  let long = [];
  if (opts.long) {
    log('long context (child process)...');
    long = runChild('long', opts).long;
    console.log('\nlong context (1 head, E = Ev = 64, no weights, simd backend; wasm memory growth is per module, over all its runs):');
    for (const l of long) {
      console.log(`  Lq=Lk=${String(l.n).padEnd(6)} ${l.causal ? 'causal' : 'full  '} threads=${l.threads}: median ${fmt(l.medianMs, 0)} ms, min ${fmt(l.minMs, 0)} ms, CPU ${fmt(l.cpuMs, 0)} ms (${fmt(l.gflopsNominal, 1)} GFLOP/s nominal), workspace ${fmt(l.workspaceBytes / 2 ** 20, 2)} MiB, wasm memory ${fmt(l.memoryBytesBefore / 2 ** 20, 0)} -> ${fmt(l.memoryBytesAfter / 2 ** 20, 0)} MiB (inputs+output ${fmt(l.inputOutputBytes / 2 ** 20, 0)} MiB), spot-check err ${l.spotCheckMaxAbsError.toExponential(1)}`);
    }
    for (const threads of [...new Set(long.map((l) => l.threads))]) {
      const full = long.find((l) => l.threads === threads && l.n === 16384 && !l.causal);
      const causal = long.find((l) => l.threads === threads && l.n === 16384 && l.causal);
      if (full && causal) console.log(`  16k causal / full, threads=${threads}: ${fmt(causal.medianMs / full.medianMs)} (median), ${fmt(causal.cpuMs / full.cpuMs)} (CPU time)`);
    }
  }

  if (opts.backward) {
    // The backward pass (flops = 10·BH·n²·d), in its own process with its own table.
    console.log('\nbackward pass (scripts/bench-backward.mjs):');
    execFileSync(process.execPath, [...process.execArgv, join(ROOT, 'scripts', 'bench-backward.mjs'), '--reps', String(Math.min(opts.reps, 5))], { cwd: ROOT, stdio: 'inherit' });
  }

  mkdirSync(opts.out, { recursive: true });
  const report = { startedAt, machine, scaling, twoCores, callBreakdown: breakdown, wakeAfterIdle: wake, options: { shapes: opts.shapes, engines: opts.engines, reps: opts.reps, threads: opts.threads ?? 'default', budgetMs: opts.budgetMs }, peakProbe: { gflops: peak, mulAdd: { gflops: mulAddPeak, before: peakBefore, after: peakAfter }, relaxedMadd: fusedPeak && { gflops: fusedPeak, before: fusedBefore, after: fusedAfter } }, engines: { ...parent.infos, ...child.infos }, rows, sameProcess, long };
  const stamp = startedAt.replace(/[:.]/g, '-');
  for (const name of ['bench.json', `bench-${stamp}.json`]) writeFileSync(join(opts.out, name), JSON.stringify(report, null, 2));
  const svg = svgChart(rows, opts.shapeList.map(shapeName), opts.engineList, ENGINE_LABELS, peak, `sdpa-web bench ${startedAt.slice(0, 16)} — ${machine.cpu}, ${machine.cores} cores`);
  for (const name of ['bench.svg', `bench-${stamp}.svg`]) writeFileSync(join(opts.out, name), svg);
  console.log(`\nwrote ${join(opts.out, 'bench.json')} and bench.svg (and timestamped copies)`);
  process.exit(0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
