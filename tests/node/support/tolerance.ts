// The tolerance rule every backend is held to, against the float64 reference (the C++ scalar
// reference instantiated in double, exposed as attn.referenceAttention): the package's
// maxAbsDiff/toleranceBound (web/src/extras/accuracy.ts),
//   max|o − o64| ≤ f·e_ref + 1e-5·max(1, |V|max)
// where e_ref = max|o32 − o64| is the error of the plain float32 implementation (the 'scalar'
// backend) on the same inputs, and f = 2 for CPU backends (4 for WebGPU).
import { expect } from 'vitest';
import { maxAbsDiff as packageMaxAbsDiff, toleranceBound, type Attention, type AttentionOptions, type AttentionResult, type Tensor } from 'sdpa-web';

/** The package's maxAbsDiff, after asserting that both have the same length. */
export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  return packageMaxAbsDiff(a, b);
}

export interface CheckOptions {
  /** f in the rule: 2 for CPU backends, 4 for WebGPU. */
  factor: number;
}

/**
 * Runs `attn` and checks output (and weights, scores and log-sum-exp, when requested) against the float64 reference.
 * `oracle` is a scalar-backend instance: it provides both the float64 reference and e_ref.
 */
export async function expectMatchesReference(
  attn: Attention,
  oracle: Attention,
  q: Tensor,
  k: Tensor,
  v: Tensor,
  options: AttentionOptions,
  { factor }: CheckOptions,
  label = '',
): Promise<void> {
  const got = await attn.scaledDotProductAttention(q, k, v, options);
  expectResultMatchesReference(got, oracle, q, k, v, options, factor, label);
}

/** A result `got` of a call on q, k, v (or on a KV cache holding k, v) against the float64 reference. */
export function expectResultMatchesReference(
  got: AttentionResult,
  oracle: Attention,
  q: Tensor,
  k: Tensor,
  v: Tensor,
  options: AttentionOptions,
  factor: number,
  label = '',
): void {
  const ref = oracle.referenceAttention(q, k, v, options);
  const plain = oracle.scaledDotProductAttentionSync(q, k, v, { ...options, returnWeights: true });
  expect(got.output.shape, label).toEqual(ref.output.shape);
  const eRef = maxAbsDiff(plain.output.data, ref.output.data);
  const bound = toleranceBound(eRef, factor, v.data);
  const err = maxAbsDiff(got.output.data, ref.output.data);
  expect(err, `${label} output error ${err} > ${bound} (e_ref ${eRef})`).toBeLessThanOrEqual(bound);
  if (options.returnWeights) {
    expect(got.weights!.shape, label).toEqual(ref.weights.shape);
    const weRef = maxAbsDiff(plain.weights!.data, ref.weights.data);
    const wErr = maxAbsDiff(got.weights!.data, ref.weights.data);
    const wBound = factor * weRef + 1e-6;
    expect(wErr, `${label} weights error ${wErr} > ${wBound}`).toBeLessThanOrEqual(wBound);
  }
  if (options.returnScores) expectScoresMatch(got.scores, ref.scores!, plain.scores, factor, label);
  if (options.returnLogSumExp) expectLogSumExpMatches(got.logSumExp, ref.logSumExp!, plain.logSumExp, factor, label);
}

/**
 * The rows' log-sum-exp against the float64 one: −Infinity (a row that sees no key, without a
 * sink) and NaN exactly where the reference has them, elsewhere
 * max|lse − lse64| ≤ f·e_ref + 1e-5·max(1, |lse64|), e_ref the float32 scalar error.
 */
function expectLogSumExpMatches(got: Tensor | undefined, ref: { data: Float64Array; shape: readonly number[] }, plain: Tensor | undefined, factor: number, label: string) {
  expect(got, `${label}: logSumExp returned`).toBeDefined();
  expect(got!.shape, label).toEqual(ref.shape);
  expect(got!.data.length, label).toBe(ref.data.length);
  for (let i = 0; i < ref.data.length; i++) {
    const r = ref.data[i]!, g = got!.data[i]!;
    if (!Number.isFinite(r) || !Number.isFinite(g)) {
      expect(g, `${label} logSumExp ${i}`).toBe(r);
      continue;
    }
    const eRef = Math.abs(plain!.data[i]! - r);
    const bound = factor * eRef + 1e-5 * Math.max(1, Math.abs(r));
    expect(Math.abs(g - r), `${label} logSumExp ${i}: ${g} vs ${r} (e_ref ${eRef})`).toBeLessThanOrEqual(bound);
  }
}

/**
 * A stage of the scores against the float64 one: -Infinity (hidden) exactly where the reference
 * has it, elsewhere max|s − s64| ≤ f·e_ref + 1e-6·max(1, |s64|max), e_ref the float32 scalar error.
 */
function expectScoresMatch(got: Tensor | undefined, ref: { data: Float64Array; shape: readonly number[] }, plain: Tensor | undefined, factor: number, label: string) {
  expect(got, `${label}: scores returned`).toBeDefined();
  expect(got!.shape, label).toEqual(ref.shape);
  let err = 0, eRef = 0, scale = 1;
  for (let i = 0; i < ref.data.length; i++) {
    const r = ref.data[i]!, g = got!.data[i]!;
    if (r === -Infinity || g === -Infinity) {
      expect(g, `${label} score ${i}: hidden in one and not the other`).toBe(r);
      continue;
    }
    err = Math.max(err, Math.abs(g - r));
    eRef = Math.max(eRef, Math.abs(plain!.data[i]! - r));
    scale = Math.max(scale, Math.abs(r));
  }
  expect(err, `${label} scores error ${err} (e_ref ${eRef})`).toBeLessThanOrEqual(factor * eRef + 1e-6 * scale);
}
