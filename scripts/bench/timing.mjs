// The bench's one clock, one median and one way of timing engines against each other: interleaved
// rounds in one process (the machine is shared and noisy, so only medians and ratios from the same
// rounds are compared).

/** Milliseconds on a clock that worker threads share (performance.now() alone is per thread). */
export const now = () => performance.timeOrigin + performance.now();

export const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The median (the mean of the two middle values for an even count). */
export function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Milliseconds one synchronous call of `fn` takes. */
export function timeSync(fn) {
  const t = now();
  fn();
  return now() - t;
}

/** Calls `call` back to back for `durationMs`, and at least `minCalls` times: { calls, ms }. */
export function callsFor(call, durationMs, minCalls = 1) {
  const start = now();
  let calls = 0;
  for (; calls < minCalls || now() - start < durationMs; calls++) call();
  return { calls, ms: now() - start };
}

/** Process CPU milliseconds (all threads) spent in `body`, and its wall milliseconds. */
export async function measure(body) {
  const cpu0 = process.cpuUsage();
  const t0 = now();
  await body();
  const ms = now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return { ms, cpuMs: (cpu.user + cpu.system) / 1000 };
}

/**
 * Waits at least 20 ms, then on in 5 ms steps (up to 500 ms) until the process used less than a
 * tenth of a core in a step: thread pools other engines left spinning (onnxruntime-web's spins
 * 20–45 ms after a call) must not share the cores with the next engine's calls.
 */
async function pauseUntilQuiet() {
  const start = now();
  await pause(20);
  while (now() - start < 500) {
    const { ms, cpuMs } = await measure(() => pause(5));
    if (cpuMs < 0.1 * ms) break;
  }
}

/**
 * Calls `run` until 200 ms are spent (V8 swaps in optimized wasm code once a function is hot), at
 * most 30 times; returns the last call's ms.
 */
export async function warmUp(run) {
  let last = 0;
  for (let calls = 0, spent = 0; spent < 200 && calls < 30; calls++, spent += last) last = (await measure(run)).ms;
  return last;
}

/**
 * Times `runners` ({ run, reps }) in interleaved rounds, the order rotated every round. In a round
 * each runner, once the process is quiet, makes three calls back to back and the third is timed:
 * the steady state of a model calling attention layer after layer. The first ("cold": helper
 * threads asleep, caches holding other data) is kept too. Returns per runner
 * { medianMs, minMs, coldMs, cpuMs, reps }.
 */
export async function interleave(runners) {
  const samples = runners.map(() => ({ times: [], cold: [], cpu: [] }));
  const rounds = Math.max(0, ...runners.map((r) => r.reps));
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < runners.length; i++) {
      const index = (i + round) % runners.length;
      const { run, reps } = runners[index];
      const s = samples[index];
      if (s.times.length >= reps) continue;
      await pauseUntilQuiet();
      s.cold.push((await measure(run)).ms);
      await run();
      const timed = await measure(run);
      s.times.push(timed.ms);
      s.cpu.push(timed.cpuMs);
    }
  }
  return samples.map((s) => ({ medianMs: median(s.times), minMs: Math.min(...s.times), coldMs: median(s.cold), cpuMs: median(s.cpu), reps: s.times.length }));
}
