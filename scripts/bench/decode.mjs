// Mode `decode`: one generation step (one query row per head) against a KV cache of L tokens, at
// B = 1, Hq = 32, Hkv = 8, E = Ev = 128, and a ragged batch of 4. sdpa-web reads its KvCache in
// place (1 thread and threads), in float32 and in a float16 cache (-f16: half the bytes, read in
// place by the decode kernel; the keys and values are float16 values, so that every engine
// computes on the same numbers and one float64 reference checks all), and in int8/int4 caches
// (-int8, -int4: checked against the same float64 result of the unquantized data, within the
// bound of docs/kv-cache-formats.md, and against the float64 result of what the cache holds by
// the tolerance rule); onnxruntime-web runs its com.microsoft GroupQueryAttention op
// with the past keys/values in and the present out, on 1 thread (in this process) and 2 (a child
// process: its thread count is fixed per process). Beside them, a wasm SIMD streaming read of
// 64 MiB: the memory bandwidth one core reaches, the ceiling of a step that reads K and V once.
// Every engine's output is checked against the float64 reference (first and last KV-head
// groups) before it is timed. sdpa-web's rows also time appending one token (onnxruntime-web's op
// appends as it attends), and tokens per second of a 16-layer model count both.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createAttention, fromFloat16, maxAbsDiff, toFloat16, toleranceBound } from '../../dist/index.js';
import { groupQueryAttentionModel } from './onnx.mjs';
import { section, uleb } from './peak.mjs';
import { print } from './results.mjs';
import { log } from './run.mjs';
import { interleave, warmUp } from './timing.mjs';

export const DECODE_CASES = '512,2048,8192,32768,ragged:4096';
const HQ = 32, HKV = 8, DIM = 128;
const PROBE_BYTES = 64 * 2 ** 20;

/** `L` (B = 1), `BxL` (B sequences of L), or `ragged:L` (B = 4, lengths L, L/2, L/4, L/8). */
export function parseDecodeCase(text) {
  const ragged = /^ragged:(\d+)$/.exec(text);
  const batched = /^(\d+)x(\d+)$/.exec(text);
  const B = batched ? Number(batched[1]) : ragged ? 4 : 1;
  const L = Number(ragged ? ragged[1] : batched ? batched[2] : text);
  if (!(Number.isInteger(L) && L >= 8 && B >= 1)) throw new Error(`decode case ${text}: want a length L >= 8, BxL or ragged:L`);
  const lengths = ragged ? [L, L / 2, L / 4, L / 8].map(Math.floor) : Array(B).fill(L);
  const name = ragged ? `B=4 ragged ${lengths.join('/')}` : B > 1 ? `B=${B} L=${L}` : `L=${L}`;
  return { name, B, lengths, Hq: HQ, Hkv: HKV, E: DIM };
}

/** Deterministic uniform floats in [-1, 1) (mulberry32), rounded to float16 values. */
function randomFloats(n, seed) {
  let a = seed >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    out[i] = ((t ^ (t >>> 14)) >>> 0) / 2147483648 - 1;
  }
  return fromFloat16(toFloat16(out));
}

/** Keys/values [B, Hkv, Lmax, E] (zeros past each sequence's length) and one query [B, Hq, 1, E]. */
export function makeInputs({ B, lengths, Hq, Hkv, E }) {
  const L = Math.max(...lengths);
  const key = randomFloats(B * Hkv * L * E, 1), value = randomFloats(B * Hkv * L * E, 2);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < Hkv; h++) {
      const head = (b * Hkv + h) * L * E;
      key.fill(0, head + lengths[b] * E, head + L * E);
      value.fill(0, head + lengths[b] * E, head + L * E);
    }
  }
  return { L, key: { data: key, shape: [B, Hkv, L, E] }, value: { data: value, shape: [B, Hkv, L, E] }, query: { data: randomFloats(B * Hq * E, 3), shape: [B, Hq, 1, E] } };
}

