// The hardening checklist (support/hardening-suite.ts) on the 'webgpu' backend (dawn.node on
// SwiftShader). Instances share one device, as an app would: its pipelines compile once, so the
// 10,000 create/run/dispose cycles measure the library, not shader compilation.
import { createAttention } from 'sdpa-web';
import { defineHardeningSuite } from './support/hardening-suite.js';
import { gpu, testDevice } from './support/webgpu.js';

let device: Promise<GPUDevice> | undefined;
defineHardeningSuite('webgpu', {
  factor: 4,
  create: async () => createAttention({ backend: 'webgpu', gpuDevice: await (device ??= testDevice()), gpu }),
});
