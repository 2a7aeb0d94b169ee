// The forward option audit (support/option-audit-suite.ts) on the 'simd' backend, relaxed-SIMD
// build (the default where the engine has it, as in every test process).
import { defineOptionAuditSuite } from './support/option-audit-suite.js';
import { createSimdBuild } from './support/simd-builds.js';

defineOptionAuditSuite({ backend: 'simd', factor: 2, create: () => createSimdBuild(true) });
