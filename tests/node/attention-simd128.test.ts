// The shared attention test body (support/attention-suite.ts) on the 'simd' backend, SIMD128 build
// (separate multiply and add).
import { expect } from 'vitest';
import { createAttention } from 'sdpa-web';
import { defineAttentionSuite } from './support/attention-suite.js';

defineAttentionSuite('simd', {
  factor: 2,
  create: async () => {
    const attn = await createAttention({ backend: 'simd', relaxedSimd: false });
    expect(attn.relaxedSimd).toBe(false);
    return attn;
  },
});
