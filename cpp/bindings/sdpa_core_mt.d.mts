// Types for web/src/wasm/sdpa_core_mt.mjs, the pthreads build of the same bindings as
// sdpa_core.mjs (one more factory option: sdpaWorkers, the number of preloaded workers).
export * from './sdpa_core.mjs';
import type { SdpaModule, SdpaModuleOptions } from './sdpa_core.mjs';

declare function createSdpaModule(options?: SdpaModuleOptions & { sdpaWorkers?: number }): Promise<SdpaModule>;
export default createSdpaModule;
