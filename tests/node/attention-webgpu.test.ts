// The shared attention test body (support/attention-suite.ts) on the 'webgpu' backend: the C++
// core's WGSL kernels on a real WebGPU device, dawn.node on SwiftShader (support/webgpu.ts).
import { createAttention } from 'sdpa-web';
import { defineAttentionSuite } from './support/attention-suite.js';
import { gpu } from './support/webgpu.js';

defineAttentionSuite('webgpu', { factor: 4, create: () => createAttention({ backend: 'webgpu', gpu }) });
