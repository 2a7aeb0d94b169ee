// --mode diagnose: the probes that explain the results table rather than belong in it.
import { createAttention } from '../../dist/index.js';
import { flops, makeCheck, makeInputs, parseCase } from './cases.mjs';
import { peakProbe } from './peak.mjs';
import { encodeCost } from './encode-cost.mjs';
import { callPhases, workspaceBytes } from './phases.mjs';
import { print } from './results.mjs';
import { log } from './run.mjs';
import { twoCoreCeiling } from './two-cores.mjs';
import { measure, median, pause } from './timing.mjs';
import { wakeAfterIdle } from './wake-after-idle.mjs';

const fmt = (x, digits = 2) => (x >= 100 ? x.toFixed(0) : x.toFixed(digits));
const MiB = (bytes) => fmt(bytes / 2 ** 20, 1);

/** Medians over 5 rounds (order alternating) of the phases on 1 thread and on `many`'s threads. */
async function callBreakdown(one, many, inputs) {
  const runs = { one: [], many: [] };
  for (let r = 0; r < 5; r++) {
    for (const name of r % 2 ? ['one', 'many'] : ['many', 'one']) {
      await pause(20); // the other instance's helpers stop spinning
      runs[name].push(await callPhases(name === 'one' ? one : many, inputs));
    }
  }
  const [a, b] = [runs.one, runs.many].map((list) => Object.fromEntries(Object.keys(list[0]).map((phase) => [phase, median(list.map((x) => x[phase]))])));
  const total = (x) => x.copyIn + x.kernel + x.copyOut;
  return { oneThread: a, threads: many.threads, manyThreads: b, kernelSpeedup: a.kernel / b.kernel, callSpeedup: total(a) / total(b) };
}

/**
 * Lq = Lk = 32768 (one call) and 16384 (3 rounds, full and causal alternating, so their ratio is
 * taken under the same load), H = 1, E = Ev = 64, on `attn`; the workspace from the plan, wasm
 * memory before and after, and the check on the first 32 query rows.
 */
async function longContext(attn, scalar) {
  const before = attn.memoryStats().memoryBytes;
  const results = [];
  for (const [L, rounds, masks] of [[32768, 1, [false]], [16384, 3, [false, true]]]) {
    const c = parseCase(`1x${L}x64`);
    const inputs = makeInputs(scalar, c);
    const runs = masks.map((causal) => ({ causal, times: [], cpu: [] }));
    for (let r = 0; r < rounds; r++) {
      for (const run of runs) {
        const m = await measure(() => (run.out = attn.scaledDotProductAttentionSync(inputs.q, inputs.k, inputs.v, { isCausal: run.causal }).output.data));
        run.times.push(m.ms);
        run.cpu.push(m.cpuMs);
        log(`long: L=${L}${run.causal ? ' causal' : ''} threads=${attn.threads}: ${m.ms.toFixed(0)} ms`);
      }
    }
    for (const { causal, times, cpu, out } of runs) {
      const check = makeCheck(scalar, inputs, { causal, rows: 32 })([out], 2);
      const ms = median(times);
      results.push({ L, E: 64, causal, threads: attn.threads, medianMs: ms, cpuMs: median(cpu), gflops: flops(c, { causal }) / ms / 1e6, workspaceBytes: await workspaceBytes(attn, inputs, { isCausal: causal }), maxError: check.error, bound: check.bound, ok: check.ok });
    }
  }
  return results.map((r) => ({ ...r, memoryBytesBefore: before, memoryBytesAfter: attn.memoryStats().memoryBytes }));
}

