// GPU buffers for the bench's GPU-resident engines: uploads and read-backs on a GPUDevice.
export const STORAGE = 0x80, COPY_SRC = 0x4, COPY_DST = 0x8, MAP_READ = 0x1;

/** A STORAGE buffer holding `data` (at least 16 bytes). */
export function upload(device, data) {
  const buffer = device.createBuffer({ size: Math.max(16, data.byteLength), usage: STORAGE | COPY_SRC | COPY_DST });
  device.queue.writeBuffer(buffer, 0, data);
  return buffer;
}

/** The first `floats` float32 values of `buffer`, read back. */
export async function readBack(device, buffer, floats) {
  const staging = device.createBuffer({ size: 4 * floats, usage: MAP_READ | COPY_DST });
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(buffer, 0, staging, 0, 4 * floats);
  device.queue.submit([encoder.finish()]);
  await staging.mapAsync(MAP_READ);
  const data = new Float32Array(staging.getMappedRange().slice(0));
  staging.destroy();
  return data;
}

/**
 * A device of `adapter` as the bench's engines use it: the features the kernels take where the
 * adapter has them (shader-f16, subgroups; timestamp-query with `profile`), and its largest buffers.
 */
export function benchDevice(adapter, { profile = false } = {}) {
  const requiredFeatures = ['shader-f16', 'subgroups', ...(profile ? ['timestamp-query'] : [])].filter((f) => adapter.features.has(f));
  const requiredLimits = { maxBufferSize: adapter.limits.maxBufferSize, maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize };
  return adapter.requestDevice({ requiredFeatures, requiredLimits });
}
