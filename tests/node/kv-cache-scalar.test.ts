// The shared KV-cache test body (support/kv-cache-suite.ts) on the 'scalar' backend.
import { createAttention } from 'sdpa-web';
import { defineKvCacheSuite } from './support/kv-cache-suite.js';

defineKvCacheSuite("'scalar'", { factor: 2, create: () => createAttention({ backend: 'scalar' }) });
for (const dtype of ['int8', 'int4'] as const) defineKvCacheSuite("'scalar'", { factor: 2, dtype, create: () => createAttention({ backend: 'scalar' }) });