export async function diagnose(opts) {
  const report = {};
  const has = (probe) => opts.probes.includes(probe);
  // First, before the SIMD instances' worker threads exist: they would share the CPU it times.
  if (has('encode')) {
    log('the CPU side of WebGPU calls');
    report.encode = await encodeCost();
    print(`\nWebGPU calls on GPU tensors, CPU time up to their submission (submit stubbed out; median of 5 rounds of 2000 calls; ${report.encode.adapter}):`);
    for (const [name, what] of [
      ['decode', 'decode step, B = 1, Hq = 32, Hkv = 8, E = 128, a GPU KV cache of 64 keys'],
      ['decodeSplit', 'the same on 4096 keys (flash-decoding: split kernel and merge)'],
      ['prefill', 'prefill 8×512×64 causal'],
    ]) {
      const r = report.encode[name];
      const calls = Object.entries(r.perCall).map(([call, n]) => `${call} ×${n}`).join(', ');
      print(`  ${what}: ${fmt(r.us, 1)} µs a call (best round ${fmt(r.minUs, 1)}); device calls: ${calls}`);
    }
  }
  const scalar = await createAttention({ backend: 'scalar' });
  const one = await createAttention({ backend: 'simd', threads: 1 });
  const many = await createAttention({ backend: 'simd', threads: opts.threads });
  const threaded = many.threads > 1 ? [one, many] : [one];
  print(`sdpa-web diagnose: ${one.relaxedSimd ? 'relaxed-SIMD' : 'SIMD128'} build, ${many.threads} threads${many.fallbackReason ? ` (${many.fallbackReason})` : ''}`);

  if (has('peak')) {
    report.peak = { mulAdd: await peakProbe(), relaxedMadd: await peakProbe(9, true) };
    print('\npeak probe, one core, 12 chains (median GFLOP/s of 9 runs of ~50 ms; best):');
    for (const [name, p] of Object.entries(report.peak)) if (p) print(`  ${name.padEnd(11)} ${fmt(p.medianGflops, 1)} (${fmt(p.maxGflops, 1)})`);
  }
  if (has('long')) {
    report.long = [];
    for (const attn of threaded) report.long.push(...(await longContext(attn, scalar)));
    print('\nlong context (H = 1, E = Ev = 64; wasm memory is per module, over all its calls):');
    for (const l of report.long) {
      print(`  L=${String(l.L).padEnd(6)} ${l.causal ? 'causal' : 'full  '} threads=${l.threads}: ${fmt(l.medianMs, 0)} ms, CPU ${fmt(l.cpuMs, 0)} ms, ${fmt(l.gflops, 1)} GFLOP/s, workspace ${MiB(l.workspaceBytes)} MiB, wasm memory ${MiB(l.memoryBytesBefore)} -> ${MiB(l.memoryBytesAfter)} MiB, ${l.ok ? 'check ok' : 'WRONG RESULT'} (${l.maxError.toExponential(1)} ≤ ${l.bound.toExponential(1)})`);
    }
  }
  if (many.threads > 1 && has('breakdown')) {
    report.breakdown = [];
    for (const c of opts.cases) {
      log(`${c.name}: call breakdown`);
      report.breakdown.push({ case: c.name, ...(await callBreakdown(one, many, makeInputs(scalar, c))) });
    }
    const phases = (x) => `${fmt(x.copyIn, 1)} + ${fmt(x.kernel, 1)} + ${fmt(x.copyOut, 1)}`;
    print('\ncall breakdown (µs per call: copy-in + kernel + copy-out; back-to-back calls, median of 5 rounds):');
    for (const b of report.breakdown) print(`  ${b.case.padEnd(12)} 1 thread ${phases(b.oneThread)}, ${b.threads} threads ${phases(b.manyThreads)}: kernel ${fmt(b.kernelSpeedup)}×, call ${fmt(b.callSpeedup)}×`);
  }
  if (many.threads > 1 && has('two-cores')) {
    report.twoCores = [];
    for (const c of opts.cases) {
      log(`${c.name}: two-core ceiling`);
      const { q, k, v } = makeInputs(scalar, c);
      report.twoCores.push(await twoCoreCeiling({ dist: new URL('../../dist/index.js', import.meta.url).href, shape: c.name, tensors: [q, k, v], flops: flops(c, {}), threaded: many }));
    }
    print(`\ntwo-core ceiling (GFLOP/s of back-to-back calls for 0.5 s, median of 5 rounds): one 1-thread worker alone, two at once (each its own instance: the machine's own 2-core scaling), sdpa-web on ${many.threads} threads`);
    for (const t of report.twoCores) print(`  ${t.shape.padEnd(12)} alone ${fmt(t.aloneGflops, 1)}, two at once ${fmt(t.pairGflops, 1)} (${fmt(t.machineScaling)}×), threads ${fmt(t.threadsGflops, 1)} (${fmt(t.threadsScaling)}× alone, ${fmt(100 * t.ofCeiling, 0)}% of two at once)`);
  }
  if (many.threads > 1 && has('wake')) {
    log('waking a thread after idle');
    report.wake = await wakeAfterIdle();
    print(`\nwaking after idle (median of 9): the main thread wakes a worker from Atomics.wait and both run a ${fmt(report.wake.loopMs)} ms loop; 2× = each on its own core`);
    for (const w of report.wake.results) print(`  idle ${String(w.idleMs).padStart(3)} ms: worker running ${fmt(w.wakeMs, 3)} ms after the notify, both loops done ${fmt(w.speedup)}× as fast as one alone`);
  }
  for (const attn of [scalar, one, many]) attn.dispose();
  return report;
}
