// The float16 test body (support/float16-suite.ts) on the 'webgpu' backend (dawn.node on
// SwiftShader, which has no 'shader-f16': the kernels read float16 through unpack2x16float).
// GPU-specific float16 tests: float16-gpu-webgpu.test.ts.
import { createAttention } from 'sdpa-web';
import { defineFloat16Suite } from './support/float16-suite.js';
import { gpu } from './support/webgpu.js';

defineFloat16Suite("'webgpu'", { factor: 4, create: () => createAttention({ backend: 'webgpu', gpu }) });
