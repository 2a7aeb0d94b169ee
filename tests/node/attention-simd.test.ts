// The shared attention test body (support/attention-suite.ts) on the 'simd' backend,
// relaxed-SIMD build (fused multiply-add; the default where the engine has it, as in every
// test process).
import { defineAttentionSuite } from './support/attention-suite.js';
import { createSimdBuild } from './support/simd-builds.js';

defineAttentionSuite('simd', { factor: 2, create: () => createSimdBuild(true) });
