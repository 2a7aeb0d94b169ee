// Checks of the generated Emscripten module itself (not of the API):
// it loads under Vitest/Node ESM, heap views are reachable and are refreshed
// after memory growth, and it installs no process-wide handlers.
import { describe, expect, it } from 'vitest';
import createSdpaModule from '../../web/src/wasm/sdpa_core.mjs';

describe('sdpa_core.mjs (Emscripten output)', () => {
  it('instantiates in Node and exposes HEAPU8/HEAPF32, _malloc/_free', async () => {
    const handlersBefore = [
      process.listenerCount('uncaughtException'),
      process.listenerCount('unhandledRejection'),
    ];
    const m = await createSdpaModule();
    expect(m.HEAPU8).toBeInstanceOf(Uint8Array);
    expect(m.HEAPF32).toBeInstanceOf(Float32Array);
    expect(m.HEAPF32.buffer).toBe(m.HEAPU8.buffer);
    expect(typeof m._malloc).toBe('function');
    expect(typeof m._free).toBe('function');
    // -sNODEJS_CATCH_EXIT=0 -sNODEJS_CATCH_REJECTION=0
    expect([
      process.listenerCount('uncaughtException'),
      process.listenerCount('unhandledRejection'),
    ]).toEqual(handlersBefore);
  });

  it('re-reading module.HEAPF32 after growth gives a live view', async () => {
    const m = await createSdpaModule();
    const stale = m.HEAPF32;
    const bytesBefore = m.HEAPU8.byteLength;
    const n = 16 * 1024 * 1024; // 64 MiB of floats: forces growth of the 16 MiB initial heap
    const ptr = m._malloc(n * 4) >>> 0;
    expect(ptr).not.toBe(0);
    expect(m.HEAPU8.byteLength).toBeGreaterThan(bytesBefore);
    expect(stale.length).toBe(0); // old view detached
    const heap = m.HEAPF32; // fresh view
    heap[(ptr >>> 2) + n - 1] = 42.5;
    expect(m.HEAPF32[(ptr >>> 2) + n - 1]).toBe(42.5);
    m._free(ptr);
  });

  it('the float32-only bindings (trace, explain) refuse float16 inputs before reading an address; the float64 reference widens them', async () => {
    const m = await createSdpaModule();
    const { CallRecord } = await import('../../web/src/core-call.js');
    const record = CallRecord.of(m);
    const float16Keys = (query = 0, key = 0, value = 0) => {
      record.begin();
      record.tensor('query', query, [4, 8]);
      record.tensor('key', key, [70, 8], 'float16');
      record.tensor('value', value, [70, 8]);
    };
    float16Keys();
    expect(m.traceOnlineSoftmax({ row: 0 })).toEqual({ name: 'TypeError', message: expect.stringMatching(/^traceOnlineSoftmax takes float32 query, key and value/) });
    float16Keys();
    expect(m.explainAttention(undefined)).toEqual({ name: 'TypeError', message: expect.stringMatching(/^explain takes float32/) });
    // A float16 KV cache's keys: widened in the core's scratch (referenceAttention(query, cache)).
    const [query, key, value] = [4 * 8 * 4, 70 * 8 * 2, 70 * 8 * 4].map((bytes) => m._malloc(bytes));
    m.HEAPU8.fill(0, query, query + 4 * 8 * 4);
    m.HEAPU8.fill(0, key, key + 70 * 8 * 2);
    m.HEAPU8.fill(0, value, value + 70 * 8 * 4);
    float16Keys(query, key, value);
    expect(m.referenceAttention64(undefined)).toBeNull();
    for (const p of [query, key, value]) m._free(p);
  });

  it('reports allocation failure with 0 instead of aborting (-sABORTING_MALLOC=0)', async () => {
    const m = await createSdpaModule();
    expect(m._malloc(4 * 1024 * 1024 * 1024 - 1)).toBe(0);
    // the module is still usable afterwards
    const p = m._malloc(16);
    expect(p).not.toBe(0);
    m._free(p);
  });
});
