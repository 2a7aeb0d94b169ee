#!/usr/bin/env node
// npm run gpu-check -- OUTDIR [--quick] [--icd FILE] [--suites FILES] [--baseline DIR]: what a machine's GPU does with sdpa-web's
// WebGPU backend, in one command that needs only this working tree (node_modules and a built
// dist/), no network and no rebuild, in at most 8 minutes:
//   1. the adapter: every Vulkan ICD of the machine (/etc/vulkan/icd.d, /usr/share/vulkan/icd.d,
//      then Chromium's SwiftShader) is probed by dawn.node in a child process; the first hardware
//      adapter is used, else the first software one (lavapipe, SwiftShader: NOT a GPU, and the
//      report says so). Its info, limits and features are printed and written.
//   2. the WebGPU test suites (tests/node/*webgpu*.test.ts, or the comma-separated --suites) on
//      that adapter.
//   3. `bench --mode webgpu --profile`: whole calls, GPU-resident prefill, decode steps on a GPU
//      KV cache of every dtype the build has, and onnxruntime-web's WebGPU EP where it runs; with
//      --baseline DIR also the GPU-resident engines of another build's dist/ in the same rounds,
//      and time new/old (a kernel change timed against its predecessor in one run).
//   4. `bench --mode backward --profile`: the WebGPU backward beside the GPU forward that saves
//      its log-sum-exp (backward/forward at 1×4096×64 causal and 8×1024×64), and each pass's GPU
//      time.
//   5. the GPU time of each kernel of one call of every GPU-resident engine (the benches'
//      --profile: timestamp queries, where the device has 'timestamp-query'), and of decode steps
//      again with 'subgroups' withheld (the tile kernels), where the devices have them.
// Writes OUTDIR/gpu-check.json and OUTDIR/gpu-check.md (and the pieces: vitest.json, bench.json,
// bench.md). --quick (the test step webgpu_f16, on lavapipe) runs one suite and a reduced case
// list. SDPA_WEBGPU_SUBGROUPS=0 reaches the suites and the benches, whose devices then lack
// 'subgroups' (scripts/webgpu-subgroups.mjs); the report says so. Exit status 1 when a suite or
// a bench check fails, 2 on bad arguments.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { baselineProblem, baselineRatios } from './bench/results.mjs';
import { subgroupsWithheld } from './webgpu-subgroups.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ICD_DIRS = ['/etc/vulkan/icd.d', '/usr/share/vulkan/icd.d'];
const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

// Full run: the issue's shapes (prefill 1×4096×64, decode B = 4, Hq = 32, Hkv = 8, E = 128,
// L = 32768), within the 8 minutes on a GPU. Quick: seconds of kernel work on a CPU Vulkan.
const PLANS = {
  full: {
    suites: null, // every tests/node/*webgpu*.test.ts
    bench: ['--cases', '1x512x64,1x4096x64,32x2048x64,8x4096x128', '--engines', 'sdpa-webgpu,sdpa-webgpu-f16', '--decode-cases', '2048,32768,4x32768,ragged:32768', '--reps', '10'],
    backward: [['--cases', '1x4096x64', '--causal', '--reps', '10'], ['--cases', '8x1024x64', '--reps', '10']],
    // The decode steps again with 'subgroups' withheld: the tile kernels beside the streaming ones.
    profileTiles: ['--cases', '', '--decode-cases', '32768,4x32768', '--reps', '3'],
    limits: { suitesS: 210, benchS: 170, backwardS: 30, profileTilesS: 30 },
  },
  quick: {
    // On lavapipe (the test step webgpu_f16): the float16 kernels with 'shader-f16' (the decode
    // kernel among them, with lavapipe's subgroups of 8). Lavapipe compiles each pipeline slowly:
    // more suites here outgrow a CI step on a busy 2-core machine.
    suites: ['tests/node/float16-gpu-webgpu.test.ts'],
    bench: ['--cases', '1x256x32', '--engines', 'sdpa-webgpu,sdpa-webgpu-f16', '--decode-cases', '512', '--reps', '3', '--budget-ms', '500'],
    backward: [['--cases', '1x64x32', '--causal', '--reps', '3']],
    profileTiles: ['--cases', '', '--decode-cases', '512', '--reps', '1', '--budget-ms', '300'],
    limits: { suitesS: 900, benchS: 900, backwardS: 300, profileTilesS: 300 }, // a CPU Vulkan on a busy machine: no 8-minute promise
  },
};

