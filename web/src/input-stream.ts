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
  private readonly Lq: number;
  private readonly Lk: number;
  private readonly E: number;
  private readonly Ev: number;
  /** Key/value head groups (B·Hkv), query heads per group, chunks per group. */
  private readonly groups: number;
  private readonly group: number;
  private readonly chunks: number;
  /** Whole groups copied together when one is smaller than a piece (then chunks is 1). */
  private readonly groupsPerPiece: number;

  constructor(heap: HeapScope, private readonly module: SdpaModule, private readonly q: Rows, private readonly k: Rows, private readonly v: Rows) {
    this.query = heap.alloc(q.data.byteLength, 'query');
    this.key = heap.alloc(k.data.byteLength, 'key');
    this.value = heap.alloc(v.data.byteLength, 'value');
    this.record = heap.alloc(8, 'the input arrival record');
    [this.Lq, this.E] = lastTwo(q);
    [this.Lk, this.Ev] = lastTwo(v);
    this.groups = k.data.length / (this.Lk * this.E);
    this.group = q.data.length / (this.Lq * this.E) / this.groups;
    const groupBytes = 4 * (this.Lk * (this.E + this.Ev) + this.group * this.Lq * this.E);
    this.chunks = Math.max(1, Math.min(MAX_CHUNKS, this.Lq, this.Lk, Math.floor(groupBytes / CHUNK_BYTES)));
    this.groupsPerPiece = this.chunks > 1 ? 1 : Math.max(1, Math.floor(CHUNK_BYTES / groupBytes));
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
    const { Lq, Lk, E, Ev, group, chunks } = this;
    try {
      for (let g0 = 0; g0 < this.groups; g0 += this.groupsPerPiece) {
        const g1 = Math.min(this.groups, g0 + this.groupsPerPiece);
        for (let c = chunks - 1; c >= 0; c--) {
          const [k0, k1] = [chunkStart(Lk, c, chunks), chunkStart(Lk, c + 1, chunks)];
          const [q0, q1] = [chunkStart(Lq, c, chunks), chunkStart(Lq, c + 1, chunks)];
          this.headRows(this.k.data, this.key, g0, g1, Lk, E, k0, k1);
          this.headRows(this.v.data, this.value, g0, g1, Lk, Ev, k0, k1);
          this.headRows(this.q.data, this.query, g0 * group, g1 * group, Lq, E, q0, q1);
          this.publish((g1 - 1) * chunks + chunks - c);
        }
      }
    } catch (error) {
      this.publish(this.groups * chunks);
      throw error;
    }
  }

  /** Rows [r0, r1) of heads [h0, h1) of a [heads, L, width] tensor: one copy when they are whole heads. */
  private headRows(source: Float32Array, address: number, h0: number, h1: number, L: number, width: number, r0: number, r1: number): void {
    if (r0 === 0 && r1 === L) {
      this.span(source, address, h0 * L * width, h1 * L * width);
      return;
    }
    for (let h = h0; h < h1; h++) this.span(source, address, (h * L + r0) * width, (h * L + r1) * width);
  }

  /** Elements [begin, end) of `source` into the heap array at `address`. */
  private span(source: Float32Array, address: number, begin: number, end: number): void {
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
