// The accuracy rule every backend is held to against the float64 reference
// (`attn.referenceAttention`), shared by the tests and the benchmark:
//   max|o − o64| ≤ f·e_ref + 1e-5·max(1, |V|max)
// e_ref = max|o32 − o64| is the error of the plain float32 implementation (the 'scalar' backend)
// on the same inputs, so the bound scales with how hard the inputs are to compute in float32; the
// second term keeps it above float32 rounding of the output's magnitude when e_ref is 0.

/**
 * The largest |a[i] − b[i]|. A pair where both are NaN is skipped (the same result); Infinity when
 * the lengths differ or exactly one of a pair is NaN.
 *
 * @example
 * ```ts
 * const err = maxAbsDiff(output.data, attn.referenceAttention(q, k, v).output.data);
 * ```
 */
export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return Infinity;
  let worst = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!, y = b[i]!;
    if (Number.isNaN(x) || Number.isNaN(y)) {
      if (Number.isNaN(x) !== Number.isNaN(y)) return Infinity;
      continue;
    }
    if (x !== y) worst = Math.max(worst, Math.abs(x - y));
  }
  return worst;
}

/**
 * The bound of the accuracy rule: `factor·eRef + 1e-5·max(1, max finite |value|)`, where `eRef`
 * is the float32 reference's error (`maxAbsDiff` of the 'scalar' backend's output and the float64
 * reference's) and `value` the value tensor's data; `factor` is 2 for the CPU backends, 4 for
 * WebGPU.
 *
 * @example
 * ```ts
 * const ref = scalar.referenceAttention(q, k, v);
 * const eRef = maxAbsDiff(scalar.scaledDotProductAttentionSync(q, k, v).output.data, ref.output.data);
 * const ok = maxAbsDiff(output.data, ref.output.data) <= toleranceBound(eRef, 2, v.data);
 * ```
 */
export function toleranceBound(eRef: number, factor: number, value: ArrayLike<number>): number {
  let largest = 0;
  for (let i = 0; i < value.length; i++) {
    const x = value[i]!;
    if (Number.isFinite(x)) largest = Math.max(largest, Math.abs(x));
  }
  return factor * eRef + 1e-5 * Math.max(1, largest);
}

/**
 * Half the spacing of float16 values at |x|: the most that rounding a float32 result to float16
 * moves it (2^-25 below 2^-14, where halves are subnormal).
 */
export function halfFloat16Ulp(x: number): number {
  const a = Math.abs(x);
  return a < 2 ** -14 ? 2 ** -25 : 2 ** (Math.floor(Math.log2(a)) - 11);
}

/**
 * The float16 accuracy rule's measure of a float16 output against the float64 reference of the
 * same (float16) inputs: the largest |o − o64| less the output's own rounding (half a float16 ulp
 * of o64), to compare with {@link toleranceBound} (e_ref then being the error of a reference that
 * stores float16 and accumulates float32: the 'scalar' backend with `outputDtype: 'float32'`).
 * Where o64 rounds past float16's range the output must be the same-signed Infinity (0 if so).
 */
export function float16Excess(output: ArrayLike<number>, reference: ArrayLike<number>): number {
  if (output.length !== reference.length) return Infinity;
  let worst = 0;
  for (let i = 0; i < output.length; i++) {
    const x = output[i]!, y = reference[i]!;
    if (Number.isNaN(x) || Number.isNaN(y)) {
      if (Number.isNaN(x) !== Number.isNaN(y)) return Infinity;
      continue;
    }
    if (Math.abs(y) >= 65520) {
      if (x !== Math.sign(y) * Infinity) return Infinity;
      continue;
    }
    worst = Math.max(worst, Math.abs(x - y) - halfFloat16Ulp(y));
  }
  return worst;
}
