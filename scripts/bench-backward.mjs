#!/usr/bin/env node
// Backward-pass benchmark of sdpa-web (built package in dist/: run `npm run build:lib` first).
//   node scripts/bench-backward.mjs [--quick] [--reps N]
// For each shape [B·H = 8 heads, n, d = 64], times on the 'simd' backend:
//   forward    (4·BH·n²·d flops)
//   backward   with the forward's output + log-sum-exp passed in (10·BH·n²·d flops, FlashAttention's count)
//   backward   recomputing the forward itself (still reported against 10·BH·n²·d)
// and, for the smaller shapes, the 'scalar' backward. Prints GFLOP/s from the median of N runs
// (one untimed warm-up). The machine may be shared and noisy: compare medians, not single runs.
import { performance } from 'node:perf_hooks';
import { createAttention } from '../dist/index.js';
import { uniformRandom } from './bench/data.mjs';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const repsArg = args.indexOf('--reps');
const reps = repsArg >= 0 ? Number(args[repsArg + 1]) : quick ? 3 : 5;
const BH = 8, d = 64;
const lengths = quick ? [256, 512] : [256, 512, 1024, 2048];

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
}

function time(fn) {
  fn();
  const ms = [];
  for (let r = 0; r < reps; r++) {
    const t0 = performance.now();
    fn();
    ms.push(performance.now() - t0);
  }
  return median(ms);
}

const simd = await createAttention({ backend: 'simd', threads: 1 });
const scalar = await createAttention({ backend: 'scalar' });
const rows = [];
for (const n of lengths) {
  const shape = [1, BH, n, d];
  const q = { data: uniformRandom(BH * n * d, 1), shape };
  const k = { data: uniformRandom(BH * n * d, 2), shape };
  const v = { data: uniformRandom(BH * n * d, 3), shape };
  const dOut = { data: uniformRandom(BH * n * d, 4), shape };
  const fwdFlops = 4 * BH * n * n * d;
  const bwdFlops = 10 * BH * n * n * d;
  const fwd = simd.scaledDotProductAttentionSync(q, k, v, { returnLogSumExp: true });
  const saved = { output: fwd.output, logSumExp: fwd.logSumExp };
  const tf = time(() => simd.scaledDotProductAttentionSync(q, k, v));
  const tb = time(() => simd.scaledDotProductAttentionBackward(q, k, v, dOut, saved));
  const tr = time(() => simd.scaledDotProductAttentionBackward(q, k, v, dOut));
  const ts = n <= 512 ? time(() => scalar.scaledDotProductAttentionBackward(q, k, v, dOut)) : NaN;
  const g = (flops, ms) => (Number.isNaN(ms) ? '—' : (flops / (ms * 1e6)).toFixed(2));
  rows.push({
    shape: `[1, ${BH}, ${n}, ${d}]`,
    'fwd simd ms': tf.toFixed(1),
    'fwd GFLOP/s': g(fwdFlops, tf),
    'bwd simd ms': tb.toFixed(1),
    'bwd GFLOP/s': g(bwdFlops, tb),
    'bwd+recompute ms': tr.toFixed(1),
    'bwd+recompute GFLOP/s': g(bwdFlops, tr),
    'bwd scalar GFLOP/s': g(bwdFlops, ts),
  });
}
console.log(`sdpa-web backward benchmark (node ${process.versions.node}, median of ${reps}, 1 thread, flops: fwd 4·BH·n²·d, bwd 10·BH·n²·d)`);
console.table(rows);
simd.dispose();
scalar.dispose();
