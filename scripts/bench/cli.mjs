#!/usr/bin/env node
// The bench's one entry: npm run bench -- [options] (see HELP).
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ENGINES } from './engines.mjs';
import { probeModule } from './peak.mjs';
import { baselineProblem, commandLine, resultsPath, writeResults } from './results.mjs';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

const MODES = {
  forward: { cases: '1x128x64,1x512x64,1x1024x64,12x512x64,8x256x32,1x2048x64', engines: 'sdpa-simd-1t,sdpa-simd-mt,ort-1t,ort-2t,tfjs-wasm,sdpa-scalar', reps: 15 },
  backward: { cases: '8x256x64,8x512x64,8x1024x64,8x2048x64', engines: 'sdpa-simd-1t,sdpa-simd-1t-recompute,sdpa-webgpu,sdpa-webgpu-forward', reps: 5 },
  webgpu: { cases: '1x128x64,1x512x64,1x1024x64,1x2048x64,12x512x64,1x4096x64,8x256x32,16x1024x64,32x2048x64,8x4096x128', engines: 'sdpa-webgpu,sdpa-simd-mt', reps: 10 },
  diagnose: { cases: '1x128x64,1x512x64,12x512x64,8x256x32', probes: 'peak,long,breakdown,two-cores,wake,encode' },
  variants: { cases: '1x8192x64', reps: 7 },
  decode: { cases: '512,2048,8192,32768,ragged:4096', engines: 'sdpa-simd-1t,sdpa-simd-mt,sdpa-simd-1t-f16,sdpa-simd-mt-f16,sdpa-simd-1t-int8,sdpa-simd-mt-int8,sdpa-simd-1t-int4,sdpa-simd-mt-int4,ort-gqa-1t,ort-gqa-2t', reps: 9 },
};
const DECODE_ENGINES = ['sdpa-simd-1t', 'sdpa-simd-mt', 'sdpa-simd-1t-f16', 'sdpa-simd-mt-f16', 'sdpa-simd-1t-int8', 'sdpa-simd-mt-int8', 'sdpa-simd-1t-int4', 'sdpa-simd-mt-int4', 'ort-gqa-1t', 'ort-gqa-2t'];

