// The `relaxedSimd` option: the relaxed-SIMD build runs by default where the engine has it (every
// test process does: vitest.config.ts), `false` forces the SIMD128 build, and both match the
// float64 reference (the shared suites run on each: attention-simd*.test.ts).
import { describe, expect, it } from 'vitest';
import { createAttention } from 'sdpa-web';

describe('createAttention({ relaxedSimd })', () => {
  it('runs the relaxed-SIMD build by default here, and the SIMD128 build when told', async () => {
    for (const threads of [1, 2]) {
      const relaxed = await createAttention({ backend: 'simd', threads });
      expect(relaxed.relaxedSimd).toBe(true);
      expect(relaxed.fallbackReason).toBeUndefined();
      const plain = await createAttention({ backend: 'simd', threads, relaxedSimd: false });
      expect(plain.relaxedSimd).toBe(false);
      expect(plain.threads).toBe(relaxed.threads);
      relaxed.dispose();
      plain.dispose();
    }
  });

  it('rejects a relaxedSimd value that is not a boolean', async () => {
    for (const relaxedSimd of [1, 'yes', null]) {
      await expect(createAttention({ relaxedSimd: relaxedSimd as unknown as boolean })).rejects.toThrow(TypeError);
    }
  });
});
