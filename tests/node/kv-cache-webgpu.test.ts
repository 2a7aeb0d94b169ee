// The shared KV-cache test body (support/kv-cache-suite.ts) on the 'webgpu' backend (dawn.node on
// SwiftShader), whose cache is two GPUBuffers read in place through the kernels' head strides
// (GPU-specific cache tests: gpu-resident-webgpu.test.ts); int8/int4 caches are CPU-only there.
import { expect, it } from 'vitest';
import { createAttention } from 'sdpa-web';
import { defineKvCacheSuite } from './support/kv-cache-suite.js';
import { gpu } from './support/webgpu.js';

defineKvCacheSuite("'webgpu'", { factor: 4, create: () => createAttention({ backend: 'webgpu', gpu }) });

it("int8/int4 caches on 'webgpu' are a TypeError naming the CPU backends, never a float cache", async () => {
  const attn = await createAttention({ backend: 'webgpu', gpu });
  for (const dtype of ['int8', 'int4'] as const) {
    expect(() => attn.createKvCache({ batch: 1, kvHeads: 1, maxLength: 8, headDim: 8, dtype })).toThrow(
      new TypeError(`createKvCache: dtype '${dtype}' caches are read by the CPU backends ('simd', 'scalar'); backend 'webgpu' takes dtype 'float32' or 'float16'`),
    );
  }
  attn.dispose();
});