const HELP = `npm run bench -- [options]: sdpa-web's speed in Node, against its peers (needs dist/: npm run build:lib)

  --mode M          forward (default): the table against onnxruntime-web and tfjs (about a minute
                    or two on 2 cores); backward; webgpu: sdpa-webgpu next to SIMD on
                    navigator.gpu, or the npm \`webgpu\` package (dawn.node; with no GPU, SwiftShader:
                    correctness, not GPU speed); diagnose: the probes of --probes; variants:
                    a causal window (left 512) and packed documents (512 tokens each) against
                    the full causal call on SIMD, 1 thread and threads, beside their ideal fraction;
                    decode: one generation step (B = 1, Hq = 32, Hkv = 8, E = Ev = 128, one query)
                    on a KV cache of each length, and B = 4 ragged, beside a 64 MiB wasm SIMD
                    streaming read (the memory ceiling) and onnxruntime-web's GroupQueryAttention
                    (past KV in, present out; ort-gqa-2t in a child process); ms per step, GB/s
                    of K/V read (the bytes the cache holds for those tokens), µs to append a
                    token, tokens/s of a 16-layer model of that shape (append and step), and
                    whether the heap stays flat over 32 steps. webgpu also runs
                    prefill on GPU tensors (--cases) and decode steps on a GPU KV cache
                    (--decode-cases), beside onnxruntime-web's WebGPU EP (gpu-buffer in and out)
  --cases LIST      comma-separated cases: HxLxE (B = 1, Lq = Lk = L, Ev = E), BxHxLxE, or
                    BxHxLqxLkxExEv (B batch, H heads, Lq/Lk query/key length, E query/key dim,
                    Ev value dim). Defaults:
                      forward  ${MODES.forward.cases}
                      backward ${MODES.backward.cases}
                      webgpu   ${MODES.webgpu.cases}
                      diagnose ${MODES.diagnose.cases}
                      decode   ${MODES.decode.cases} (L: B = 1; ragged:L: B = 4, L, L/2, L/4, L/8)
  --decode-cases L  webgpu: the decode cases of its GPU-cache part (default the decode mode's)
  --engines LIST    forward default ${MODES.forward.engines}
                    backward default ${MODES.backward.engines}
                    webgpu default ${MODES.webgpu.engines}
                    decode default ${MODES.decode.engines}
                    also: sdpa-simd128-1t (relaxedSimd: false), sdpa-webgpu (forward too),
                    sdpa-webgpu-forward (backward mode: the GPU forward with its log-sum-exp,
                    printed as backward/forward for sdpa-webgpu), sdpa-webgpu-resident and
                    sdpa-webgpu-forward-resident (the same on GPU tensors, outputs left on
                    the GPU, each call timed until the GPU is done)
                    sdpa-*: the package in dist/ (scalar, simd on 1 thread or on --threads, webgpu);
                    sdpa-simd-1t-recompute: the backward without the forward's saved output;
                    sdpa-simd-1t-f16/-mt-f16: forward on float16 inputs (output float32); in
                    decode, a float16 KV cache; sdpa-simd-1t-int8/-mt-int8/-1t-int4/-mt-int4:
                    decode on an int8/int4 cache, checked against the float64 result of the
                    unquantized data within the documented bound (docs/kv-cache-formats.md);
                    ort-1t/ort-2t: onnxruntime-web on a MatMul/Softmax graph (ort-2t runs in a child
                    process with sdpa-simd-mt, its ratios chained through sdpa-simd-mt);
                    tfjs-wasm: TensorFlow.js on its wasm backend. ort and tfjs: forward, no mask.
  --reps N          timed calls per engine and case (defaults: forward 15, backward 5, webgpu 10)
  --budget-ms MS    fewer reps (at least 3) for a slow engine: its timed rounds (3 calls each) take
                    about MS at most per case (default 4000)
  --threads N       threads of sdpa-simd-mt (default every core)
  --causal          isCausal: true (sdpa engines only; GFLOP/s count the visible half)
  --baseline DIR    another build's dist/, timed beside this one's and printed as time new/old per
                    case: sdpa-simd-1t@baseline and sdpa-simd-mt@baseline, interleaved with the
                    current ones; in webgpu mode instead, every GPU-resident engine of that build
                    ("… @baseline") on the same device in the same rounds, and with --profile each
                    profiled call the median of 5; the pipelined bursts and the profiled calls
                    in rounds too, each round's order rotated (a kernel change against its
                    predecessor)
  --probes LIST     diagnose: ${MODES.diagnose.probes} (default all):
                    peak: f32x4 mul+add and relaxed_madd throughput on one core;
                    long: Lq = Lk = 32768 and 16384 (full, causal), E = 64, 1 thread and threads;
                    breakdown: a call's copy-in, kernel and copy-out on 1 thread and threads;
                    two-cores: two 1-thread workers at once against one (the machine's 2-core
                    scaling) and sdpa-web's threads; wake: a worker's wake-up after idle;
                    encode: the CPU time of GPU-resident WebGPU calls (decode steps on 64 and
                    4096 keys, a prefill) up to their submission (submit stubbed out: no GPU
                    work timed), and their device calls
  --profile         webgpu and backward: after timing, one call of each GPU-resident engine with
                    timestamp queries, its GPU time per kernel (scripts/bench/gpu-profile.mjs; needs
                    the device's 'timestamp-query': onnxruntime-web's, where it runs, asks for it).
                    dawn.node rounds timestamps unless
                    SDPA_DAWN_FLAGS=disable-dawn-features=timestamp_quantization
  --json FILE       where the results go (default bench-output/<mode>.json)
  --results DIR     also write DIR/<mode>.md (or the file itself, when it ends in .md): the
                    command line, the date (UTC), the machine (CPU, cores, Node, build, GPU
                    adapter) and the printed tables; docs/results/ keeps the project's runs
  --note TEXT       a note for that file (repeatable), e.g. how busy the machine was
  --help            this text

Method: one process times the engines of a case in interleaved rounds (the order rotated each
round); each engine, once the process is quiet, makes three calls and the third is timed (cold ms:
the first). Before it is timed, each engine's output is checked against the package's float64
reference with the tests' rule, max|o − o64| ≤ f·e_ref + 1e-5·max(1, |V|max) (backward: per
gradient, against |g64|max), e_ref the 'scalar' backend's error on the same inputs, f = 2 (CPU) or
4 (WebGPU), on the first and last head (forward: their first 256 query rows); an engine that fails
is reported as "wrong result" and not timed. GFLOP/s = 2·B·H·Lq·Lk·(E + Ev) / median (backward
2.5× that). ×ort-1t / ×ort-2t: that engine's median over this one's.`;

