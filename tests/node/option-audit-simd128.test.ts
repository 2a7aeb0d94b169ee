// The forward option audit (support/option-audit-suite.ts) on the 'simd' backend, SIMD128 build.
import { defineOptionAuditSuite } from './support/option-audit-suite.js';
import { createSimdBuild } from './support/simd-builds.js';

defineOptionAuditSuite({ backend: 'simd', factor: 2, create: () => createSimdBuild(false) });
