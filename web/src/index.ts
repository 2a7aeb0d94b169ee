/**
 * sdpa-web: scaled dot-product attention, `softmax(QKᵀ·scale + M)·V`, computed by a C++ core
 * compiled to WebAssembly (SIMD128, and relaxed SIMD where available), or on WebGPU. This file is
 * the package's public API: it only re-exports.
 *
 * @example
 * ```ts
 * import { createAttention } from 'sdpa-web';
 * const attn = await createAttention();
 * const { output } = await attn.scaledDotProductAttention(q, k, v, { isCausal: true });
 * attn.dispose();
 * ```
 * @packageDocumentation
 */
export type * from './types.js';
export type * from './extras/types.js';
export { Attention, createAttention } from './attention.js';
export { KvCache } from './kv-cache.js';
export { WebGPUError } from './webgpu.js';
export { createSelfAttention, createMultiheadAttention, SelfAttention, MultiheadAttention } from './extras/modules.js';
export { float16Excess, halfFloat16Ulp, maxAbsDiff, toleranceBound } from './extras/accuracy.js';
export { fromFloat16, toFloat16 } from './float16.js';
