// Per-call wasm heap allocations: every buffer a call needs is allocated through one HeapScope
// and freed in `release()`, so an error anywhere cannot leak. Heap views are re-read on every
// access because any allocation may grow (and thereby replace) the wasm memory.
import type { SdpaModule } from './wasm/sdpa_core.mjs';

/** wasm32 addresses are 32-bit: no request, in total, can reach this many bytes. */
const ADDRESS_SPACE_BYTES = 2 ** 32;

export class HeapScope {
  private readonly addresses: number[] = [];

  constructor(private readonly module: SdpaModule) {}

  /**
   * Checks a whole call's byte count before anything is allocated, so an oversize request is a
   * RangeError, not a failed half-allocation.
   */
  static checkTotal(bytes: number, what: string): void {
    if (!(bytes < ADDRESS_SPACE_BYTES)) {
      throw new RangeError(
        `${what} needs ${formatBytes(bytes)} of WebAssembly memory, more than the 4 GiB a wasm32 module can address`,
      );
    }
  }

  /** Allocates `bytes` (16-byte aligned); a RangeError when the wasm heap cannot grow enough. */
  alloc(bytes: number, what: string): number {
    HeapScope.checkTotal(bytes, what);
    const address = this.module._malloc(Math.max(16, Math.ceil(bytes / 16) * 16)) >>> 0;
    if (address === 0) {
      throw new RangeError(`out of WebAssembly memory: ${what} needs ${formatBytes(bytes)} more`);
    }
    this.addresses.push(address);
    return address;
  }

  /** Allocates a buffer holding a copy of `data`. */
  copyIn(data: ArrayBufferView, what: string): number {
    const address = this.alloc(data.byteLength, what);
    // A float32 array straight into the float32 view (no byte view to make).
    if (data instanceof Float32Array) this.module.HEAPF32.set(data, address >>> 2);
    else this.module.HEAPU8.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), address);
    return address;
  }

  // new + set rather than slice(): V8's slice copies element by element, 4x slower here (8x on
  // the threads build's shared memory: ~88 µs against ~11 µs for a 512×64 output).
  /** Copies `length` floats at `address` into `into` (already checked to hold exactly that many), or a new array. */
  readFloat32(address: number, length: number, into?: Float32Array): Float32Array {
    const copy = into ?? new Float32Array(length);
    copy.set(new Float32Array(this.module.HEAPU8.buffer, address, length));
    return copy;
  }



  release(): void {
    for (const address of this.addresses) this.module._free(address);
    this.addresses.length = 0;
  }
}

/** Runs `body` with a fresh HeapScope and frees everything it allocated, whatever happens. */
export function withHeap<T>(module: SdpaModule, body: (heap: HeapScope) => T): T {
  const heap = new HeapScope(module);
  try {
    return body(heap);
  } finally {
    heap.release();
  }
}

/**
 * A new Float32Array with each of its 4 KiB pages written once (with the zero it holds). A fresh
 * large array's memory is mapped on first write, one page fault per page (about 1 ms per 2 MiB):
 * made while helper threads run a kernel, those faults overlap it.
 */
export function pagedInFloat32Array(length: number): Float32Array {
  const array = new Float32Array(length);
  for (let i = 0; i < length; i += 1024) array[i] = 0;
  return array;
}

/** Bytes of the tensors' data (absent ones count 0), e.g. a call's inputs for {@link HeapScope.checkTotal}. */
export function tensorBytes(tensors: readonly ({ data: ArrayBufferView } | null | undefined)[]): number {
  return tensors.reduce((n, t) => n + (t ? t.data.byteLength : 0), 0);
}

export function formatBytes(bytes: number): string {
  return bytes >= 2 ** 20 ? `${(bytes / 2 ** 20).toFixed(1)} MiB` : `${bytes} bytes`;
}
