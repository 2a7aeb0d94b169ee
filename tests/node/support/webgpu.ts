// A real WebGPU implementation in Node: dawn.node (npm `webgpu`) on SwiftShader, Vulkan on the
// CPU (the ICD comes with Debian's chromium package), or on the Vulkan driver VK_ICD_FILENAMES
// names (the test step webgpu_f16: Mesa's lavapipe, which has float16 shaders). Correctness
// only: neither is a GPU.
import { create, globals } from 'webgpu';
import { afterAll, beforeAll, expect } from 'vitest';
import { createAttention, type Attention, type GpuLike } from 'sdpa-web';
import { subgroupsWithheld, withoutSubgroups } from '../../../scripts/webgpu-subgroups.mjs';
import { testDawnFlags } from './dawn-flags.js';

export const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';
// Read by the Vulkan loader when dawn.node creates its instance (vitest.config.ts sets it too).
process.env.VK_ICD_FILENAMES ??= SWIFTSHADER_ICD;
Object.assign(globalThis, globals);

/**
 * dawn.node's `navigator.gpu`. Module-level on purpose: it must stay referenced for the whole
 * run (dropping it gave random SIGSEGVs and hung mapAsync). Its options: support/dawn-flags.ts.
 */
const dawn = create(testDawnFlags());

/**
 * SDPA_WEBGPU_SUBGROUPS=0 presents the adapter without subgroups (scripts/webgpu-subgroups.mjs,
 * shared with the bench), so that no device the tests or the library request has them and the
 * plan takes its workgroup-memory kernels; unset or 1, the adapter is presented as it is.
 */
export const SUBGROUPS_WITHHELD = subgroupsWithheld(process.env.SDPA_WEBGPU_SUBGROUPS);

/** The `navigator.gpu` stand-in: dawn.node's, without `'subgroups'` under SDPA_WEBGPU_SUBGROUPS=0. */
export const gpu: GPU = SUBGROUPS_WITHHELD ? withoutSubgroups(dawn) : dawn;

/**
 * Whether `device` has `'subgroups'`, failing unless that is what SDPA_WEBGPU_SUBGROUPS asks for:
 * with the variable unset the test adapter must have them (their kernels are never skipped
 * unnoticed), with 0 the device must lack them.
 */
export function expectSubgroupsAsConfigured(device: GPUDevice): boolean {
  const has = device.features.has('subgroups');
  expect(has, SUBGROUPS_WITHHELD ? "the device lacks 'subgroups' (SDPA_WEBGPU_SUBGROUPS=0)" : "the test adapter has 'subgroups'").toBe(!SUBGROUPS_WITHHELD);
  return has;
}

/**
 * A fresh device on the test adapter (default limits unless `requiredLimits` is given), with
 * 'shader-f16' and 'subgroups' where the adapter has them (lavapipe has both; SwiftShader has
 * subgroups only; SDPA_WEBGPU_SUBGROUPS=0 withholds subgroups), as `createAttention` requests its
 * own devices.
 */
export async function testDevice(requiredLimits: Record<string, number> = {}): Promise<GPUDevice> {
  const adapter = await gpu.requestAdapter();
  if (!adapter) throw new Error(`dawn.node found no WebGPU adapter (is ${process.env.VK_ICD_FILENAMES} there, and libvulkan1 installed?)`);
  const requiredFeatures = (['shader-f16', 'subgroups'] as GPUFeatureName[]).filter((name) => adapter.features.has(name));
  return adapter.requestDevice({ requiredLimits, requiredFeatures });
}

/**
 * `source`'s adapter presented with other `info` (what `'auto'` reads to pass over software
 * fallback adapters), so that both choices are tested whatever adapter the machine has.
 */
function presentedAs(info: { description?: string; isFallbackAdapter: boolean }, source: GPU): GpuLike {
  return {
    requestAdapter: async (options?: object) => {
      const adapter = await source.requestAdapter(options as GPURequestAdapterOptions);
      if (!adapter) return null;
      return {
        limits: adapter.limits,
        info: { description: adapter.info.description, architecture: adapter.info.architecture, ...info },
        requestDevice: (descriptor?: object) => adapter.requestDevice(descriptor as GPUDeviceDescriptor),
      };
    },
  };
}

/** `gpu` presenting its adapter (SwiftShader in CI) as a hardware one. */
export function asHardware(source: GPU = gpu): GpuLike {
  return presentedAs({ isFallbackAdapter: false }, source);
}

/** `gpu` presenting its adapter (a real GPU on a GPU machine) as SwiftShader, a software fallback. */
export function asSoftware(source: GPU = gpu): GpuLike {
  return presentedAs({ description: 'SwiftShader Device (Subzero)', isFallbackAdapter: true }, source);
}

/**
 * A test file's device (testDevice(`requiredLimits`)) and scalar oracle: made before its tests and
 * handed to `use`, released after them.
 */
export function withDeviceAndOracle(requiredLimits: Record<string, number>, use: (device: GPUDevice, oracle: Attention) => void): void {
  let device: GPUDevice | undefined;
  let oracle: Attention | undefined;
  beforeAll(async () => {
    device = await testDevice(requiredLimits);
    oracle = await createAttention({ backend: 'scalar' });
    use(device, oracle);
  });
  afterAll(() => {
    oracle?.dispose();
    device?.destroy();
  });
}
