// The forward, backward and webgpu modes: every engine on every case, checked, then timed in
// interleaved rounds; one results table with the ratios.
import { createAttention } from '../../dist/index.js';
import { flops, makeCheck, makeInputs } from './cases.mjs';
import { ENGINES, checkFactor } from './engines.mjs';
import { profileLines } from './gpu-profile.mjs';
import { print } from './results.mjs';
import { interleave, warmUp } from './timing.mjs';

export const log = (msg) => process.stderr.write(`[bench] ${msg}\n`);
const message = (e) => String(e?.message ?? e).split('\n')[0].slice(0, 200);

/** Rows { case, engine, process, flops, medianMs, minMs, coldMs, cpuMs, reps, gflops, maxError, bound | error }. */
export async function benchCases(opts, names) {
  const ctx = { threads: opts.threads, causal: opts.causal, backward: opts.backward, baseline: opts.baseline, profile: opts.profile };
  const scalar = await createAttention({ backend: 'scalar' });
  const engines = [];
  for (const name of names) {
    engines.push(await ENGINES[name](ctx).then((e) => ({ name, ...e }), (e) => ({ name, error: message(e) })));
  }
  const rows = [];
  for (const c of opts.cases) {
    log(`${c.name}: inputs and the float64 reference`);
    const inputs = makeInputs(scalar, c);
    const check = makeCheck(scalar, inputs, ctx);
    // engines timing the forward beside the backward are checked (and their flops counted) as forwards
    const forwardCtx = { ...ctx, backward: false };
    const forwardCheck = engines.some((e) => e.checks === 'forward') ? makeCheck(scalar, inputs, forwardCtx) : undefined;
    const runners = [];
    for (const engine of engines) {
      const asForward = engine.checks === 'forward';
      const row = { case: c.name, engine: engine.name, process: 'main', flops: flops(c, asForward ? forwardCtx : ctx) };
      rows.push(row);
      if (engine.error) {
        row.error = engine.error;
        continue;
      }
      let instance;
      try {
        instance = await engine.setup(c, inputs);
        // `result` where `run` returns nothing (GPU-resident engines read their output back there)
        const verdict = (asForward ? forwardCheck : check)(await (instance.result ?? instance.run)(), checkFactor(engine.name));
        Object.assign(row, { maxError: verdict.error, bound: verdict.bound });
        if (!verdict.ok) throw new Error(`wrong result: max error ${verdict.error.toExponential(2)} > bound ${verdict.bound.toExponential(2)}`);
        const lastMs = await warmUp(instance.run);
        runners.push({ row, instance, run: instance.run, reps: Math.min(opts.reps, Math.max(3, Math.floor(opts.budgetMs / (3 * lastMs)))) });
      } catch (e) {
        row.error = message(e);
        instance?.dispose();
      }
    }
    log(`${c.name}: timing ${runners.map((r) => `${r.row.engine}×${r.reps}`).join(' ')}`);
    const results = await interleave(runners);
    for (const [i, { row, instance }] of runners.entries()) {
      Object.assign(row, results[i], { gflops: row.flops / results[i].medianMs / 1e6 });
      if (opts.profile && instance.profile) row.profile = await instance.profile().catch((e) => ({ error: message(e) }));
      instance.dispose();
    }
  }
  for (const engine of engines) engine.dispose?.();
  scalar.dispose();
  return { rows, engines: Object.fromEntries(engines.map((e) => [e.name, e.info ?? { error: e.error }])) };
}

/**
 * `engine`'s median over `row`'s: measured in the same process, or chained through sdpa-simd-mt,
 * which both processes time (ort-2t's child process).
 */
function versus(rows, row, engine) {
  const find = (name, process) => rows.find((r) => r.case === row.case && r.engine === name && r.medianMs && (!process || r.process === process));
  const other = find(engine);
  if (!other || !row.medianMs) return undefined;
  if (other.process === row.process) return other.medianMs / row.medianMs;
  const [a, b] = [find('sdpa-simd-mt', other.process), find('sdpa-simd-mt', row.process)];
  return a && b ? (other.medianMs / a.medianMs) * (b.medianMs / row.medianMs) : undefined;
}

const fmt = (x, digits = 2) => (x === undefined ? '' : x >= 100 ? x.toFixed(0) : x.toFixed(digits));