/** The query heads of KV heads `kvHeads` (and those KV heads) of every batch, for the check against float64. */
function slice(c, inputs, kvHeads) {
  const { B, Hq, Hkv, E } = c, group = Hq / Hkv, L = inputs.L;
  const q = new Float32Array(B * kvHeads.length * group * E), k = new Float32Array(B * kvHeads.length * L * E), v = new Float32Array(k.length);
  let qi = 0, ki = 0;
  for (let b = 0; b < B; b++) {
    for (const h of kvHeads) {
      const from = (b * Hkv + h) * L * E;
      k.set(inputs.key.data.subarray(from, from + L * E), ki);
      v.set(inputs.value.data.subarray(from, from + L * E), ki);
      ki += L * E;
      q.set(inputs.query.data.subarray((b * Hq + h * group) * E, (b * Hq + (h + 1) * group) * E), qi);
      qi += group * E;
    }
  }
  const shape = (n, l) => [B, n, l, E];
  return { q: { data: q, shape: shape(kvHeads.length * group, 1) }, k: { data: k, shape: shape(kvHeads.length, L) }, v: { data: v, shape: shape(kvHeads.length, L) } };
}

/** Per block of 32 of each row of `dim`: max|x| / L. */
function blockScales(data, dim, L) {
  const blocks = Math.ceil(dim / 32), out = new Float64Array((data.length / dim) * blocks);
  for (let row = 0; row < data.length / dim; row++) {
    for (let c = 0; c < blocks; c++) {
      let amax = 0;
      for (let e = c * 32; e < Math.min(dim, c * 32 + 32); e++) amax = Math.max(amax, Math.abs(data[row * dim + e]));
      out[row * blocks + c] = amax / L;
    }
  }
  return out;
}

/**
 * The documented bound of an int8/int4 cache's output against the float64 result of the
 * unquantized data (docs/kv-cache-formats.md), over the rows of q [B, n·group, 1, E] on k/v
 * [B, n, L, E] (every key visible: the bound over all of them covers the causal step), with
 * ‖k̂_b‖₁ bounded by ‖k_b‖₁ + 32·s_k/2.
 */
function quantizedBound(q, k, v, E, levels) {
  const [B, Hq, , ] = q.shape, [, Hkv, L] = k.shape, group = Hq / Hkv, blocks = Math.ceil(E / 32);
  const sq = blockScales(q.data, E, 127), sk = blockScales(k.data, E, levels), sv = blockScales(v.data, E, levels);
  let worst = 0;
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < Hkv; h++) {
      const head = b * Hkv + h;
      let vMax = 0, svMax = 0;
      for (let i = head * L * E; i < (head + 1) * L * E; i++) vMax = Math.max(vMax, Math.abs(v.data[i]));
      for (let i = head * L * blocks; i < (head + 1) * L * blocks; i++) svMax = Math.max(svMax, sv[i]);
      for (let r = 0; r < group; r++) {
        const row = b * Hq + h * group + r;
        let delta = 0;
        for (let j = 0; j < L; j++) {
          let d = 0;
          for (let c = 0; c < blocks; c++) {
            let q1 = 0, k1 = 0;
            for (let e = c * 32; e < Math.min(E, c * 32 + 32); e++) {
              q1 += Math.abs(q.data[row * E + e]);
              k1 += Math.abs(k.data[(head * L + j) * E + e]);
            }
            const s = sk[(head * L + j) * blocks + c];
            d += q1 * s + (k1 + 16 * s) * sq[row * blocks + c];
          }
          delta = Math.max(delta, d / Math.sqrt(E) / 2);
        }
        worst = Math.max(worst, Math.expm1(2 * delta) * vMax + svMax / 2);
      }
    }
  }
  return worst;
}

/**
 * The float64 reference of the first and last KV-head groups, and the rule's bound. An int8/int4
 * cache's output is held to the documented bound against it, and to the tolerance rule against the
 * float64 reference of what such a cache holds (`referenceAttention` on a scalar cache of the same
 * rows: the kernel itself must be exact).
 */
