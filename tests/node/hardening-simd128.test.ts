// The hardening checklist (support/hardening-suite.ts) on the 'simd' backend,
// SIMD128 build (separate multiply and add).
import { defineHardeningSuite } from './support/hardening-suite.js';
import { createSimdBuild } from './support/simd-builds.js';

defineHardeningSuite('simd', { factor: 2, create: () => createSimdBuild(false) });
