// The shared KV-cache test body (support/kv-cache-suite.ts) on the 'simd' backend's SIMD128
// build, on every core and on one thread, on float32 and on int8 and int4 caches.
import { createAttention } from 'sdpa-web';
import { defineKvCacheSuite } from './support/kv-cache-suite.js';
import { createSimdBuild } from './support/simd-builds.js';

defineKvCacheSuite("'simd' (SIMD128, threads)", { factor: 2, create: () => createSimdBuild(false) });
defineKvCacheSuite("'simd' (SIMD128, 1 thread)", { factor: 2, create: () => createAttention({ backend: 'simd', threads: 1, relaxedSimd: false }) });
for (const dtype of ['int8', 'int4'] as const) {
  defineKvCacheSuite("'simd' (SIMD128, threads)", { factor: 2, dtype, create: () => createSimdBuild(false) });
  defineKvCacheSuite("'simd' (SIMD128, 1 thread)", { factor: 2, dtype, create: () => createAttention({ backend: 'simd', threads: 1, relaxedSimd: false }) });
}