const HELP = `npm run gpu-check -- OUTDIR [--quick] [--icd FILE] [--suites FILES] [--baseline DIR]
  OUTDIR          where gpu-check.json and gpu-check.md (and the pieces) go
  --quick         one suite and a reduced bench (CI smoke test on a CPU Vulkan)
  --icd FILE      use this Vulkan ICD instead of probing the machine's
  --suites FILES  these WebGPU test files only (comma-separated, e.g. tests/node/decode-webgpu.test.ts)
  --baseline DIR  another build's dist/: its GPU-resident engines beside this build's in the
                  webgpu bench, same device and rounds, and a table of time new/old`;

/** Run in a child with VK_ICD_FILENAMES set: prints the adapter dawn.node finds, as JSON. */
async function probe() {
  const { create, globals } = await import('webgpu');
  Object.assign(globalThis, globals);
  const gpu = create(process.env.SDPA_DAWN_FLAGS?.split(',').filter(Boolean) ?? []);
  const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) return null;
  const info = {};
  for (const k of ['vendor', 'architecture', 'device', 'description', 'isFallbackAdapter', 'subgroupMinSize', 'subgroupMaxSize']) info[k] = adapter.info[k];
  const limits = {};
  for (const k in adapter.limits) if (typeof adapter.limits[k] === 'number') limits[k] = adapter.limits[k];
  return { info, limits, features: [...adapter.features].sort() };
}

function probeIcd(icd) {
  const run = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--probe'], {
    env: { ...process.env, VK_ICD_FILENAMES: icd },
    encoding: 'utf8',
    timeout: 60_000,
  });
  const line = run.stdout?.split('\n').find((l) => l.startsWith('{') || l === 'null');
  if (run.status !== 0 || !line) return { icd, error: (run.stderr || `exit ${run.status}`).trim().split('\n').slice(-1)[0] };
  return { icd, adapter: JSON.parse(line) };
}

/** Every ICD probed; the chosen one: the first hardware adapter, else the first that works. */
function chooseAdapter(icd) {
  const candidates = icd ? [resolve(icd)] : [...ICD_DIRS.flatMap((d) => (existsSync(d) ? readdirSync(d).filter((f) => f.endsWith('.json')).sort().map((f) => join(d, f)) : [])), SWIFTSHADER_ICD].filter(existsSync);
  const probed = candidates.map(probeIcd);
  const working = probed.filter((p) => p.adapter);
  const chosen = working.find((p) => !p.adapter.info.isFallbackAdapter) ?? working[0];
  return { probed, chosen };
}

