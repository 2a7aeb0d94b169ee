// The hardening checklist (support/hardening-suite.ts) on the 'simd' backend, SIMD128 build
// (separate multiply and add).
import { expect } from 'vitest';
import { createAttention } from 'sdpa-web';
import { defineHardeningSuite } from './support/hardening-suite.js';

defineHardeningSuite('simd', {
  factor: 2,
  create: async () => {
    const attn = await createAttention({ backend: 'simd', relaxedSimd: false });
    expect(attn.relaxedSimd).toBe(false);
    return attn;
  },
});
