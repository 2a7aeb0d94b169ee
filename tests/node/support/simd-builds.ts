// The two builds of the 'simd' backend the per-backend test files run: relaxed SIMD (fused
// multiply-add; every test process has it, see vitest.config.ts) and SIMD128.
import { expect } from 'vitest';
import { createAttention, type Attention } from 'sdpa-web';

export async function createSimdBuild(relaxedSimd: boolean): Promise<Attention> {
  const attn = await createAttention({ backend: 'simd', relaxedSimd });
  expect(attn.relaxedSimd).toBe(relaxedSimd);
  return attn;
}
