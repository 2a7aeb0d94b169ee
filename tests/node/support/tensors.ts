// Seeded test inputs, so every backend sees the same numbers. They come from this file's own
// mulberry32, written from its public-domain definition independently of the library's C++ one:
// the tests draw inputs without the code under test, and modules.test.ts checks the library's
// generator against it.
import type { MaskTensor, Tensor } from 'sdpa-web';

/** mulberry32: numbers in [0, 1) from a 32-bit seed. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const elements = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

/** Uniform in [lo, hi). */
export function randomTensor(shape: number[], seed: number, lo = -1, hi = 1): Tensor {
  const next = rng(seed);
  const data = new Float32Array(elements(shape));
  for (let i = 0; i < data.length; i++) data[i] = lo + (hi - lo) * next();
  return { data, shape };
}

export function tensor(rows: number[][]): Tensor {
  return { data: new Float32Array(rows.flat()), shape: [rows.length, rows[0]!.length] };
}

/** A bool mask (1 = may attend) where about `visible` of the entries are 1, and its additive twin. */
export function randomMasks(shape: number[], seed: number, visible = 0.75): { bool: MaskTensor; additive: MaskTensor } {
  const next = rng(seed);
  const n = elements(shape);
  const bool = new Uint8Array(n);
  const additive = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const keep = next() < visible;
    bool[i] = keep ? 1 : 0;
    additive[i] = keep ? Math.round(next() * 6 - 3) : -Infinity;
  }
  return { bool: { data: bool, shape }, additive: { data: additive, shape } };
}

/** ∂loss/∂x.data[i] by a central difference with step 2^-10 (exact in float32), restoring x. */
export function centralDifference(x: { data: Float32Array }, i: number, loss: () => number): number {
  const x0 = x.data[i]!;
  x.data[i] = x0 + 2 ** -10;
  const up = loss();
  x.data[i] = x0 - 2 ** -10;
  const down = loss();
  x.data[i] = x0;
  return (up - down) / 2 ** -9;
}

/** Tensors [B, H, n_i, dim] (their data, in order) concatenated along the length: [B, H, Σn_i, dim]. */
export function concatLengths(parts: Float32Array[], B: number, H: number, dim: number): Tensor {
  const L = parts.reduce((n, r) => n + r.length / (B * H * dim), 0);
  const data = new Float32Array(B * H * L * dim);
  let at = 0;
  for (const r of parts) {
    const n = r.length / (B * H * dim);
    for (let head = 0; head < B * H; head++) data.set(r.subarray(head * n * dim, (head + 1) * n * dim), (head * L + at) * dim);
    at += n;
  }
  return { data, shape: [B, H, L, dim] };
}
