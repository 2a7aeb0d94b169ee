// A threaded call's query, key and value copied into the wasm heap while the helper threads
// already run the kernel on the rows in place (cpp/core/input_arrival.h holds the protocol):
// per key/value head group, the rows in chunks from the last to the first, each chunk published
// in the record's `arrived` word once its key, value and query rows are in place. The copy is
// the calling thread's alone (the arrays live outside wasm memory); streamed, it overlaps the
// kernel instead of preceding it.
import type { HeapScope } from './heap.js';
import type { SdpaModule } from './wasm/sdpa_core.mjs';

/** Inputs smaller than this are copied before the call: their pieces would cost more than they hide. */
export const STREAMED_INPUT_BYTES = 1 << 20;
/** About this many bytes per (group, chunk) piece, in at most MAX_CHUNKS chunks per group. */
const CHUNK_BYTES = 128 * 1024;
const MAX_CHUNKS = 16;

type Rows = { data: Float32Array; shape: readonly number[] };

export class InputStream {
  /** Heap addresses of the record and of the query, key and value (allocated, not yet written). */
  readonly record: number;
  readonly query: number;
  readonly key: number;
  readonly value: number;
  private readonly chunks: number;
  private readonly groups: number;

  constructor(heap: HeapScope, private readonly module: SdpaModule, private readonly q: Rows, private readonly k: Rows, private readonly v: Rows) {
    this.query = heap.alloc(q.data.byteLength, 'query');
    this.key = heap.alloc(k.data.byteLength, 'key');
    this.value = heap.alloc(v.data.byteLength, 'value');
    this.record = heap.alloc(8, 'the input arrival record');
    const [Lq, E] = lastTwo(q), [Lk] = lastTwo(k), [, Ev] = lastTwo(v);
    this.groups = k.data.length / (Lk * E);
    const group = q.data.length / (Lq * E) / this.groups;
    const groupBytes = 4 * (Lk * (E + Ev) + group * Lq * E);
    this.chunks = Math.max(1, Math.min(MAX_CHUNKS, Lq, Lk, Math.floor(groupBytes / CHUNK_BYTES)));
    const record = new Int32Array(module.HEAPU8.buffer, this.record, 2);
    record[0] = 0;
    record[1] = this.chunks;
  }

  /** Whether a call's inputs are worth streaming: non-empty float32 tensors of STREAMED_INPUT_BYTES in all. */
  static worthwhile(q: { data: ArrayBufferView }, k: { data: ArrayBufferView }, v: { data: ArrayBufferView }): boolean {
    const all = [q, k, v];
    return all.every((t) => t.data instanceof Float32Array && t.data.byteLength > 0) && all.reduce((n, t) => n + t.data.byteLength, 0) >= STREAMED_INPUT_BYTES;
  }

  /** Copies every piece in order, publishing each; on an error, publishes them all (the kernel then finishes) and rethrows. */
  copy(): void {
    const total = this.groups * this.chunks;
    try {
      const [Lq, E] = lastTwo(this.q), [Lk] = lastTwo(this.k), [, Ev] = lastTwo(this.v);
      const group = this.q.data.length / (Lq * E) / this.groups;
      for (let g = 0; g < this.groups; g++) {
        for (let c = this.chunks - 1; c >= 0; c--) {
          const [k0, k1] = [chunkStart(Lk, c, this.chunks), chunkStart(Lk, c + 1, this.chunks)];
          const [q0, q1] = [chunkStart(Lq, c, this.chunks), chunkStart(Lq, c + 1, this.chunks)];
          this.rows(this.k.data, this.key, (g * Lk + k0) * E, (g * Lk + k1) * E);
          this.rows(this.v.data, this.value, (g * Lk + k0) * Ev, (g * Lk + k1) * Ev);
          for (let h = g * group; h < (g + 1) * group; h++) this.rows(this.q.data, this.query, (h * Lq + q0) * E, (h * Lq + q1) * E);
          this.publish(g * this.chunks + this.chunks - c);
        }
      }
    } catch (error) {
      this.publish(total);
      throw error;
    }
  }

  private rows(source: Float32Array, address: number, begin: number, end: number): void {
    if (end > begin) new Float32Array(this.module.HEAPU8.buffer, address + 4 * begin, end - begin).set(source.subarray(begin, end));
  }

  private publish(arrived: number): void {
    Atomics.store(new Int32Array(this.module.HEAPU8.buffer, this.record, 1), 0, arrived);
  }
}

/** First row of chunk c of a length L in `chunks` chunks: ceil(L·c/chunks), as the kernel computes it. */
function chunkStart(L: number, c: number, chunks: number): number {
  return Math.ceil((L * c) / chunks);
}

function lastTwo(t: Rows): [number, number] {
  return [t.shape[t.shape.length - 2]!, t.shape[t.shape.length - 1]!];
}
