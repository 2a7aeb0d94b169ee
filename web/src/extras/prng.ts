// The PRNG-based building blocks (Xavier/Glorot initialisation, inverted dropout), drawn from the
// core's seeded mulberry32 stream so that a seed gives the same numbers on every platform.
import type { SdpaModule } from '../wasm/sdpa_core.mjs';
import { checkNumber, checkOptionNames, checkShape, checkTensor, describe, DROPOUT_OPTION_NAMES, throwIfError, UNIFORM_OPTION_NAMES } from '../arguments.js';
import { withHeap } from '../heap.js';
import type { DropoutOptions, UniformOptions } from './types.js';
import type { Tensor } from '../types.js';

export function xavierUniform(module: SdpaModule, shape: readonly [number, number], seed: number, offset = 0): Tensor {
  if (!Array.isArray(shape) || shape.length !== 2) throw new TypeError(`shape must be [rows, cols]; got ${describe(shape)}`);
  const [rows, cols] = [checkNumber('shape[0]', shape[0]), checkNumber('shape[1]', shape[1])];
  checkNumber('seed', seed);
  checkOffset(offset);
  throwIfError(module.xavierUniform(rows, cols, seed, offset, undefined));
  return withHeap(module, (heap) => {
    const output = heap.alloc(4 * rows * cols, 'output');
    throwIfError(module.xavierUniform(rows, cols, seed, offset, { output }));
    return { data: heap.readFloat32(output, rows * cols), shape: [rows, cols] };
  });
}

function checkOffset(offset: unknown): number {
  checkNumber('offset', offset);
  if (!(Number.isSafeInteger(offset) && (offset as number) >= 0)) throw new RangeError(`offset must be a non-negative integer; got ${String(offset)}`);
  return offset as number;
}

export function randomUniform(module: SdpaModule, shape: readonly number[], seed: number, options: UniformOptions = {}): Tensor {
  const n = checkShape('randomUniform', shape);
  if (typeof options !== 'object' || options === null) throw new TypeError(`options must be an object { low, high, offset }; got ${describe(options)}`);
  checkOptionNames('randomUniform', options, UNIFORM_OPTION_NAMES);
  const low = checkNumber('low', options.low ?? -1);
  const high = checkNumber('high', options.high ?? 1);
  const offset = checkOffset(options.offset ?? 0);
  checkNumber('seed', seed);
  throwIfError(module.randomUniform(n, low, high, seed, offset, undefined));
  return withHeap(module, (heap) => {
    const output = heap.alloc(4 * n, 'output');
    throwIfError(module.randomUniform(n, low, high, seed, offset, { output }));
    return { data: heap.readFloat32(output, n), shape: [...shape] };
  });
}

/** The dropout options `options` as { p, seed }; `where` names them in errors (`'dropout'`, `'SelfAttention.forward options.dropout'`). */
export function checkDropout(options: unknown, where: string): DropoutOptions {
  if (typeof options !== 'object' || options === null) throw new TypeError(`dropout must be an object { p, seed }; got ${describe(options)}`);
  checkOptionNames(where, options, DROPOUT_OPTION_NAMES);
  const { p, seed } = options as DropoutOptions;
  return { p: checkNumber('dropout.p', p), seed: checkNumber('dropout.seed', seed) };
}

/** Inverted dropout of every element of x (row-major index = draw index). */
export function dropout(module: SdpaModule, x: Tensor, options: DropoutOptions): Tensor {
  checkTensor('x', x);
  const { p, seed } = checkDropout(options, 'dropout');
  throwIfError(module.dropout(x.data.length, p, seed, undefined));
  return withHeap(module, (heap) => {
    const pointers = { x: heap.copyIn(x.data, 'x'), output: heap.alloc(x.data.byteLength, 'output') };
    throwIfError(module.dropout(x.data.length, p, seed, pointers));
    return { data: heap.readFloat32(pointers.output, x.data.length), shape: [...x.shape] };
  });
}