/** Runs `args` with `env`, its output shown and kept, killed after `seconds`. */
function runStep(command, args, env, seconds) {
  return new Promise((done) => {
    const started = Date.now();
    // Its own process group, so that a timeout ends its workers too.
    const child = spawn(command, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let output = '';
    const keep = (stream, sink) => stream.on('data', (d) => ((output += d), sink.write(d)));
    keep(child.stdout, process.stdout);
    keep(child.stderr, process.stderr);
    let timedOut = false;
    const timer = setTimeout(() => ((timedOut = true), process.kill(-child.pid, 'SIGKILL')), seconds * 1000);
    child.on('close', (code) => {
      clearTimeout(timer);
      done({ code, timedOut, seconds: (Date.now() - started) / 1000, output });
    });
  });
}

/**
 * Whether SDPA_WEBGPU_SUBGROUPS withholds 'subgroups' from the suites' and the benches' devices
 * (webgpu-subgroups.mjs, their rule); a value other than 0 or 1 is a usage error.
 */
function subgroupsWithheldHere() {
  try {
    return subgroupsWithheld(process.env.SDPA_WEBGPU_SUBGROUPS);
  } catch (e) {
    throw Object.assign(e, { usage: true });
  }
}

/** What the suites' and the benches' devices get of the adapter's subgroups. */
function subgroupsLine(report) {
  const a = report.adapter;
  if (!a.features.includes('subgroups')) return "Subgroups: the adapter has no 'subgroups' feature.";
  if (report.subgroupsWithheld) {
    return "Subgroups: **withheld** (SDPA_WEBGPU_SUBGROUPS=0): the suites and the benches request their devices without 'subgroups' and run the workgroup-memory kernels.";
  }
  return "Subgroups: the suites' and the benches' devices have them (SDPA_WEBGPU_SUBGROUPS=0 would withhold them).";
}

const adapterName = (a) => `${a.info.vendor} ${a.info.architecture} ${a.info.description}${a.info.isFallbackAdapter ? ' (software fallback adapter: NOT a GPU)' : ''}`;

function markdown(report) {
  const a = report.adapter;
  const lines = [`# gpu-check: ${report.startedAt}`, ''];
  if (!a) return [...lines, `No WebGPU adapter: ${report.probed.map((p) => `${p.icd}: ${p.error ?? 'null adapter'}`).join('; ')}`].join('\n');
  if (a.info.isFallbackAdapter) lines.push('**This adapter is a CPU implementation of Vulkan, not a GPU: the run checks that everything works; its timings say nothing about a GPU.**', '');
  lines.push(`Adapter: ${adapterName(a)} (ICD ${report.icd}); ${report.quick ? 'quick run (--quick)' : 'full run'}; node ${process.version}.`, '');
  const L = a.limits;
  lines.push(`Limits: maxComputeWorkgroupStorageSize ${L.maxComputeWorkgroupStorageSize}, maxComputeInvocationsPerWorkgroup ${L.maxComputeInvocationsPerWorkgroup}, maxStorageBufferBindingSize ${L.maxStorageBufferBindingSize}, maxBufferSize ${L.maxBufferSize}; subgroup sizes ${a.info.subgroupMinSize}–${a.info.subgroupMaxSize}.`, '');
  lines.push(`Features: ${a.features.join(', ')}.`, '');
  lines.push(subgroupsLine(report), '');
  const s = report.suites;
  lines.push('## WebGPU suites', '', `${s.files.join(', ')}: ${s.passed} passed, ${s.failed} failed${s.timedOut ? ', TIMED OUT' : ''} (exit ${s.exitCode}, ${s.seconds.toFixed(0)} s).`, '');
  for (const f of s.failures) lines.push(`- FAILED ${f}`);
  lines.push('## bench --mode webgpu', '', `\`${report.bench.command}\` (exit ${report.bench.exitCode}${report.bench.timedOut ? ', TIMED OUT' : ''}, ${report.bench.seconds.toFixed(0)} s)`, '');
  if (report.bench.calls.length) {
    lines.push('Whole calls (CPU arrays in, output read back):', '', '| case | engine | ms | GFLOP/s | result |', '|---|---|---:|---:|---|');
    for (const r of report.bench.calls) lines.push(`| ${r.case} | ${r.engine} | ${r.medianMs?.toFixed(3) ?? ''} | ${r.gflops?.toFixed(1) ?? ''} | ${r.error ? `error: ${r.error}` : `checked (max error ${r.maxError.toExponential(1)})`} |`);
    lines.push('');
  }
  if (report.bench.resident.length) {
    lines.push('GPU-resident (GPU tensors / GPU KV cache): one call timed to onSubmittedWorkDone, and pipelined (20 calls submitted back to back, waited for once, per call; submit ms: the CPU time of submitting one):', '', '| part | case | engine | ms | GFLOP/s or GB/s | pipelined ms | GFLOP/s or GB/s | submit ms | result |', '|---|---|---|---:|---:|---:|---:|---:|---|');
    for (const r of report.bench.resident) {
      const rate = (x) => (x?.gflops !== undefined ? `${x.gflops.toFixed(1)} GFLOP/s` : x?.gbPerS !== undefined ? `${x.gbPerS.toFixed(2)} GB/s` : '');
      const result = r.unsupported ? `not in this build (${r.unsupported})` : r.failure ? `error: ${r.failure}` : `checked (max error ${r.maxError.toExponential(1)})`;
      lines.push(`| ${r.part} | ${r.case} | ${r.engine} | ${r.ms?.toFixed(3) ?? ''} | ${rate(r)} | ${r.pipelined?.ms.toFixed(3) ?? ''} | ${rate(r.pipelined)} | ${r.pipelined?.submitMs.toFixed(3) ?? ''} | ${result} |`);
    }
    lines.push('');
    const ratios = baselineRatios(report.bench.resident);
    if (ratios.length) {
      lines.push(`Time new/old against \`--baseline ${report.baseline}\` (same device, same rounds; below 1: this build is faster): one call, pipelined, and the GPU time of the profiled call (the median of 5):`, '', '| part | case | engine | one call | pipelined | GPU |', '|---|---|---|---:|---:|---:|');
      const shown = (x) => x?.toFixed(3) ?? '';
      for (const { row, oneCall, pipelined, gpu } of ratios) lines.push(`| ${row.part} | ${row.case} | ${row.engine} | ${shown(oneCall)} | ${shown(pipelined)} | ${shown(gpu)} |`);
      lines.push('');
    }
  }
  lines.push('## bench --mode backward', '');
  for (const run of report.backward) {
    lines.push(`\`${run.command}\` (exit ${run.exitCode}${run.timedOut ? ', TIMED OUT' : ''}, ${run.seconds.toFixed(0)} s)`, '');
    if (!run.rows.length) continue;
    lines.push('| case | engine | ms | result |', '|---|---|---:|---|');
    for (const r of run.rows) lines.push(`| ${r.case} | ${r.engine} | ${r.medianMs?.toFixed(3) ?? ''} | ${r.error ? `error: ${r.error}` : `checked (max error ${r.maxError.toExponential(1)})`} |`);
    for (const { case: c, engines, ratio } of run.backwardOverForward ?? []) lines.push('', `backward / forward at ${c} (${engines}): ${ratio.toFixed(2)}×`);
    lines.push('');
  }
  const profiles = [...(report.bench?.resident ?? []), ...report.backward.flatMap((run) => run.rows), ...(report.profiles ?? []).flatMap((run) => run.rows)].filter((r) => r.profile);
  if (profiles.length) {
    lines.push('## GPU time per kernel (bench --profile)', '', 'One call of each of sdpa-web\'s GPU-resident engines after its timed rounds (the benches above, and the runs below), timestamp queries, one compute pass per dispatch:', '');
    for (const run of report.profiles ?? []) lines.push(`- \`${run.command}\` (exit ${run.exitCode}${run.timedOut ? ', TIMED OUT' : ''}, ${run.seconds.toFixed(0)} s)`);
    lines.push('');
    lines.push('| part | case | engine | GPU ms | kernels (ms, dispatches) |', '|---|---|---|---:|---|');
    for (const r of profiles) {
      const p = r.profile;
      const kernels = p.error ? `error: ${p.error}` : p.kernels.map((k) => `${k.kernel} ${k.ms.toFixed(3)}${k.dispatches > 1 ? ` (${k.dispatches}×)` : ''}`).join('; ');
      lines.push(`| ${r.part ?? 'backward'} | ${r.case} | ${r.engine} | ${p.error ? '' : p.gpuMs.toFixed(3)} | ${kernels} |`);
    }
    lines.push('');
  }
  return lines.join('\n') + '\n';
}

/** Passed/failed counts and failing test names from vitest's JSON report. */
function suiteResults(file) {
  if (!existsSync(file)) return { passed: 0, failed: 0, failures: ['no vitest report was written'] };
  const json = JSON.parse(readFileSync(file, 'utf8'));
  const failures = json.testResults.flatMap((f) => f.assertionResults.filter((t) => t.status === 'failed').map((t) => `${f.name.replace(ROOT, '')}: ${t.fullName}`));
  return { passed: json.numPassedTests, failed: json.numFailedTests, failures };
}

async function main() {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { quick: { type: 'boolean', default: false }, icd: { type: 'string' }, suites: { type: 'string' }, baseline: { type: 'string' }, probe: { type: 'boolean', default: false }, help: { type: 'boolean', default: false } } });
  if (values.probe) {
    console.log(JSON.stringify(await probe()));
    process.exit(0);
  }
  if (values.help) return console.log(HELP);
  if (positionals.length !== 1) throw Object.assign(new Error(`want one OUTDIR; got ${positionals.length ? positionals.join(' ') : 'none'}\n${HELP}`), { usage: true });
  if (!existsSync(join(ROOT, 'dist/index.js'))) throw Object.assign(new Error('dist/ is missing: build first (npm run build:lib)'), { usage: true });
  const baselineWrong = values.baseline && baselineProblem(resolve(values.baseline));
  if (baselineWrong) throw Object.assign(new Error(`${baselineWrong}\n${HELP}`), { usage: true });
  const out = resolve(positionals[0]);
  mkdirSync(out, { recursive: true });
  const plan = values.quick ? PLANS.quick : PLANS.full;
  const everyFile = readdirSync(join(ROOT, 'tests/node')).filter((f) => f.includes('webgpu') && f.endsWith('.test.ts')).sort().map((f) => `tests/node/${f}`);
  const files = values.suites?.split(',').filter(Boolean) ?? plan.suites ?? everyFile;
  const unknown = files.filter((f) => !everyFile.includes(f));
  if (unknown.length) throw Object.assign(new Error(`--suites: ${unknown.join(', ')} is not a WebGPU test file; they are ${everyFile.join(', ')}`), { usage: true });
  const report = { startedAt: new Date().toISOString(), quick: values.quick, subgroupsWithheld: subgroupsWithheldHere(), baseline: values.baseline };

  const { probed, chosen } = chooseAdapter(values.icd);
  report.probed = probed.map((p) => ({ icd: p.icd, adapter: p.adapter ? adapterName(p.adapter) : null, error: p.error }));
  if (!chosen) {
    writeFileSync(join(out, 'gpu-check.json'), JSON.stringify(report, null, 2));
    writeFileSync(join(out, 'gpu-check.md'), markdown(report));
    throw new Error(`no WebGPU adapter on any Vulkan ICD: ${report.probed.map((p) => `${p.icd}: ${p.error ?? 'null'}`).join('; ')}`);
  }
  report.icd = chosen.icd;
  report.adapter = chosen.adapter;
  console.log(`[gpu-check] adapter: ${adapterName(chosen.adapter)}\n[gpu-check] ICD: ${chosen.icd}\n[gpu-check] limits: ${JSON.stringify(chosen.adapter.limits)}\n[gpu-check] features: ${chosen.adapter.features.join(' ')}\n[gpu-check] ${subgroupsLine(report)}`);
  const env = { VK_ICD_FILENAMES: chosen.icd, SDPA_WEBGPU_SHADER_F16: chosen.adapter.features.includes('shader-f16') ? '1' : '0' };
  // The profiles' timestamps unrounded (dawn.node rounds them by default).
  const profileEnv = { ...env, SDPA_DAWN_FLAGS: [process.env.SDPA_DAWN_FLAGS, 'disable-dawn-features=timestamp_quantization'].filter(Boolean).join(',') };

  console.log(`[gpu-check] suites: ${files.join(' ')}`);
  const vitestJson = join(out, 'vitest.json');
  // Half the cores, 2 to 8 test processes: the suites' float64 oracles are CPU work beside the GPU's.
  const workers = Math.max(2, Math.min(8, availableParallelism() >> 1));
  const suites = await runStep(join(ROOT, 'node_modules/.bin/vitest'), ['run', '--config', 'vitest.config.ts', `--maxWorkers=${workers}`, '--reporter=default', '--reporter=json', `--outputFile.json=${vitestJson}`, ...files], env, plan.limits.suitesS);
  report.suites = { files, exitCode: suites.code, timedOut: suites.timedOut, seconds: suites.seconds, ...suiteResults(vitestJson) };

  const benchJson = join(out, 'bench.json');
  const benchArgs = ['--mode', 'webgpu', '--profile', ...plan.bench, ...(values.baseline ? ['--baseline', resolve(values.baseline)] : []), '--json', benchJson, '--results', join(out, 'bench.md'), '--note', `gpu-check on ${adapterName(chosen.adapter)}`];
  console.log(`[gpu-check] bench: npm run bench -- ${benchArgs.join(' ')}`);
  const bench = await runStep(process.execPath, [join(ROOT, 'scripts/bench/cli.mjs'), ...benchArgs], profileEnv, plan.limits.benchS);
  const benchReport = existsSync(benchJson) && bench.code === 0 ? JSON.parse(readFileSync(benchJson, 'utf8')) : { rows: [], resident: [] };
  report.bench = {
    command: `npm run bench -- ${benchArgs.slice(0, -2).join(' ')}`,
    exitCode: bench.code,
    timedOut: bench.timedOut,
    seconds: bench.seconds,
    calls: benchReport.rows ?? [],
    resident: benchReport.resident ?? [],
  };
  report.backward = [];
  for (const [i, cases] of plan.backward.entries()) {
    const json = join(out, `backward-${i + 1}.json`);
    const args = ['--mode', 'backward', '--profile', '--engines', 'sdpa-webgpu,sdpa-webgpu-forward,sdpa-webgpu-resident,sdpa-webgpu-forward-resident', ...cases, '--json', json, '--results', join(out, `backward-${i + 1}.md`), '--note', `gpu-check on ${adapterName(chosen.adapter)}`];
    console.log(`[gpu-check] backward: npm run bench -- ${args.join(' ')}`);
    const run = await runStep(process.execPath, [join(ROOT, 'scripts/bench/cli.mjs'), ...args], profileEnv, plan.limits.backwardS);
    const result = existsSync(json) && run.code === 0 ? JSON.parse(readFileSync(json, 'utf8')) : { rows: [] };
    report.backward.push({ command: `npm run bench -- ${args.slice(0, -2).join(' ')}`, exitCode: run.code, timedOut: run.timedOut, seconds: run.seconds, rows: result.rows ?? [], backwardOverForward: result.backwardOverForward });
  }
  // Where the suites' devices have subgroups, the decode steps' kernels again with them withheld
  // (the tile kernels the streaming ones replace).
  report.profiles = [];
  if (chosen.adapter.features.includes('subgroups') && !report.subgroupsWithheld) {
    const json = join(out, 'profile-tiles.json');
    const args = ['--mode', 'webgpu', '--profile', '--engines', '', ...plan.profileTiles, '--json', json];
    const shown = `SDPA_WEBGPU_SUBGROUPS=0 npm run bench -- ${args.slice(0, -2).map((a) => a || "''").join(' ')}`;
    console.log(`[gpu-check] profile-tiles: ${shown}`);
    const run = await runStep(process.execPath, [join(ROOT, 'scripts/bench/cli.mjs'), ...args], { ...profileEnv, SDPA_WEBGPU_SUBGROUPS: '0' }, plan.limits.profileTilesS);
    const result = existsSync(json) && run.code === 0 ? JSON.parse(readFileSync(json, 'utf8')) : { resident: [] };
    const rows = (result.resident ?? []).map((r) => ({ ...r, engine: `${r.engine}, 'subgroups' withheld` }));
    report.profiles.push({ command: shown, exitCode: run.code, timedOut: run.timedOut, seconds: run.seconds, rows });
  }
  const profileCodes = report.profiles.map((r) => r.exitCode);
  writeFileSync(join(out, 'gpu-check.json'), JSON.stringify(report, null, 2));
  writeFileSync(join(out, 'gpu-check.md'), markdown(report));
  console.log(`\n[gpu-check] wrote ${join(out, 'gpu-check.json')} and ${join(out, 'gpu-check.md')}`);
  const wrongRows = [...report.bench.calls, ...report.bench.resident].filter((r) => /wrong result/.test(r.failure ?? r.error ?? ''));
  const backwardCodes = report.backward.map((r) => r.exitCode);
  const ok = suites.code === 0 && bench.code === 0 && wrongRows.length === 0 && [...backwardCodes, ...profileCodes].every((c) => c === 0);
  if (!ok) console.error(`[gpu-check] FAILED: suites exit ${suites.code}, bench exit ${bench.code}, ${wrongRows.length} wrong bench results, backward bench exits ${backwardCodes.join(', ')}, profile exits ${profileCodes.join(', ')}`);
  process.exit(ok ? 0 : 1);
}

main().catch((e) => {
  console.error(`gpu-check: ${e.message}`);
  process.exit(e.usage ? 2 : 1);
});
