// A seeded differential fuzz of the 'webgpu' backend (dawn.node on SwiftShader in CI): random
// shapes (GQA groups, decode-length calls that take split-K, odd head dims), random option sets
// (causal alignments, bool/additive masks with broadcasts and padding rows, windows, key
// lengths, softcap, ALiBi, sinks, documents, scale, log-sum-exp) and value magnitudes, each call
// against the float64 reference with the WebGPU tolerance rule (f = 4); the backward on the shorter cases, per
// gradient, with the backward tests' rule, every other one on an instance with 1 KiB of workgroup
// memory (blocks of a few rows: the backward's loops cut into segments). An option set the scalar backend rejects must be
// rejected with the same error class. The C++ fuzz target (tests/fuzz) cannot reach WebGPU;
// this is its counterpart. SDPA_FUZZ_SEED and SDPA_FUZZ_CASES run other or more cases
// (docs/testing.md, Fuzzing).
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createAttention, type Attention, type AttentionOptions, type BackwardOptions, type MaskTensor, type Tensor } from 'sdpa-web';
import { expectGradientsMatch } from './support/backward-suite.js';
import { randomMasks, randomTensor, rng } from './support/tensors.js';
import { expectResultMatchesReference } from './support/tolerance.js';
import { gpu, testDevice } from './support/webgpu.js';

const SEED = Number(process.env.SDPA_FUZZ_SEED ?? 20261126);
const CASES = Number(process.env.SDPA_FUZZ_CASES ?? 32);
const FACTOR = 4;

interface FuzzCase {
  label: string;
  q: Tensor;
  k: Tensor;
  v: Tensor;
  options: AttentionOptions;
  backward: boolean;
}

function makeCase(index: number): FuzzCase {
  const r = rng(SEED + 7919 * index);
  const pick = <T,>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const chance = (p: number) => r() < p;
  const B = pick([1, 2]), Hkv = pick([1, 2]), group = pick([1, 2, 4]), Hq = Hkv * group;
  const decode = chance(0.35);
  const Lq = decode ? pick([1, 2, 3, 8]) : 1 + Math.floor(r() * 40);
  const Lk = decode ? 256 + Math.floor(r() * 500) : 1 + Math.floor(r() * 120);
  const E = pick([4, 8, 13, 16, 32, 64]), Ev = pick([E, 4, 7, 16]);
  const magnitude = pick([1e-3, 1, 3]);
  const seed = SEED + 31 * index;
  const q = randomTensor([B, Hq, Lq, E], seed, -magnitude, magnitude);
  const k = randomTensor([B, Hkv, Lk, E], seed + 1, -magnitude, magnitude);
  const v = randomTensor([B, Hkv, Lk, Ev], seed + 2, -3, 3);
  const options: AttentionOptions = group > 1 ? { enableGqa: true } : {};
  const causal = pick([undefined, true, 'bottom-right'] as const);
  if (causal !== undefined) options.isCausal = causal;
  if (chance(0.25)) {
    const shape = pick([[Lq, Lk], [B, 1, Lq, Lk], [1, Hq, Lq, Lk], [B, Hq, 1, Lk]]);
    const masks = randomMasks(shape, seed + 3, pick([0.3, 0.75, 0.97]));
    options.attnMask = (chance(0.5) ? masks.bool : masks.additive) as MaskTensor;
    // Every third case's additive mask starts with a padding row (every entry −3.4e38, the way
    // Hugging Face masks padding): its float32 log-sum-exp loses log Σ.
    if (index % 3 === 0 && options.attnMask === masks.additive) masks.additive.data.fill(-3.4e38, 0, shape.at(-1));
  }
  if (chance(0.2)) options.window = chance(0.5) ? { left: pick([0, 3, 40]) } : { left: pick([0, 3, 40]), right: pick([0, 5]) };
  if (chance(0.2)) options.keyLengths = Int32Array.from({ length: B }, () => Math.floor(r() * (Lk + 1)));
  if (chance(0.2)) options.softcap = pick([1, 5, 30]);
  if (chance(0.15)) options.alibiSlopes = Float32Array.from({ length: Hq }, () => r() * 0.5);
  if (chance(0.15)) options.sinks = Float32Array.from({ length: Hq }, () => r() * 4 - 2);
  if (chance(0.15)) options.scale = pick([0.01, 1, 3]);
  if (chance(0.1)) {
    const documents = (n: number) => Int32Array.from({ length: B * n }, (_, i) => Math.floor((3 * (i % n)) / n));
    options.queryDocuments = { data: documents(Lq), shape: [B, Lq] };
    options.keyDocuments = { data: documents(Lk), shape: [B, Lk] };
  }
  if (chance(0.3)) options.returnLogSumExp = true;
  const label = `case ${index} (seed ${SEED}): q [${q.shape}] k [${k.shape}] v [${v.shape}] ${Object.keys(options).join(',')}`;
  return { label, q, k, v, options, backward: !decode && Lq * Lk <= 2400 };
}