const OPTIONS = {
  mode: { type: 'string', default: 'forward' },
  cases: { type: 'string' },
  engines: { type: 'string' },
  reps: { type: 'string' },
  'budget-ms': { type: 'string', default: '4000' },
  threads: { type: 'string' },
  causal: { type: 'boolean', default: false },
  profile: { type: 'boolean', default: false },
  baseline: { type: 'string' },
  probes: { type: 'string' },
  'decode-cases': { type: 'string' },
  json: { type: 'string' },
  results: { type: 'string' },
  note: { type: 'string', multiple: true, default: [] },
  child: { type: 'boolean', default: false }, // internal: print the rows as JSON on stdout
  help: { type: 'boolean', default: false },
};

const positive = (name, text) => {
  const n = Number(text);
  if (!(Number.isInteger(n) && n > 0)) throw new Error(`--${name} wants a positive integer; got ${text}`);
  return n;
};

/** The options, checked (a mistake is reported before anything runs); undefined for --help. */
async function options(argv) {
  const { values } = parseArgs({ args: argv, options: OPTIONS, strict: true });
  if (values.help) return undefined;
  if (values.note.length && !values.results) throw new Error('--note goes into the file of --results: give --results too');
  const mode = MODES[values.mode];
  if (!mode) throw new Error(`unknown mode ${values.mode}: want ${Object.keys(MODES).join(', ')}`);
  if (values.profile && !['webgpu', 'backward'].includes(values.mode)) throw new Error(`--profile times GPU kernels: modes webgpu and backward; got ${values.mode}`);
  if (!existsSync(join(ROOT, 'dist/index.js'))) throw new Error('dist/ is missing: build first (npm run build:lib)');
  const { parseCase } = await import('./cases.mjs');
  const list = (text) => text.split(',').map((s) => s.trim()).filter(Boolean);
  const engines = list(values.engines ?? mode.engines ?? '');
  if (values.mode === 'decode') {
    const { parseDecodeCase } = await import('./decode.mjs');
    const decodeCases = list(values.cases ?? mode.cases);
    decodeCases.forEach(parseDecodeCase);
    for (const name of engines) if (!DECODE_ENGINES.includes(name)) throw new Error(`unknown decode engine ${name}; known: ${DECODE_ENGINES.join(' ')}`);
    return { ...values, decodeCases, engines, reps: positive('reps', values.reps ?? String(mode.reps)), threads: values.threads === undefined ? undefined : positive('threads', values.threads), json: values.json ?? join(ROOT, 'bench-output', 'decode.json') };
  }
  const baselineWrong = values.baseline && baselineProblem(resolve(values.baseline));
  if (baselineWrong) throw new Error(baselineWrong);
  if (values.baseline && values.mode !== 'webgpu') engines.push('sdpa-simd-1t@baseline', 'sdpa-simd-mt@baseline');
  const probes = list(values.probes ?? mode.probes ?? '');
  for (const [kind, names, known] of [['engine', engines, Object.keys(ENGINES)], ['probe', probes, list(MODES.diagnose.probes)]]) {
    for (const name of names) if (!known.includes(name)) throw new Error(`unknown ${kind} ${name}; known: ${known.join(' ')}`);
  }
  return {
    ...values,
    cases: list(values.cases ?? mode.cases).map(parseCase),
    engines,
    probes,
    reps: positive('reps', values.reps ?? String(mode.reps ?? 1)),
    budgetMs: positive('budget-ms', values['budget-ms']),
    threads: values.threads === undefined ? undefined : positive('threads', values.threads),
    backward: values.mode === 'backward',
    decodeCases: values.mode === 'webgpu' ? list(values['decode-cases'] ?? MODES.decode.cases) : undefined,
    json: values.json ?? join(ROOT, 'bench-output', `${values.mode}.json`),
  };
}

/** Node 20 has relaxed SIMD (the build users get by default) behind a flag: re-run with it. */
function relaxedSimdFlag() {
  const flag = '--experimental-wasm-relaxed-simd';
  if (WebAssembly.validate(probeModule(true)) || process.execArgv.includes(flag)) return;
  const run = spawnSync(process.execPath, [flag, ...process.execArgv, ...process.argv.slice(1)], { stdio: 'inherit' });
  process.exit(run.status ?? 1);
}

