// Peak probe: the f32x4 mul+add throughput this engine reaches on one core. A hand-assembled
// wasm module (no toolchain needed) runs `iterations` rounds of 12 independent chains
// acc_i = acc_i·x + y (one f32x4.mul and one f32x4.add each: 8 flops), enough chains to cover the
// mul→add latency; 12 accumulators + x + y fit the 16 xmm registers of x86-64. With `fused`, each
// chain step is one f32x4.relaxed_madd instead (relaxed SIMD; the FMA peak).
import { median, timeSync } from './timing.mjs';

const CHAINS = 12;

/** LEB128, unsigned, as wasm's binary format writes sizes and indices. */
export function uleb(n) {
  const out = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n) b |= 0x80;
    out.push(b);
  } while (n);
  return out;
}

/** A wasm module section: its id, its size, its body. */
export function section(id, body) {
  return [id, ...uleb(body.length), ...body];
}

export function probeModule(fused) {
  const V128 = 0x7b, I32 = 0x7f;
  const simd = (op) => [0xfd, ...uleb(op)];
  const f32x4Splat = simd(0x13), f32x4Mul = simd(0xe6), f32x4Add = simd(0xe4), f32x4Extract = simd(0x1f);
  const f32x4RelaxedMadd = simd(0x105);
  const f32Const = (v) => [0x43, ...new Uint8Array(new Float32Array([v]).buffer)];
  const local = { get: (i) => [0x20, ...uleb(i)], set: (i) => [0x21, ...uleb(i)] };
  // locals: 0 = iterations (param), 1..12 accumulators, 13 = x, 14 = y
  const x = CHAINS + 1, y = CHAINS + 2;
  const body = [];
  for (let i = 1; i <= CHAINS; i++) body.push(...f32Const(i * 1e-3), ...f32x4Splat, ...local.set(i));
  body.push(...f32Const(0.999), ...f32x4Splat, ...local.set(x));
  body.push(...f32Const(1e-3), ...f32x4Splat, ...local.set(y));
  body.push(0x02, 0x40, 0x03, 0x40); // block, loop
  for (let i = 1; i <= CHAINS; i++) {
    if (fused) body.push(...local.get(i), ...local.get(x), ...local.get(y), ...f32x4RelaxedMadd, ...local.set(i));
    else body.push(...local.get(i), ...local.get(x), ...f32x4Mul, ...local.get(y), ...f32x4Add, ...local.set(i));
  }
  // iterations -= 1; br_if loop (iterations != 0)
  body.push(...local.get(0), 0x41, 1, 0x6b, 0x22, 0, 0x0d, 0); // local.tee 0; br_if 0
  body.push(0x0b, 0x0b); // end loop, end block
  // result: sum of lane 0 of every accumulator (keeps the work alive)
  body.push(...local.get(1), ...f32x4Extract, 0);
  for (let i = 2; i <= CHAINS; i++) body.push(...local.get(i), ...f32x4Extract, 0, 0x92); // f32.add
  body.push(0x0b);
  const locals = [1, ...uleb(CHAINS + 2), V128];
  const func = [...uleb(locals.length + body.length), ...locals, ...body];
  const bytes = [
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, [1, 0x60, 1, I32, 1, 0x7d]), // type: (i32) -> f32
    ...section(3, [1, 0]),
    ...section(7, [1, 4, ...new TextEncoder().encode('peak'), 0x00, 0]),
    ...section(10, [1, ...func]),
  ];
  return new Uint8Array(bytes);
}

/**
 * Median GFLOP/s of the probe over `reps` runs of about 50 ms each; with `fused`, the relaxed-SIMD
 * multiply-add probe (undefined where the engine has no relaxed SIMD).
 */
export async function peakProbe(reps = 9, fused = false) {
  const bytes = probeModule(fused);
  if (!WebAssembly.validate(bytes)) return undefined;
  const { instance } = await WebAssembly.instantiate(bytes);
  const peak = instance.exports.peak;
  peak(1e5); // tier up
  let iterations = 1e6;
  for (;;) {
    const ms = timeSync(() => peak(iterations));
    if (ms > 20) {
      iterations = Math.round((iterations * 50) / ms);
      break;
    }
    iterations *= 4;
  }
  const rates = Array.from({ length: reps }, () => (iterations * CHAINS * 8) / timeSync(() => peak(iterations)) / 1e6);
  return { medianGflops: median(rates), maxGflops: Math.max(...rates), chains: CHAINS };
}
