// The float16 test body (support/float16-suite.ts) on the 'simd' backend, SIMD128 build.
import { defineFloat16Suite } from './support/float16-suite.js';
import { createSimdBuild } from './support/simd-builds.js';

defineFloat16Suite("'simd' (SIMD128)", { factor: 2, create: () => createSimdBuild(false) });
