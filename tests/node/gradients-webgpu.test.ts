// The backward on the 'webgpu' backend (dawn.node on SwiftShader): the shared backward body
// (support/backward-suite.ts) with the WebGPU tolerance factor 4.
import { createAttention } from 'sdpa-web';
import { defineBackwardSuite } from './support/backward-suite.js';
import { gpu, testDevice } from './support/webgpu.js';

defineBackwardSuite({
  label: "the 'webgpu' backend (SwiftShader)",
  factor: 4,
  tinyUpstream: 1e-30,
  create: async () => createAttention({ backend: 'webgpu', gpuDevice: await testDevice(), gpu }),
});
