// The hardening checklist (support/hardening-suite.ts) on the 'simd' backend, relaxed-SIMD
// build (fused multiply-add; the default where the engine has it, as in every test process).
import { expect } from 'vitest';
import { createAttention } from 'sdpa-web';
import { defineHardeningSuite } from './support/hardening-suite.js';

defineHardeningSuite('simd', {
  factor: 2,
  create: async () => {
    const attn = await createAttention({ backend: 'simd', relaxedSimd: true });
    expect(attn.relaxedSimd).toBe(true);
    return attn;
  },
});
