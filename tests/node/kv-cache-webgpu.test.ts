// The shared KV-cache test body (support/kv-cache-suite.ts) on the 'webgpu' backend (dawn.node on
// SwiftShader), whose cache is two GPUBuffers read in place through the kernels' head strides;
// also as int8 and int4 caches, quantized on the GPU (GPU-specific cache tests:
// gpu-resident-webgpu.test.ts, kv-cache-quantized-webgpu.test.ts).
import { createAttention } from 'sdpa-web';
import { defineKvCacheSuite } from './support/kv-cache-suite.js';
import { gpu } from './support/webgpu.js';

for (const dtype of ['float32', 'int8', 'int4'] as const) {
  defineKvCacheSuite("'webgpu'", { factor: 4, dtype, create: () => createAttention({ backend: 'webgpu', gpu }) });
}