/** Prints the results table (and, with a baseline, time new/old per case); returns the ratios. */
export function printResults({ rows, engines }, opts) {
  for (const [name, info] of Object.entries(engines)) {
    print(`${name}: ${Object.entries(info).filter(([, v]) => v !== undefined).map(([k, v]) => `${k} ${v}`).join(', ')}`);
    if (info.adapter?.includes('(fallback adapter)')) {
      print(`  note: ${name} ran on a software fallback adapter (the GPU emulated on the CPU): its timings check that it works and say nothing about a GPU's speed; they are not judged`);
    }
  }
  print();
  const columns = {
    case: (r) => r.case,
    engine: (r) => (r.process === 'child' ? `${r.engine} (ort-2t process)` : r.engine),
    'median ms': (r) => fmt(r.medianMs, 3),
    'min ms': (r) => fmt(r.minMs, 3),
    'cold ms': (r) => fmt(r.coldMs, 3),
    'GFLOP/s': (r) => fmt(r.gflops, 1),
    '×ort-1t': (r) => fmt(versus(rows, r, 'ort-1t')),
    '×ort-2t': (r) => fmt(versus(rows, r, 'ort-2t')),
    reps: (r) => String(r.reps ?? ''),
    'max err (bound)': (r) => (r.maxError === undefined ? '' : `${r.maxError.toExponential(1)} (${r.bound.toExponential(1)})`),
  };
  const shown = Object.entries(columns).filter(([, cell]) => rows.some((r) => !r.error && cell(r) !== ''));
  const cells = rows.map((r) => (r.error ? [r.case, columns.engine(r), `error: ${r.error}`] : shown.map(([, cell]) => cell(r))));
  const widths = shown.map(([name], c) => Math.max(name.length, ...cells.filter((l) => l.length === shown.length || c < 2).map((l) => l[c].length)));
  const line = (l) => l.map((x, c) => (c < 2 ? x.padEnd(widths[c]) : l.length === shown.length ? x.padStart(widths[c]) : x)).join('  ');
  print(`${line(shown.map(([name]) => name))}\n${widths.map((w) => '-'.repeat(w)).join('  ')}`);
  for (const l of cells) print(line(l));
  const ratios = shown.some(([name]) => name.startsWith('×')) ? '; ×ort-1t/×ort-2t: its median over this one (above 1: faster), across processes chained through sdpa-simd-mt' : '';
  print(`medians of the third of three back-to-back calls (cold: the first) over interleaved rounds${ratios}`);
  const versusOrt = rows.filter((r) => r.medianMs).map((r) => ({ case: r.case, engine: r.engine, process: r.process, ort1t: versus(rows, r, 'ort-1t'), ort2t: versus(rows, r, 'ort-2t') }));
  const baseline = [];
  for (const r of rows) {
    const old = rows.find((o) => o.case === r.case && o.engine === `${r.engine}@baseline` && o.medianMs);
    if (old && r.medianMs) baseline.push({ case: r.case, engine: r.engine, newOverOld: r.medianMs / old.medianMs, minNewOverOld: r.minMs / old.minMs });
  }
  // Each WebGPU backward over the forward timed the same way (whole calls, or GPU-resident).
  const backwardOverForward = [];
  for (const [backward, forwardEngine] of [['sdpa-webgpu', 'sdpa-webgpu-forward'], ['sdpa-webgpu-resident', 'sdpa-webgpu-forward-resident']]) {
    for (const r of rows) {
      const forward = rows.find((o) => o.case === r.case && o.engine === forwardEngine && o.medianMs);
      if (r.engine === backward && r.medianMs && forward) backwardOverForward.push({ case: r.case, engines: `${backward} / ${forwardEngine}`, ratio: r.medianMs / forward.medianMs });
    }
  }
  if (backwardOverForward.length) {
    print('\nWebGPU backward / forward (whole calls: the forward with its log-sum-exp; resident: GPU tensors, output on the GPU), medians:');
    for (const b of backwardOverForward) print(`  ${b.case.padEnd(12)} ${b.engines.padEnd(52)} ${fmt(b.ratio, 2)}×`);
  }
  if (baseline.length) {
    print(`\ntime new/old (this dist/ over --baseline ${opts.baseline}, same rounds; below 1: the new build is faster): medians, and min times (less moved by a busy machine)`);
    for (const b of baseline) print(`  ${b.case.padEnd(12)} ${b.engine.padEnd(14)} ${fmt(b.newOverOld, 3)}  min ${fmt(b.minNewOverOld, 3)}`);
  }
  printProfiles(rows);
  return { ratios: versusOrt, baseline, backwardOverForward };
}

/** --profile: each profiled row's GPU time per kernel. */
export function printProfiles(rows) {
  const profiled = rows.filter((r) => r.profile);
  if (!profiled.length) return;
  print('\nGPU time per kernel of one call (--profile: timestamp queries, one pass per dispatch):');
  for (const r of profiled) {
    print(`  ${r.case} ${r.part ? `${r.part} ` : ''}${r.engine}`);
    for (const l of r.profile.error ? [`profile failed: ${r.profile.error}`] : profileLines(r.profile)) print(`    ${l}`);
  }
}
