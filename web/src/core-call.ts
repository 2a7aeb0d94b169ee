// The one crossing of an attention call: the call record (cpp/bindings/call_record.h), a block of
// float64 slots in the wasm heap through which the tensors' addresses and shapes go in and the
// results' addresses and shapes come back, and the core's errors thrown as TypeError/RangeError.
// Every call path (CPU, WebGPU, reference, backward) writes its tensors here, passes the caller's
// options object through untouched (the core reads and checks it), and reads its results here.
import type { CallRecordLayout, CallResultName, CoreError, SdpaModule } from './wasm/sdpa_core.mjs';
import { throwIfError } from './arguments.js';
import type { HeapScope } from './heap.js';

export type RecordTensorName = keyof CallRecordLayout['tensors'];
/** int8/int4: a quantized KV cache's keys or values, the whole tensor (call_record.h). */
type ElementName = 'float32' | 'float16' | 'uint8' | 'int32' | 'int8' | 'int4';
const SLOT_TYPE: Record<ElementName, number> = { float32: 1, float16: 2, uint8: 3, int32: 4, int8: 5, int4: 6 };

/** The element type of a tensor's data as its record slot names it. */
function elementName(data: ArrayBufferView, float16: boolean): ElementName {
  if (float16) return 'float16';
  if (data instanceof Uint8Array) return 'uint8';
  if (data instanceof Int32Array) return 'int32';
  return 'float32';
}

/** A module's call record, read and written through a Float64Array view re-made after memory growth. */
export class CallRecord {
  private readonly layout: CallRecordLayout;
  private view: Float64Array | undefined;

  private constructor(private readonly module: SdpaModule) {
    this.layout = module.callRecordLayout();
  }

  private static readonly records = new WeakMap<SdpaModule, CallRecord>();
  /** The record of `module` (one per module: calls are made from the main thread, one at a time). */
  static of(module: SdpaModule): CallRecord {
    let record = CallRecord.records.get(module);
    if (!record) CallRecord.records.set(module, (record = new CallRecord(module)));
    return record;
  }

  /** The slots (a view re-made after memory growth). */
  slots(): Float64Array {
    // Memory growth detaches the old view (length 0); a shared memory's old view stays valid.
    if (!this.view || this.view.length === 0) this.view = new Float64Array(this.module.HEAPU8.buffer, this.layout.address, this.layout.size);
    return this.view;
  }

  /** Starts a call: every tensor absent, dense key/value, no streamed inputs, `threads` asked for. */
  begin(threads = 1): this {
    const slots = this.slots();
    slots.fill(0);
    slots[this.layout.threads] = threads;
    return this;
  }

  /** Describes a tensor whose data is at `address` (0 when it lives elsewhere) in the record. */
  tensor(name: RecordTensorName, address: number, shape: readonly number[], type: ElementName = 'float32'): void {
    const slots = this.slots();
    const at = this.layout.tensors[name];
    slots[at] = address;
    slots[at + 1] = SLOT_TYPE[type];
    slots[at + 2] = shape.length;
    const rank = Math.min(shape.length, this.layout.maxRank);
    for (let i = 0; i < rank; i++) slots[at + 3 + i] = shape[i]!;
  }

  /** Copies a checked tensor's data into the heap and describes it (float16: its bit patterns). */
  copyIn(heap: HeapScope, name: RecordTensorName, tensor: { data: ArrayBufferView; shape: readonly number[] } | null | undefined, float16 = false): void {
    if (!tensor) return;
    this.tensor(name, heap.copyIn(tensor.data, name), tensor.shape, elementName(tensor.data, float16));
  }

  /** A KV cache read in place: keys and values at these addresses with these head strides. */
  cache(strides: { key: number; value: number }, finite: boolean): void {
    const slots = this.slots();
    slots[this.layout.keyHeadStride] = strides.key;
    slots[this.layout.valueHeadStride] = strides.value;
    slots[this.layout.keyValueFinite] = finite ? 1 : 0;
  }