let attn: Attention;
let segmented: Attention;
let oracle: Attention;
beforeAll(async () => {
  const device = await testDevice();
  attn = await createAttention({ backend: 'webgpu', gpuDevice: device, gpu });
  segmented = await createAttention({ backend: 'webgpu', gpuDevice: device, gpuLimits: { maxComputeWorkgroupStorageSize: 1024 } });
  oracle = await createAttention({ backend: 'scalar' });
});
afterAll(() => {
  attn.dispose();
  segmented.dispose();
  oracle.dispose();
});

/** The error class a call rejects with, or undefined when it resolves. */
async function rejection(call: () => Promise<unknown>): Promise<string | undefined> {
  try {
    await call();
    return undefined;
  } catch (e) {
    return (e as Error).name;
  }
}

it(`${CASES} random calls, forward and backward, match the float64 reference (seed ${SEED})`, async () => {
  let forward = 0, backward = 0, rejected = 0;
  for (let i = 0; i < CASES; i++) {
    const { label, q, k, v, options, backward: withBackward } = makeCase(i);
    const expected = await rejection(() => oracle.scaledDotProductAttention(q, k, v, options));
    if (expected) {
      expect(await rejection(() => attn.scaledDotProductAttention(q, k, v, options)), label).toBe(expected);
      rejected++;
      continue;
    }
    expectResultMatchesReference(await attn.scaledDotProductAttention(q, k, v, options), oracle, q, k, v, options, FACTOR, label);
    forward++;
    if (!withBackward) continue;
    const { returnLogSumExp: _forwardOnly, ...backwardOptions } = options;
    const bwd: BackwardOptions = { ...backwardOptions, ...(options.attnMask && !(options.attnMask.data instanceof Uint8Array) ? { returnAttnMaskGrad: true } : {}) };
    const dOut = randomTensor([q.shape[0]!, q.shape[1]!, q.shape[2]!, v.shape[3]!], SEED + 13 * i + 5);
    const ref = oracle.referenceAttentionBackward(q, k, v, dOut, bwd);
    const plain = oracle.scaledDotProductAttentionBackwardSync(q, k, v, dOut, bwd);
    const instance = backward % 2 === 0 ? attn : segmented;
    const got = await instance.scaledDotProductAttentionBackward(q, k, v, dOut, bwd);
    expectGradientsMatch(got, ref, plain, bwd, FACTOR, `${label}${instance === segmented ? ' (1 KiB of workgroup memory)' : ''}`);
    backward++;
  }
  // The seed's cases reach every path: calls checked forward and backward (and any rejected).
  expect(forward + rejected).toBe(CASES);
  expect(forward).toBeGreaterThan(CASES / 2);
  expect(backward).toBeGreaterThan(0);
  expect(segmented.webgpuInfo()!.pipelines.some((key) => key.startsWith('backward-reduce-dkdv:') || key.startsWith('backward-reduce-dq:')), 'a backward in segments').toBe(true);
});
