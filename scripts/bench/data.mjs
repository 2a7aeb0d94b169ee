// Inputs and the accuracy check shared by the bench scripts.

/** n floats uniform in [lo, hi), reproducible from `seed` (mulberry32). */
export function uniformRandom(n, seed, lo = -1, hi = 1) {
  let a = seed >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    out[i] = lo + (((t ^ (t >>> 14)) >>> 0) / 4294967296) * (hi - lo);
  }
  return out;
}

/** Largest |a[i] − b[i]|; Infinity when the lengths differ or only one of a pair is NaN. */
export function maxAbsError(a, b) {
  if (!a || a.length !== b.length) return Infinity;
  let worst = 0;
  for (let i = 0; i < a.length; i++) {
    if (Number.isNaN(a[i]) !== Number.isNaN(b[i])) return Infinity;
    if (!Number.isNaN(a[i])) worst = Math.max(worst, Math.abs(a[i] - b[i]));
  }
  return worst;
}
