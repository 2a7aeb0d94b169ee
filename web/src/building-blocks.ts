// The building blocks the page and the modules compose: a row softmax and a matrix product,
// computed by the core's plain loops in float32.
import { checkNumber, checkOptionNames, checkTensor, describe, product, SOFTMAX_OPTION_NAMES, throwIfError } from './arguments.js';
import { HeapScope, withHeap } from './heap.js';
import type { SoftmaxOptions, Tensor } from './types.js';
import type { SdpaModule } from './wasm/sdpa_core.mjs';

/** Softmax over the last axis of `x` at `temperature`, subtracting each row's max. */
export function softmax(module: SdpaModule, x: Tensor, options: SoftmaxOptions = {}): Tensor {
  checkTensor('x', x);
  if (typeof options !== 'object' || options === null) throw new TypeError(`options must be an object { temperature }; got ${describe(options)}`);
  checkOptionNames('softmax', options, SOFTMAX_OPTION_NAMES);
  const temperature = checkNumber('temperature', options.temperature ?? 1);
  throwIfError(module.softmax(x.shape, temperature, undefined));
  return withHeap(module, (heap) => {
    const pointers = { x: heap.copyIn(x.data, 'x'), output: heap.alloc(x.data.byteLength, 'output') };
    throwIfError(module.softmax(x.shape, temperature, pointers));
    return { data: heap.readFloat32(pointers.output, x.data.length), shape: [...x.shape] };
  });
}

/** `a · b`: a `[..., M, K]` with b `[K, N]` or b `[..., K, N]` with a's leading dims. */
export function matmul(module: SdpaModule, a: Tensor, b: Tensor): Tensor {
  checkTensor('a', a);
  checkTensor('b', b);
  const plan = module.matmul(a.shape, b.shape, undefined);
  throwIfError(plan.error);
  const n = product(plan.outputShape);
  HeapScope.checkTotal(a.data.byteLength + b.data.byteLength + 4 * n, 'matmul');
  return withHeap(module, (heap) => {
    const pointers = { a: heap.copyIn(a.data, 'a'), b: heap.copyIn(b.data, 'b'), output: heap.alloc(4 * n, 'output') };
    module.matmul(a.shape, b.shape, pointers);
    return { data: heap.readFloat32(pointers.output, n), shape: plan.outputShape };
  });
}
