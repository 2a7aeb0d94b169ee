// Attention scores by the four score functions (dot, scaled dot, multiplicative, additive), their
// softmax and gradients, computed by the core's float32 scalar loops for side-by-side comparison.
import type { ScoreRequest, SdpaModule } from '../wasm/sdpa_core.mjs';
import { checkNumber, checkOptionNames, checkTensor, describe, product, SCORE_OPTION_NAMES, throwIfError } from '../arguments.js';
import { HeapScope, tensorBytes, withHeap } from '../heap.js';
import type { ScoreGradients, ScoreOptions, ScoreResult } from './types.js';
import type { Tensor } from '../types.js';

const SCORE_KINDS = ['dot', 'scaled-dot', 'multiplicative', 'additive'] as const;
const SCORE_PARAMS = ['w', 'w1', 'w2', 'v'] as const;

function scoreRequest(where: string, query: Tensor, key: Tensor, options: ScoreOptions): ScoreRequest {
  checkTensor('query', query);
  checkTensor('key', key);
  if (typeof options !== 'object' || options === null) throw new TypeError(`options must be an object { kind, ... }; got ${describe(options)}`);
  checkOptionNames(where, options, SCORE_OPTION_NAMES);
  if (!SCORE_KINDS.includes(options.kind)) {
    throw new TypeError(`kind must be ${SCORE_KINDS.map((k) => `'${k}'`).join(', ')}; got ${describe(options.kind)}`);
  }
  for (const name of SCORE_PARAMS) if (options[name] !== undefined) checkTensor(name, options[name]);
  if (options.scale !== undefined && options.scale !== null) checkNumber('scale', options.scale);
  return {
    kind: options.kind,
    queryShape: query.shape,
    keyShape: key.shape,
    wShape: options.w?.shape ?? [],
    w1Shape: options.w1?.shape ?? [],
    w2Shape: options.w2?.shape ?? [],
    vShape: options.v?.shape ?? [],
    scale: options.scale ?? undefined,
  };
}

function copyScoreInputs(heap: HeapScope, query: Tensor, key: Tensor, options: ScoreOptions): Record<string, number> {
  const pointers: Record<string, number> = { query: heap.copyIn(query.data, 'query'), key: heap.copyIn(key.data, 'key') };
  for (const name of SCORE_PARAMS) {
    const t = options[name];
    if (t) pointers[name] = heap.copyIn(t.data, name);
  }
  return pointers;
}

/** Scores and their softmax, computed by the float32 scalar reference. */
export function attentionScores(module: SdpaModule, query: Tensor, key: Tensor, options: ScoreOptions): ScoreResult {
  const request = scoreRequest('attentionScores', query, key, options);
  const plan = module.planScores(request);
  throwIfError(plan.error);
  const n = product(plan.scoresShape);
  const params = SCORE_PARAMS.map((name) => options[name]);
  HeapScope.checkTotal(tensorBytes([query, key, ...params]) + 8 * n + plan.workspaceBytes, 'attentionScores');
  return withHeap(module, (heap) => {
    const pointers = copyScoreInputs(heap, query, key, options);
    pointers.scores = heap.alloc(4 * n, 'scores');
    pointers.workspace = heap.alloc(plan.workspaceBytes, 'the score workspace');
    throwIfError(module.runScores(request, pointers));
    const weights = heap.alloc(4 * n, 'weights');
    throwIfError(module.softmax(plan.scoresShape, 1, { x: pointers.scores, output: weights }));
    return {
      scores: { data: heap.readFloat32(pointers.scores, n), shape: plan.scoresShape },
      weights: { data: heap.readFloat32(weights, n), shape: plan.scoresShape },
    };
  });
}

/** Gradients of the scores given dScores `[..., Lq, Lk]`. */
export function attentionScoresBackward(module: SdpaModule, query: Tensor, key: Tensor, dScores: Tensor, options: ScoreOptions): ScoreGradients {
  const request = scoreRequest('attentionScoresBackward', query, key, options);
  const plan = module.planScores(request);
  throwIfError(plan.error);
  checkTensor('dScores', dScores);
  if (dScores.shape.length !== plan.scoresShape.length || dScores.shape.some((d, i) => d !== plan.scoresShape[i])) {
    throw new RangeError(`dScores must have the scores' shape [${plan.scoresShape.join(', ')}] ([..., Lq, Lk]); got [${dScores.shape.join(', ')}]`);
  }
  const params = SCORE_PARAMS.map((name) => options[name]);
  HeapScope.checkTotal(2 * tensorBytes([query, key, ...params]) + dScores.data.byteLength + plan.workspaceBytes, 'attentionScoresBackward');
  return withHeap(module, (heap) => {
    const pointers = copyScoreInputs(heap, query, key, options);
    pointers.dScores = heap.copyIn(dScores.data, 'dScores');
    pointers.dQuery = heap.alloc(query.data.byteLength, 'dQuery');
    pointers.dKey = heap.alloc(key.data.byteLength, 'dKey');
    const params = { w: 'dW', w1: 'dW1', w2: 'dW2', v: 'dV' } as const;
    const kinds = options.kind === 'multiplicative' ? (['w'] as const) : options.kind === 'additive' ? (['w1', 'w2', 'v'] as const) : ([] as const);
    for (const name of kinds) pointers[params[name]] = heap.alloc(options[name]!.data.byteLength, params[name]);
    pointers.workspace = heap.alloc(plan.workspaceBytes, 'the score workspace');
    throwIfError(module.runScoresBackward(request, pointers));
    const result: ScoreGradients = {
      dQuery: { data: heap.readFloat32(pointers.dQuery, query.data.length), shape: [...query.shape] },
      dKey: { data: heap.readFloat32(pointers.dKey, key.data.length), shape: [...key.shape] },
    };
    for (const name of kinds) {
      const t = options[name]!;
      result[params[name]] = { data: heap.readFloat32(pointers[params[name]]!, t.data.length), shape: [...t.shape] };
    }
    return result;
  });
}
