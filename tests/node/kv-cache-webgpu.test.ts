// The shared KV-cache test body (support/kv-cache-suite.ts) on the 'webgpu' backend (dawn.node on
// SwiftShader), which reads a cache through one dense copy of its tokens per call.
import { createAttention } from 'sdpa-web';
import { defineKvCacheSuite } from './support/kv-cache-suite.js';
import { gpu } from './support/webgpu.js';

defineKvCacheSuite("'webgpu'", { factor: 4, create: () => createAttention({ backend: 'webgpu', gpu }) });