  /** The inputs arrive while the kernel runs: the InputArrivalRecord at `address` counts them in. */
  streamed(address: number): void {
    this.slots()[this.layout.inputArrival] = address;
  }

  /**
   * What the call just made returned: read from the record itself until the next call, or (with
   * `keep`, for a call whose results are read after an await) from a copy.
   */
  results(keep = false): CallResults {
    return new CallResults(this.module, this.layout, keep ? this.slots().slice() : this);
  }
}

/** The results of one call: in a heap block the core allocated, copied out, then freed. */
export class CallResults {
  private readonly block: number;
  private freed = false;

  /** `source`: the record (read live), or a copy of its slots as the call left them. */
  constructor(
    private readonly module: SdpaModule,
    private readonly layout: CallRecordLayout,
    private readonly source: CallRecord | Float64Array,
  ) {
    this.block = this.slot(layout.block);
  }

  private slot(index: number): number {
    return (this.source instanceof Float64Array ? this.source : this.source.slots())[index]!;
  }

  private shape(rank: number, dims: number): number[] {
    const shape = new Array<number>(this.slot(rank));
    for (let i = 0; i < shape.length; i++) shape[i] = this.slot(dims + i);
    return shape;
  }

  get outputShape(): number[] {
    return this.shape(this.layout.outputRank, this.layout.outputDims);
  }

  /** The weights' and the scores' shape [..., Lq, Lk]. */
  get weightsShape(): number[] {
    return this.shape(this.layout.weightsRank, this.layout.weightsDims);
  }

  /** Whether the output is to be rounded to float16 (outputDtype, or a float16 query). */
  get outputFloat16(): boolean {
    return this.slot(this.layout.outputFloat16) === 1;
  }

  /** A trace's steps (CPU) or floats (WebGPU) written. */
  get steps(): number {
    return this.slot(this.layout.steps);
  }

  /** The traced kernel's keys per tile and query rows per block. */
  get traceTiles(): { tileKeys: number; blockRows: number } {
    return { tileKeys: this.slot(this.layout.traceTileKeys), blockRows: this.slot(this.layout.traceBlockRows) };
  }

  private address(name: CallResultName): number {
    return this.slot(this.layout.results[name]);
  }

  /** Whether the call returned this result. */
  has(name: CallResultName): boolean {
    return this.address(name) !== 0;
  }

  /** A copy of `length` floats of result `name` (into `into` when given). */
  float32(name: CallResultName, length: number, into?: Float32Array): Float32Array {
    // new + set rather than slice(): V8's slice copies element by element (4x slower here).
    const copy = into ?? new Float32Array(length);
    copy.set(this.view32(name, length));
    return copy;
  }

  /** A view of result `name`, valid until the next allocation in the heap. */
  view32(name: CallResultName, length: number): Float32Array {
    return new Float32Array(this.module.HEAPU8.buffer, this.address(name), length);
  }

  float64(name: CallResultName, length: number): Float64Array {
    const copy = new Float64Array(length);
    copy.set(new Float64Array(this.module.HEAPU8.buffer, this.address(name), length));
    return copy;
  }

  bytes(name: CallResultName, length: number): Uint8Array {
    return this.module.HEAPU8.slice(this.address(name), this.address(name) + length);
  }

  /** Frees the block (idempotent). */
  free(): void {
    if (this.block && !this.freed) this.module._free(this.block);
    this.freed = true;
  }
}

/**
 * Runs `call` (one crossing into the core) and `read` on its results, freeing them whatever
 * happens; a core error is thrown for the public call `where`.
 */
export function readResults<T>(record: CallRecord, where: string, call: () => CoreError | null, read: (results: CallResults) => T): T {
  const error = call();
  const results = record.results();
  try {
    throwIfError(error, where);
    return read(results);
  } finally {
    results.free();
  }
}