export function oracle(scalar, c, inputs) {
  const kvHeads = [0, c.Hkv - 1];
  const { q, k, v } = slice(c, inputs, kvHeads);
  const options = { enableGqa: true, isCausal: 'bottom-right', ...(c.B > 1 ? { keyLengths: Int32Array.from(c.lengths) } : {}) };
  const reference = scalar.referenceAttention(q, k, v, options).output.data;
  const eRef = maxAbsDiff(scalar.scaledDotProductAttentionSync(q, k, v, options).output.data, reference);
  const bounds = { float32: toleranceBound(eRef, 2, v.data) };
  const held = {};
  const onCache = (dtype) => {
    const cache = scalar.createKvCache({ batch: c.B, kvHeads: kvHeads.length, maxLength: inputs.L, headDim: c.E, dtype });
    cache.append(k, v, c.B > 1 ? { lengths: c.lengths } : undefined);
    const cacheOptions = { enableGqa: true, isCausal: true };
    const exact = scalar.referenceAttention(q, cache, cacheOptions).output.data;
    const error = maxAbsDiff(scalar.scaledDotProductAttentionSync(q, cache, cacheOptions).output.data, exact);
    cache.dispose();
    return { reference: exact, bound: toleranceBound(error, 2, v.data) };
  };
  /** Checks an output [B, Hq, 1, E] (the same layout as [B, 1, Hq·E]) of a cache of `dtype`; throws when wrong. */
  return (name, output, dtype = 'float32') => {
    if (dtype === 'int8' || dtype === 'int4') bounds[dtype] ??= quantizedBound(q, k, v, c.E, dtype === 'int8' ? 127 : 7) + bounds.float32;
    const bound = bounds[dtype] ?? bounds.float32;
    const group = c.Hq / c.Hkv, picked = new Float32Array(reference.length);
    let i = 0;
    for (let b = 0; b < c.B; b++) {
      for (const h of kvHeads) {
        const from = (b * c.Hq + h * group) * c.E;
        picked.set(output.subarray(from, from + group * c.E), i);
        i += group * c.E;
      }
    }
    const error = maxAbsDiff(picked, reference);
    if (!(error <= bound)) throw new Error(`${name} ${c.name}: wrong result, error ${error} > bound ${bound}`);
    if (dtype === 'int8' || dtype === 'int4') {
      held[dtype] ??= onCache(dtype);
      const own = maxAbsDiff(picked, held[dtype].reference);
      if (!(own <= held[dtype].bound)) throw new Error(`${name} ${c.name}: wrong result on the cache's own values, error ${own} > bound ${held[dtype].bound}`);
    }
    return error;
  };
}

/**
 * A step of sdpa-web on its cache (float32, or `dtype` float16, int8, int4): the call on one new
 * query row (float32, so the output is float32 too; the append is timed apart).
 */
async function sdpaEngine(name, attn, c, inputs, dtype = 'float32') {
  const cache = attn.createKvCache({ batch: c.B, kvHeads: c.Hkv, maxLength: inputs.L + 32, headDim: c.E, dtype });
  cache.append(inputs.key, inputs.value, c.B > 1 ? { lengths: c.lengths } : undefined);
  const out = new Float32Array(c.B * c.Hq * c.E);
  const options = { enableGqa: true, isCausal: true, out };
  return {
    name,
    dtype,
    /** K/V bytes a step reads: what the cache holds for the tokens (levels and scales for int8/int4). */
    bytes: (cache.bytes / (c.B * cache.maxLength)) * c.lengths.reduce((a, b) => a + b, 0),
    run: () => attn.scaledDotProductAttentionSync(inputs.query, cache, options).output.data,
    /** 32 steps, each appending a token and attending: the heap bytes after each. */
    heapOver32Steps: () => {
      const token = { data: inputs.key.data.subarray(0, c.B * c.Hkv * c.E), shape: [c.B, c.Hkv, 1, c.E] };
      const heap = [];
      for (let step = 0; step < 32; step++) {
        cache.append(token, token);
        attn.scaledDotProductAttentionSync(inputs.query, cache, options);
        heap.push(attn.memoryStats().heapBytesInUse);
      }
      return heap;
    },
    /**
     * Milliseconds to append one token (every sequence's row of every KV head, float32 in, as a
     * model's layer appends its new key and value): the median of 15 rounds of 256 appends to a
     * cache of its own, reset between rounds, after 4 rounds of warm-up.
     */
    appendMs: () => {
      const token = { data: inputs.key.data.subarray(0, c.B * c.Hkv * c.E), shape: [c.B, c.Hkv, 1, c.E] };
      const own = attn.createKvCache({ batch: c.B, kvHeads: c.Hkv, maxLength: 256, headDim: c.E, dtype });
      const rounds = [];
      for (let round = 0; round < 19; round++) {
        own.reset();
        const start = performance.now();
        for (let i = 0; i < 256; i++) own.append(token, token);
        if (round >= 4) rounds.push((performance.now() - start) / 256);
      }
      own.dispose();
      return rounds.sort((a, b) => a - b)[rounds.length >> 1];
    },
    dispose: () => cache.dispose(),
  };
}

