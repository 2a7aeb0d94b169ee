// Types for web/src/wasm/sdpa_core_relaxed.mjs: the same bindings as sdpa_core.mjs, built with
// relaxed SIMD (fused multiply-add).
export * from './sdpa_core.mjs';
export { default } from './sdpa_core.mjs';
