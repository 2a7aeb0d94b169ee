// A real WebGPU implementation in Node: dawn.node (npm `webgpu`) on SwiftShader, Vulkan on the
// CPU (the ICD comes with Debian's chromium package). Correctness only: SwiftShader is no GPU.
import { create, globals } from 'webgpu';
import type { GpuLike } from 'sdpa-web';

export const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';
// Read by the Vulkan loader when dawn.node creates its instance (vitest.config.ts sets it too).
process.env.VK_ICD_FILENAMES ??= SWIFTSHADER_ICD;
Object.assign(globalThis, globals);

/**
 * The `navigator.gpu` stand-in. Module-level on purpose: it must stay referenced for the whole
 * run (dropping it gave random SIGSEGVs and hung mapAsync).
 */
export const gpu = create([]);

/** A fresh device on the SwiftShader adapter (default limits unless `requiredLimits` is given). */
export async function swiftShaderDevice(requiredLimits: Record<string, number> = {}): Promise<GPUDevice> {
  const adapter = await gpu.requestAdapter();
  if (!adapter) throw new Error(`dawn.node found no WebGPU adapter (is ${SWIFTSHADER_ICD} there, and libvulkan1 installed?)`);
  return adapter.requestDevice({ requiredLimits });
}

/**
 * `gpu` presenting its SwiftShader adapter as a hardware one, to test what `'auto'` does on a
 * real GPU (it passes over software fallback adapters).
 */
export function asHardware(source: GPU = gpu): GpuLike {
  return {
    requestAdapter: async (options?: object) => {
      const adapter = await source.requestAdapter(options as GPURequestAdapterOptions);
      if (!adapter) return null;
      return {
        limits: adapter.limits,
        info: { description: adapter.info.description, architecture: adapter.info.architecture, isFallbackAdapter: false },
        requestDevice: (descriptor?: object) => adapter.requestDevice(descriptor as GPUDeviceDescriptor),
      };
    },
  };
}
