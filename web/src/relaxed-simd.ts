// Relaxed SIMD: the WebAssembly feature whose f32x4.relaxed_madd gives the 'simd' kernels a
// fused multiply-add (one instruction where SIMD128 needs a multiply and an add). Every module
// comes in two builds, SIMD128 and relaxed SIMD; this file says which one can run here.
import { describe } from './arguments.js';

/** A module whose one function computes f32x4.relaxed_madd(0, 0, 0): valid only where relaxed SIMD is. */
const PROBE = (() => {
  const zero = [0xfd, 0x0c, ...new Array<number>(16).fill(0)]; // v128.const 0
  const body = [0x00, ...zero, ...zero, ...zero, 0xfd, 0x85, 0x02, 0x0b]; // no locals; madd; end
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // type: () -> v128
    0x03, 0x02, 0x01, 0x00, // one function of type 0
    0x0a, body.length + 2, 0x01, body.length, ...body,
  ]);
})();

let supported: boolean | undefined;

/** Why relaxed SIMD cannot run in this engine, or undefined when it can. */
export function relaxedSimdUnavailableReason(): string | undefined {
  supported ??= WebAssembly.validate(PROBE);
  return supported
    ? undefined
    : 'this WebAssembly engine has no relaxed SIMD (Chrome/Edge ≥ 114, Node ≥ 22, or Node 20 with --experimental-wasm-relaxed-simd have it)';
}

/** Validates the `relaxedSimd` option: undefined (use it where available) or a boolean. */
export function checkRelaxedSimdOption(relaxedSimd: unknown): boolean | undefined {
  if (relaxedSimd === undefined || typeof relaxedSimd === 'boolean') return relaxedSimd;
  throw new TypeError(`relaxedSimd must be a boolean; got ${describe(relaxedSimd)}`);
}

/**
 * `load(relaxed)` at most once per build (SIMD128, relaxed SIMD) in this JS realm, its promise
 * shared by every caller; a failed load is forgotten, so the next call tries again.
 */
export function oncePerBuild<T>(load: (relaxed: boolean) => Promise<T>): (relaxed: boolean) => Promise<T> {
  const loaded: [Promise<T> | undefined, Promise<T> | undefined] = [undefined, undefined];
  return (relaxed) => {
    const slot = relaxed ? 1 : 0;
    loaded[slot] ??= load(relaxed).catch((cause: unknown) => {
      loaded[slot] = undefined;
      throw cause;
    });
    return loaded[slot];
  };
}
