// The float16 test body (support/float16-suite.ts) on the 'simd' backend, relaxed-SIMD build, on
// every core and on one thread.
import { createAttention } from 'sdpa-web';
import { defineFloat16Suite } from './support/float16-suite.js';
import { createSimdBuild } from './support/simd-builds.js';

defineFloat16Suite("'simd' (relaxed SIMD, threads)", { factor: 2, create: () => createSimdBuild(true) });
defineFloat16Suite("'simd' (relaxed SIMD, 1 thread)", { factor: 2, create: () => createAttention({ backend: 'simd', threads: 1 }) });
