// Mode `variants`: what a sliding window and packed documents cost against the full causal call
// they cut down, on the SIMD backend. Each variant's time over the full call's is compared with
// its ideal fraction: the visible (query, key) pairs over those of the full causal call. A kernel
// that never reads the key tiles outside the band or the documents comes close to that fraction;
// one that masks an O(Lq·Lk) matrix stays near 1. The kernel alone (without the copies in and out
// of the wasm heap, which every call pays whatever it skips, on one thread) is reported beside it.
import { createAttention, maxAbsDiff, toleranceBound } from '../../dist/index.js';
import { makeInputs } from './cases.mjs';
import { callPhases } from './phases.mjs';
import { print } from './results.mjs';
import { interleave, median, pause, warmUp } from './timing.mjs';
import { log } from './run.mjs';

export const WINDOW = 512;
export const DOCUMENT_LENGTH = 512;

/** The variants of one case: the options of each call, and its count of visible (query, key) pairs. */
function variants({ B, Lq, Lk }) {
  const offset = 0; // isCausal: true, top-left: query i sees keys j ≤ i
  const documents = (length, L) => ({ data: new Int32Array(B * L).map((_, x) => Math.floor((x % L) / DOCUMENT_LENGTH)), shape: [B, L] });
  let causal = 0, window = 0, packed = 0;
  for (let i = 0; i < Lq; i++) {
    const last = Math.min(i + offset, Lk - 1);
    causal += last + 1;
    window += last - Math.max(0, i - WINDOW) + 1;
    packed += last - Math.floor(i / DOCUMENT_LENGTH) * DOCUMENT_LENGTH + 1;
  }
  return [
    { name: 'causal', options: { isCausal: true }, pairs: causal },
    { name: `causal, window left ${WINDOW}`, options: { isCausal: true, window: { left: WINDOW } }, pairs: window },
    {
      name: `causal, ${Math.ceil(Lq / DOCUMENT_LENGTH)} documents of ${DOCUMENT_LENGTH}`,
      options: { isCausal: true, queryDocuments: documents(DOCUMENT_LENGTH, Lq), keyDocuments: documents(DOCUMENT_LENGTH, Lk) },
      pairs: packed,
    },
  ].map((v) => ({ ...v, fraction: v.pairs / causal }));
}

/** The first `rows` query rows (and their document ids) of a call, for the check against float64. */
function firstRows(q, options, rows) {
  const [B, H, Lq, E] = q.shape;
  const keep = Math.min(rows, Lq);
  const data = new Float32Array(B * H * keep * E);
  for (let h = 0; h < B * H; h++) data.set(q.data.subarray(h * Lq * E, h * Lq * E + keep * E), h * keep * E);
  const sliced = { ...options };
  if (options.queryDocuments) {
    const ids = new Int32Array(B * keep);
    for (let b = 0; b < B; b++) ids.set(options.queryDocuments.data.subarray(b * Lq, b * Lq + keep), b * keep);
    sliced.queryDocuments = { data: ids, shape: [B, keep] };
  }
  return { q: { data, shape: [B, H, keep, E] }, options: sliced, keep };
}

export async function benchVariants(opts) {
  const threads = opts.threads ?? 0;
  const engines = [
    { name: 'sdpa-simd-1t', attn: await createAttention({ backend: 'simd', threads: 1 }) },
    { name: 'sdpa-simd-mt', attn: await createAttention({ backend: 'simd', ...(threads ? { threads } : {}) }) },
  ];
  const scalar = await createAttention({ backend: 'scalar' });
  const rows = [];
  for (const shape of opts.cases) {
    const inputs = makeInputs(engines[0].attn, shape);
    const cases = variants(shape);
    // The check: the tests' rule on the first 256 query rows of every head, against float64.
    for (const v of cases) {
      const { q, options, keep } = firstRows(inputs.q, v.options, 256);
      const reference = scalar.referenceAttention(q, inputs.k, inputs.v, options).output.data;
      const eRef = maxAbsDiff(scalar.scaledDotProductAttentionSync(q, inputs.k, inputs.v, options).output.data, reference);
      const bound = toleranceBound(eRef, 2, inputs.v.data);
      for (const engine of engines) {
        const full = engine.attn.scaledDotProductAttentionSync(inputs.q, inputs.k, inputs.v, v.options).output;
        const first = firstRows(full, {}, keep).q.data;
        const error = maxAbsDiff(first, reference);
        if (!(error <= bound)) throw new Error(`${engine.name} ${shape.name} ${v.name}: error ${error} > bound ${bound}`);
      }
    }
    for (const engine of engines) {
      const runners = cases.map((v) => ({ run: () => engine.attn.scaledDotProductAttentionSync(inputs.q, inputs.k, inputs.v, v.options), reps: opts.reps }));
      for (const r of runners) await warmUp(r.run);
      log(`${shape.name} ${engine.name}: ${cases.length} calls interleaved, ${opts.reps} rounds`);
      const timed = await interleave(runners);
      // The phases: medians of 3 rounds of back-to-back calls (µs → ms), the variants alternating.
      const rounds = cases.map(() => []);
      for (let round = 0; round < 3; round++) {
        for (const [i, v] of cases.entries()) {
          await pause(20);
          rounds[i].push(await callPhases(engine.attn, inputs, v.options));
        }
      }
      const phases = rounds.map((list) => ({ kernelMs: median(list.map((x) => x.kernel)) / 1000, copiesMs: median(list.map((x) => x.copyIn + x.copyOut)) / 1000 }));
      const full = timed[0].medianMs;
      cases.forEach((v, i) => {
        const ratio = timed[i].medianMs / full;
        const kernelRatio = phases[i].kernelMs / phases[0].kernelMs;
        rows.push({ case: shape.name, engine: engine.name, variant: v.name, medianMs: timed[i].medianMs, idealFraction: v.fraction, timeFraction: ratio, overIdeal: ratio / v.fraction, ...phases[i], kernelOverIdeal: kernelRatio / v.fraction });
      });
    }
  }
  return { rows };
}

export function printVariants({ rows }) {
  print('\ncase        engine         variant                            median ms   time/full   ideal   time/ideal (target ≤ 1.3)   kernel ms   kernel/ideal   copies ms');
  for (const r of rows) {
    print(
      `${r.case.padEnd(11)} ${r.engine.padEnd(14)} ${r.variant.padEnd(34)} ${r.medianMs.toFixed(2).padStart(9)}   ${r.timeFraction.toFixed(3).padStart(9)}   ${r.idealFraction.toFixed(3)}   ${r.overIdeal.toFixed(2).padStart(6)}                      ${r.kernelMs.toFixed(2).padStart(9)}   ${r.kernelOverIdeal.toFixed(2).padStart(12)}   ${r.copiesMs.toFixed(2).padStart(9)}`,
    );
  }
  print('kernel: the wasm call alone; copies: q, k, v into the wasm heap and the output out, on the calling thread (phases of back-to-back calls, median of 3 rounds); on threads the package copies q, k, v in while the helpers start the kernel.');
  return {};
}