/** The engines' rows, ort-2t's from a child process that times it with sdpa-simd-mt, case by case. */
async function benchRows(opts) {
  const { benchCases } = await import('./run.mjs');
  const here = opts.child ? opts.engines : opts.engines.filter((e) => e !== 'ort-2t');
  const result = await benchCases(opts, here);
  if (here.length === opts.engines.length) return result;
  process.stderr.write('[bench] ort-2t: a child process, with sdpa-simd-mt\n');
  const args = ['--mode', opts.mode, '--child', '--engines', 'ort-2t,sdpa-simd-mt', '--cases', opts.cases.map((c) => c.name).join(','), '--reps', String(opts.reps), '--budget-ms', String(opts.budgetMs)];
  if (opts.threads) args.push('--threads', String(opts.threads));
  if (opts.causal) args.push('--causal');
  const out = execFileSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 26 });
  const child = JSON.parse(out);
  const rows = [...result.rows, ...child.rows.map((r) => ({ ...r, process: 'child' }))];
  const order = (r) => result.rows.findIndex((x) => x.case === r.case) * 100 + (r.process === 'child') * 50 + opts.engines.indexOf(r.engine);
  return { rows: rows.sort((a, b) => order(a) - order(b)), engines: { ...result.engines, 'ort-2t': child.engines['ort-2t'] } };
}

async function main() {
  const opts = await options(process.argv.slice(2)).catch((e) => {
    console.error(`bench: ${e.message} (npm run bench -- --help)`);
    process.exit(2);
  });
  if (!opts) {
    console.log(HELP);
    return;
  }
  relaxedSimdFlag();
  const startedAt = new Date().toISOString();
  const machine = { cpu: cpus()[0]?.model, cores: availableParallelism(), node: process.version, loadAverage: loadavg()[0] };
  const report = { startedAt, machine, options: { ...opts, json: undefined, child: undefined } };
  if (opts.mode === 'diagnose') {
    const { diagnose } = await import('./diagnose.mjs');
    Object.assign(report, await diagnose(opts));
  } else if (opts.mode === 'decode') {
    const { benchDecode, printDecode } = await import('./decode.mjs');
    const result = await benchDecode(opts);
    if (opts.child) {
      process.stdout.write(JSON.stringify(result));
      return;
    }
    console.log(`\nsdpa-web bench, decode: ${startedAt}, ${machine.cpu}, ${machine.cores} cores, node ${machine.node}`);
    Object.assign(report, result, printDecode(result));
  } else if (opts.mode === 'variants') {
    const { benchVariants, printVariants } = await import('./variants.mjs');
    const result = await benchVariants(opts);
    console.log(`\nsdpa-web bench, variants: ${startedAt}, ${machine.cpu}, ${machine.cores} cores, node ${machine.node}`);
    Object.assign(report, result, printVariants(result));
  } else {
    const result = await benchRows(opts);
    if (opts.child) {
      process.stdout.write(JSON.stringify(result));
      return;
    }
    const { printResults } = await import('./run.mjs');
    console.log(`\nsdpa-web bench, ${opts.mode}${opts.causal ? ', causal' : ''}: ${startedAt}, ${machine.cpu}, ${machine.cores} cores, node ${machine.node}`);
    Object.assign(report, result, printResults(result, opts));
    if (opts.mode === 'webgpu') {
      const { benchWebGpuResident, printWebGpuResident } = await import('./webgpu-resident.mjs');
      const { webgpuEntry } = await import('./engines.mjs');
      const resident = await benchWebGpuResident(opts, await webgpuEntry());
      printWebGpuResident(resident);
      report.resident = resident.rows;
      report.residentDevice = resident.device;
    }
  }
  mkdirSync(dirname(opts.json), { recursive: true });
  writeFileSync(opts.json, JSON.stringify(report, null, 2));
  console.log(`\nwrote ${opts.json}`);
  if (opts.results) {
    const run = { mode: opts.mode, command: commandLine(process.argv.slice(2)), startedAt, wallSeconds: (Date.now() - Date.parse(startedAt)) / 1000, machine: { ...machine, loadAverageAtEnd: loadavg()[0], ...(await build(report)) }, notes: opts.note, json: opts.json };
    console.log(`wrote ${writeResults(resultsPath(opts.results, opts.mode), run, ROOT)}`);
  }
}

/** The build the package picks here (relaxed SIMD or SIMD128), and the GPU adapter of a webgpu run. */
async function build(report) {
  const { createAttention } = await import('../../dist/index.js');
  const attn = await createAttention({ backend: 'simd', threads: 1 });
  const relaxed = attn.relaxedSimd;
  attn.dispose();
  const flag = process.execArgv.includes('--experimental-wasm-relaxed-simd') ? ' (Node run with --experimental-wasm-relaxed-simd)' : '';
  const gpu = (report.engines?.['sdpa-webgpu'] ?? report.engines?.['sdpa-webgpu-f16'])?.adapter;
  return { build: relaxed ? `relaxed SIMD${flag}` : 'SIMD128 (this engine has no relaxed SIMD)', ...(gpu ? { gpu } : {}) };
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