/**
 * onnxruntime-web's GroupQueryAttention on one step: the past K/V (a buffer of L positions, each
 * sequence's first lengths[b] − 1 valid) in, the present out, the last token as the new key/value.
 */
async function ortEngine(name, ort, c, inputs) {
  const { B, Hq, Hkv, E } = c, L = inputs.L;
  const session = await ort.InferenceSession.create(groupQueryAttentionModel({ B, Hq, Hkv, L, E }), { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
  const lastOf = (t) => {
    const data = new Float32Array(B * Hkv * E);
    for (let b = 0; b < B; b++) {
      for (let h = 0; h < Hkv; h++) {
        const row = ((b * Hkv + h) * L + c.lengths[b] - 1) * E;
        data.set(t.data.subarray(row, row + E), (b * Hkv + h) * E);
      }
    }
    return new ort.Tensor('float32', data, [B, 1, Hkv * E]);
  };
  const feeds = {
    query: new ort.Tensor('float32', inputs.query.data, [B, 1, Hq * E]),
    key: lastOf(inputs.key),
    value: lastOf(inputs.value),
    past_key: new ort.Tensor('float32', inputs.key.data, [B, Hkv, L, E]),
    past_value: new ort.Tensor('float32', inputs.value.data, [B, Hkv, L, E]),
    seqlens_k: new ort.Tensor('int32', Int32Array.from(c.lengths.map((n) => n - 1)), [B]),
    total_sequence_length: new ort.Tensor('int32', Int32Array.of(L), []),
  };
  return {
    name,
    run: async () => {
      const results = await session.run(feeds);
      const data = results.output.data;
      for (const t of Object.values(results)) t.dispose();
      return data;
    },
    dispose: () => session.release(),
  };
}

/** The streaming-read probe: a hand-assembled wasm SIMD loop summing `bytes` with 4 f32x4 accumulators. */
function probeModule(pages) {
  const simd = (op) => [0xfd, ...uleb(op)];
  const load = (offset) => [...simd(0x00), 4, ...uleb(offset)]; // v128.load align=16
  const add = simd(0xe4), extract = simd(0x1f);
  const get = (i) => [0x20, i], set = (i) => [0x21, i];
  // locals: 0 = bytes (param), 1 = i, 2..5 = accumulators
  const body = [0x02, 0x40, 0x03, 0x40];
  for (let a = 0; a < 4; a++) body.push(...get(2 + a), ...get(1), ...load(16 * a), ...add, ...set(2 + a));
  body.push(...get(1), 0x41, ...[0xc0, 0x00], 0x6a, 0x22, 1, ...get(0), 0x49, 0x0d, 0); // i += 64; br_if (i < bytes)
  body.push(0x0b, 0x0b);
  body.push(...get(2), ...get(3), ...add, ...get(4), ...add, ...get(5), ...add, ...extract, 0, 0x0b);
  const locals = [2, 1, 0x7f, 4, 0x7b];
  const func = [...uleb(locals.length + body.length), ...locals, ...body];
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, [1, 0x60, 1, 0x7f, 1, 0x7d]), // (i32) -> f32
    ...section(3, [1, 0]),
    ...section(5, [1, 0, ...uleb(pages)]),
    ...section(7, [2, 3, ...new TextEncoder().encode('sum'), 0x00, 0, 6, ...new TextEncoder().encode('memory'), 0x02, 0]),
    ...section(10, [1, ...func]),
  ]);
}

async function streamingProbe() {
  const { instance } = await WebAssembly.instantiate(probeModule(PROBE_BYTES / 65536 + 1));
  new Float32Array(instance.exports.memory.buffer).fill(1); // real pages, not the shared zero page
  const sum = instance.exports.sum;
  return { name: 'probe', run: () => sum(PROBE_BYTES), bytes: PROBE_BYTES };
}

const gbPerS = (bytes, ms) => bytes / ms / 1e6;

