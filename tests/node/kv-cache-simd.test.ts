// The shared KV-cache test body (support/kv-cache-suite.ts) on the 'simd' backend, relaxed-SIMD
// build, on every core and on one thread (the decode kernel's split-K runs on the pool), on
// float32 and on int8 and int4 caches.
import { createAttention } from 'sdpa-web';
import { defineKvCacheSuite } from './support/kv-cache-suite.js';
import { createSimdBuild } from './support/simd-builds.js';

defineKvCacheSuite("'simd' (relaxed SIMD, threads)", { factor: 2, create: () => createSimdBuild(true) });
defineKvCacheSuite("'simd' (relaxed SIMD, 1 thread)", { factor: 2, create: () => createAttention({ backend: 'simd', threads: 1 }) });
for (const dtype of ['int8', 'int4'] as const) {
  defineKvCacheSuite("'simd' (relaxed SIMD, threads)", { factor: 2, dtype, create: () => createSimdBuild(true) });
  defineKvCacheSuite("'simd' (relaxed SIMD, 1 thread)", { factor: 2, dtype, create: () => createAttention({ backend: 'simd', threads: 1 }) });
}
