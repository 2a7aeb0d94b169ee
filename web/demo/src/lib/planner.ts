// The device-limits planner's arithmetic: how the WebGPU backend fits one self-attention call
// (B × H heads, length L, head dim E = Ev, no mask) into a device's limits, following the package's
// planner (cpp/webgpu/plan.h: plan_webgpu_chunks, webgpu_flash_variant, split_grid). The page then
// asks the library itself (a WebGPU instance with these limits as gpuLimits) which kernel it compiles
// and whether the boundary call runs. DOM-free, for the tests.

export interface DeviceLimits {
  maxStorageBufferBindingSize: number;
  maxBufferSize: number;
  maxComputeWorkgroupStorageSize: number;
  maxComputeInvocationsPerWorkgroup: number;
  maxComputeWorkgroupsPerDimension: number;
}

/** WebGPU's default limits: every adapter offers at least these. */
export const WEBGPU_DEFAULT_LIMITS: DeviceLimits = {
  maxStorageBufferBindingSize: 128 * 2 ** 20,
  maxBufferSize: 256 * 2 ** 20,
  maxComputeWorkgroupStorageSize: 16384,
  maxComputeInvocationsPerWorkgroup: 256,
  maxComputeWorkgroupsPerDimension: 65535,
};

/** The package's tile constants (cpp/webgpu/plan.h). */
const FLASH_ROWS = 64;
const MAX_BLOCK_KEYS = 64;
const TILED_MIN_BLOCK_KEYS = 16;
const TILED_MAX_HEAD_DIM = 128;
const TILED_LANES = 4;
const TILED_MIN_ROWS = 16;
const TARGET_WORKGROUPS = 512;

export const padHeadDim = (d: number): number => [16, 32, 64, 128, 256].find((p) => d <= p) ?? Math.ceil(d / 64) * 64;

const tiledWorkgroupBytes = (ePad: number, blockKeys: number, rows: number) => 16 * blockKeys * (ePad / 4 + 1) + 4 * rows * (blockKeys + TILED_LANES) + 4 * rows * TILED_LANES + 4;

/** The tiled kernel's rows per workgroup (webgpu_flash_rows): 64, halved down to 16 while the grid holds fewer than 512 workgroups. */
export function tiledRows(heads: number, length: number): number {
  let rows = FLASH_ROWS;
  while (rows > TILED_MIN_ROWS && heads * Math.ceil(length / rows) < TARGET_WORKGROUPS) rows /= 2;
  return rows;
}

export interface Plan {
  /** Bytes of Q (and of K, V and O: E = Ev, Lq = Lk). */
  tensorBytes: number;
  /** The weights matrix A [B, H, L, L] a naive implementation materializes, and the flash path's row statistics. */
  weightsBytes: number;
  statsBytes: number;
  /** min(maxStorageBufferBindingSize, maxBufferSize): what one buffer may hold. */
  cap: number;
  /** The longest L whose one head's K/V fits one buffer (the unit the planner cannot cut). */
  maxLength: number;
  /** The longest L whose one head's weights matrix would fit one buffer. */
  maxLengthWeights: number;
  /** Why the call cannot run (the planner's RangeError), or the split. */
  error?: string;
  headsPerChunk: number;
  chunks: number;
  /** Dispatches of the flash kernel (the grid L/rows × heads, cut to maxComputeWorkgroupsPerDimension). */
  dispatches: number;
  kernel: { tiled: boolean; ePad: number; blockKeys: number; rows: number; workgroupBytes: number };
  /** The key the library gives the flash pipeline (webgpuInfo().pipelines). */
  pipelineKey: string;
}

export function planCall(limits: DeviceLimits, call: { batch: number; heads: number; length: number; headDim: number }): Plan {
  const { batch: B, heads: H, length: L, headDim: E } = call;
  const cap = Math.min(limits.maxStorageBufferBindingSize, limits.maxBufferSize);
  const perHead = 4 * L * E;
  const ePad = padHeadDim(E);
  let kernel = { tiled: false, ePad, blockKeys: 0, rows: FLASH_ROWS, workgroupBytes: 0 };
  let error: string | undefined;
  const rows = tiledRows(B * H, L);
  if (ePad <= TILED_MAX_HEAD_DIM && limits.maxComputeInvocationsPerWorkgroup >= rows * TILED_LANES) {
    for (let keys = MAX_BLOCK_KEYS; keys >= TILED_MIN_BLOCK_KEYS; keys /= 2) {
      if (tiledWorkgroupBytes(ePad, keys, rows) <= limits.maxComputeWorkgroupStorageSize) {
        if (L >= keys) kernel = { tiled: true, ePad, blockKeys: keys, rows, workgroupBytes: tiledWorkgroupBytes(ePad, keys, rows) };
        break;
      }
    }
  }
  if (!kernel.tiled) {
    const fit = Math.floor(limits.maxComputeWorkgroupStorageSize / (8 * ePad));
    if (fit < 1) error = `E = ${E} needs ${8 * ePad} bytes of workgroup memory per key, more than maxComputeWorkgroupStorageSize (${limits.maxComputeWorkgroupStorageSize})`;
    const blockKeys = Math.min(fit, MAX_BLOCK_KEYS);
    kernel = { tiled: false, ePad, blockKeys, rows: FLASH_ROWS, workgroupBytes: 8 * ePad * blockKeys };
  }
  if (perHead > cap) error ??= `one head's key/value (Lk = ${L}, E = ${E}) needs ${perHead} bytes in one buffer, more than ${cap}`;
  const heads = B * H;
  const headsPerChunk = error ? 0 : Math.min(heads, Math.floor(cap / perHead));
  const chunks = error ? 0 : Math.ceil(heads / headsPerChunk);
  const perDim = limits.maxComputeWorkgroupsPerDimension;
  const gridParts = (y: number) => Math.ceil(Math.ceil(L / kernel.rows) / perDim) * Math.ceil(y / perDim);
  const dispatches = error ? 0 : (chunks - 1) * gridParts(headsPerChunk) + gridParts(heads - (chunks - 1) * headsPerChunk);
  return {
    tensorBytes: 4 * B * H * L * E,
    weightsBytes: 4 * B * H * L * L,
    statsBytes: 8 * B * H * L,
    cap,
    maxLength: Math.floor(cap / (4 * E)),
    maxLengthWeights: Math.floor(Math.sqrt(cap / 4)),
    error,
    headsPerChunk,
    chunks,
    dispatches,
    kernel,
    // Float32 rows of a multiple of 4 elements are read as vec4s (webgpu_vector_reads).
    pipelineKey: `${kernel.tiled ? 'flash-tiled' : 'flash'}:e${ePad}:ev${ePad}:bk${kernel.blockKeys}:rows${kernel.rows}:mask=none:causal=0:stats=0:ranges=0:alibi=0:sinks=0:docs=0${E % 4 === 0 ? ':vec4=qkv' : ''}`,
  };
}