/** ort-2t: this module run as a child process with onnxruntime-web on 2 threads. */
function childOrt2(opts) {
  log('ort-gqa-2t: a child process');
  const out = execFileSync(process.execPath, [...process.execArgv, fileURLToPath(new URL('./cli.mjs', import.meta.url)), '--mode', 'decode', '--child', '--engines', 'ort-gqa-2t', '--cases', opts.decodeCases.join(','), '--reps', String(opts.reps)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 26 });
  return JSON.parse(out);
}

export async function benchDecode(opts) {
  const cases = opts.decodeCases.map(parseDecodeCase);
  const wanted = new Set(opts.engines);
  const ortThreads = wanted.has('ort-gqa-2t') && opts.child ? 2 : 1;
  const ort = wanted.has('ort-gqa-1t') || (opts.child && wanted.has('ort-gqa-2t')) ? await import('onnxruntime-web') : undefined;
  if (ort) {
    ort.env.wasm.numThreads = ortThreads;
    ort.env.logLevel = 'error';
  }
  const scalar = await createAttention({ backend: 'scalar' });
  const one = await createAttention({ backend: 'simd', threads: 1 });
  const many = await createAttention({ backend: 'simd', ...(opts.threads ? { threads: opts.threads } : {}) });
  const rows = [];
  for (const c of cases) {
    const inputs = makeInputs(c);
    const check = oracle(scalar, c, inputs);
    const elements = c.Hkv * c.lengths.reduce((a, b) => a + b, 0) * 2 * c.E;
    const engines = [];
    if (!opts.child) {
      if (wanted.has('sdpa-simd-1t')) engines.push(await sdpaEngine('sdpa-simd-1t', one, c, inputs));
      if (wanted.has('sdpa-simd-mt')) engines.push(await sdpaEngine(`sdpa-simd-mt (${many.threads} threads)`, many, c, inputs));
      for (const [suffix, dtype] of [['f16', 'float16'], ['int8', 'int8'], ['int4', 'int4']]) {
        if (wanted.has(`sdpa-simd-1t-${suffix}`)) engines.push(await sdpaEngine(`sdpa-simd-1t-${suffix}`, one, c, inputs, dtype));
        if (wanted.has(`sdpa-simd-mt-${suffix}`)) engines.push(await sdpaEngine(`sdpa-simd-mt-${suffix} (${many.threads} threads)`, many, c, inputs, dtype));
      }
      if (wanted.has('ort-gqa-1t')) engines.push(await ortEngine('ort-gqa-1t', ort, c, inputs));
      engines.push(await streamingProbe());
    } else {
      engines.push(await ortEngine('ort-gqa-2t', ort, c, inputs));
    }
    const errors = {};
    for (const e of engines) if (e.name !== 'probe') errors[e.name] = check(e.name, await e.run(), e.dtype);
    for (const e of engines) await warmUp(e.run);
    log(`${c.name}: ${engines.map((e) => e.name).join(', ')} interleaved, ${opts.reps} rounds`);
    const timed = await interleave(engines.map((e) => ({ run: e.run, reps: opts.reps })));
    const heap = {};
    for (const e of engines) if (e.heapOver32Steps) heap[e.name] = e.heapOver32Steps();
    for (const [i, e] of engines.entries()) {
      const ms = timed[i].medianMs;
      const row = { case: c.name, engine: e.name, ms, cpuMs: timed[i].cpuMs, gbPerS: gbPerS(e.bytes ?? 4 * elements, ms), error: errors[e.name] };
      // A generated token's layer appends its key and value and attends; onnxruntime-web's op does both.
      if (e.appendMs) row.appendMs = e.appendMs();
      if (e.name !== 'probe') row.tokensPerS16Layers = 1000 / (16 * (ms + (row.appendMs ?? 0)));
      if (heap[e.name]) row.heapFlatOver32Steps = new Set(heap[e.name]).size === 1;
      rows.push(row);
    }
    for (const e of engines) e.dispose?.();
  }
  scalar.dispose();
  one.dispose();
  many.dispose();
  if (opts.child || !wanted.has('ort-gqa-2t')) return { rows };
  return { rows: [...rows, ...childOrt2(opts).rows] };
}

