// Types for the Emscripten output web/src/wasm/sdpa_core.mjs (3.1.6 cannot emit
// them). CMake copies this file next to the generated module as
// sdpa_core.d.mts; scripts/build.sh copies it on into dist/wasm/.
// infra wrote the generic part (EmscriptenModule); whoever changes
// cpp/bindings/*.cpp keeps `SdpaModule` in step with the Embind surface.

export interface EmscriptenModule {
  /**
   * Heap views. They are replaced (the old ones become detached, length 0)
   * whenever the wasm memory grows, i.e. during any call that may allocate.
   * Always re-read `module.HEAPF32` / `module.HEAPU8` after such a call;
   * never keep a view across one.
   */
  readonly HEAPU8: Uint8Array;
  readonly HEAPF32: Float32Array;
  /**
   * Returns a byte address, or 0 on failure (-sABORTING_MALLOC=0).
   * Addresses >= 2 GiB come back negative: use `ptr >>> 0`.
   */
  _malloc(bytes: number): number;
  _free(ptr: number): void;
}

// Embind surface of cpp/bindings/sdpa_bindings.cpp.
export interface SdpaModule extends EmscriptenModule {
  version(): string;
}

export interface SdpaModuleOptions {
  locateFile?(path: string, prefix: string): string;
  wasmBinary?: ArrayBuffer | Uint8Array;
  print?(text: string): void;
  printErr?(text: string): void;
  [key: string]: unknown;
}

declare function createSdpaModule(options?: SdpaModuleOptions): Promise<SdpaModule>;
export default createSdpaModule;
