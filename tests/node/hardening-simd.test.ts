// The hardening checklist (support/hardening-suite.ts) on the 'simd' backend,
// relaxed-SIMD build (fused multiply-add; the default where the engine has it, as in every
// test process).
import { defineHardeningSuite } from './support/hardening-suite.js';
import { createSimdBuild } from './support/simd-builds.js';

defineHardeningSuite('simd', { factor: 2, create: () => createSimdBuild(true) });