/** The table, with each case's ratios: 1 thread over the probe, threads over 1 thread, ×ort. */
export function printDecode({ rows }) {
  const cases = [...new Set(rows.map((r) => r.case))];
  const summary = [];
  print('\ncase                       engine                        ms/step  CPU ms    GB/s  append µs  tok/s×16L  error      heap flat');
  for (const name of cases) {
    const of = (engine) => rows.find((r) => r.case === name && (r.engine === engine || r.engine.startsWith(`${engine} (`)));
    for (const r of rows.filter((x) => x.case === name)) {
      print(`${name.padEnd(26)} ${r.engine.padEnd(29)} ${r.ms.toFixed(3).padStart(8)} ${(r.cpuMs ?? NaN).toFixed(3).padStart(7)} ${r.gbPerS.toFixed(2).padStart(7)} ${r.appendMs === undefined ? '         -' : (1000 * r.appendMs).toFixed(1).padStart(10)} ${r.tokensPerS16Layers === undefined ? '         -' : r.tokensPerS16Layers.toFixed(1).padStart(10)}   ${r.error === undefined ? '       -' : r.error.toExponential(1).padStart(8)}   ${r.heapFlatOver32Steps === undefined ? '-' : r.heapFlatOver32Steps ? 'yes' : 'NO'}`);
    }
    const one = of('sdpa-simd-1t'), many = of('sdpa-simd-mt'), probe = of('probe'), ort1 = of('ort-gqa-1t'), ort2 = of('ort-gqa-2t');
    const one16 = of('sdpa-simd-1t-f16'), many16 = of('sdpa-simd-mt-f16');
    const one8 = of('sdpa-simd-1t-int8'), many8 = of('sdpa-simd-mt-int8'), one4 = of('sdpa-simd-1t-int4'), many4 = of('sdpa-simd-mt-int4');
    const ratios = {
      case: name,
      float16OverFloat32OneThread: one && one16 ? one.ms / one16.ms : undefined,
      float16OverFloat32Threads: many && many16 ? many.ms / many16.ms : undefined,
      int8OverFloat32OneThread: one && one8 ? one.ms / one8.ms : undefined,
      int4OverFloat32OneThread: one && one4 ? one.ms / one4.ms : undefined,
      int8ThreadsOverOne: one8 && many8 ? one8.ms / many8.ms : undefined,
      int4ThreadsOverOne: one4 && many4 ? one4.ms / many4.ms : undefined,
      oneThreadOfProbe: one && probe ? one.gbPerS / probe.gbPerS : undefined,
      threadsOverOne: one && many ? one.ms / many.ms : undefined,
      overOrt1: one && ort1 ? ort1.ms / one.ms : undefined,
      threadsOverOrt2: many && ort2 ? ort2.ms / many.ms : undefined,
    };
    summary.push(ratios);
    const fmt = (x, unit) => (x === undefined ? '-' : `${unit === '%' ? (100 * x).toFixed(0) : x.toFixed(2)}${unit}`);
    print(`  1 thread ${fmt(ratios.oneThreadOfProbe, '%')} of the probe; threads ${fmt(ratios.threadsOverOne, '×')} 1 thread; 1 thread ${fmt(ratios.overOrt1, '×')} ort-gqa-1t; threads ${fmt(ratios.threadsOverOrt2, '×')} ort-gqa-2t`);
    print(`  float16 cache ${fmt(ratios.float16OverFloat32OneThread, '×')} float32 on 1 thread, ${fmt(ratios.float16OverFloat32Threads, '×')} on threads`);
    print(`  int8 cache ${fmt(ratios.int8OverFloat32OneThread, '×')} float32 on 1 thread (threads ${fmt(ratios.int8ThreadsOverOne, '×')} 1); int4 ${fmt(ratios.int4OverFloat32OneThread, '×')} (threads ${fmt(ratios.int4ThreadsOverOne, '×')} 1)`);
    // CPU time: what a 1-thread step costs whatever else the machine runs (wall time also counts
    // the time slices other processes took).
    const cpuOverFloat32 = [one16, one8, one4].filter(Boolean).map((r) => `${r.engine.slice('sdpa-simd-1t-'.length)} ${fmt(one?.cpuMs / r.cpuMs, '×')}`);
    if (one && cpuOverFloat32.length) print(`  by CPU time on 1 thread, float32 over: ${cpuOverFloat32.join(', ')}`);
  }
  return { summary };
}
