// The shared KV-cache test body (support/kv-cache-suite.ts) on the 'scalar' backend.
import { createAttention } from 'sdpa-web';
import { defineKvCacheSuite } from './support/kv-cache-suite.js';

defineKvCacheSuite("'scalar'", { factor: 2, create: () => createAttention({ backend: 'scalar' }) });
