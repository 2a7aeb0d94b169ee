// The shared KV-cache test body (support/kv-cache-suite.ts) on the 'simd' backend's SIMD128
// build, on every core and on one thread.
import { createAttention } from 'sdpa-web';
import { defineKvCacheSuite } from './support/kv-cache-suite.js';
import { createSimdBuild } from './support/simd-builds.js';

defineKvCacheSuite("'simd' (SIMD128, threads)", { factor: 2, create: () => createSimdBuild(false) });
defineKvCacheSuite("'simd' (SIMD128, 1 thread)", { factor: 2, create: () => createAttention({ backend: 'simd', threads: 1, relaxedSimd: false }) });
