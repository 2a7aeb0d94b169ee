// The shared attention test body (support/attention-suite.ts) on the 'simd' backend,
// SIMD128 build (separate multiply and add).
import { defineAttentionSuite } from './support/attention-suite.js';
import { createSimdBuild } from './support/simd-builds.js';

defineAttentionSuite('simd', { factor: 2, create: () => createSimdBuild(false) });
