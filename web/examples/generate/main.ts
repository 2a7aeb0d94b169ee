// Generates text with the example decoder (decoder.ts) and a KV cache per layer, and prints the
// tokens and the time per step. Run: npm run example:generate -- [options] (needs the package
// built: npm run build:lib); --help lists them.
import { parseArgs } from 'node:util';
import { DECODER_CONFIG, Decoder } from './decoder.js';
import { createAttention, type Attention, type BackendChoice, type KvCacheDType } from 'sdpa-web';

const USAGE = `Usage: npm run example:generate -- [options]
  --backend auto|simd|scalar|webgpu        the sdpa-web backend (default auto)
  --prompt TEXT                            the prompt (default "The cache grows by one row per token.")
  --tokens N                               tokens to generate (default 64)
  --cache-dtype float32|float16|int8|int4  the KV caches' element type (default float32)
  --max-length N                           the tokens each layer's cache is allocated for (default ${DECODER_CONFIG.maxLength})
  --check                                  also run the model recomputing full causal attention over the
                                           whole sequence at every step, and compare the tokens and the last
                                           step's logits (an int8/int4 cache computes on quantized keys and
                                           values: its tokens may differ from the full path's)
  --help                                   this text`;

/** Exits with the usage after a bad option: the message, not a stack trace. */
function usageError(message: string): never {
  console.error(`${message}\n\n${USAGE}`);
  process.exit(2);
}

let values;
try {
  ({ values } = parseArgs({
    options: {
      backend: { type: 'string', default: 'auto' },
      prompt: { type: 'string', default: 'The cache grows by one row per token.' },
      tokens: { type: 'string', default: '64' },
      check: { type: 'boolean', default: false },
      'cache-dtype': { type: 'string', default: 'float32' },
      'max-length': { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  }));
} catch (e) {
  usageError((e as Error).message);
}
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const backends = ['auto', 'simd', 'scalar', 'webgpu'];
if (!backends.includes(values.backend)) usageError(`--backend must be one of ${backends.join(', ')}; got ${values.backend}`);
const cacheDtypes = ['float32', 'float16', 'int8', 'int4'];
if (!cacheDtypes.includes(values['cache-dtype'])) usageError(`--cache-dtype must be one of ${cacheDtypes.join(', ')}; got ${values['cache-dtype']}`);
const maxLength = values['max-length'] === undefined ? DECODER_CONFIG.maxLength : Number(values['max-length']);
if (!(Number.isInteger(maxLength) && maxLength >= 2)) usageError(`--max-length must be an integer ≥ 2; got ${values['max-length']}`);
const count = Number(values.tokens);
if (!(Number.isInteger(count) && count >= 1)) usageError(`--tokens must be an integer ≥ 1; got ${values.tokens}`);

// Node has no navigator.gpu: --backend webgpu runs on dawn.node (npm `webgpu`, a dev dependency
// of this repository) when it is installed, on the GPU its Vulkan driver offers.
let attention: Attention | undefined;
if (values.backend === 'webgpu' && !(globalThis as { navigator?: { gpu?: unknown } }).navigator?.gpu) {
  const dawn = await import('webgpu').catch(() => usageError("--backend webgpu in Node needs dawn.node: npm install webgpu"));
  attention = await createAttention({ backend: 'webgpu', gpu: dawn.create([]) });
}
const decoder = await Decoder.create({ ...DECODER_CONFIG, maxLength }, {
  attention,
  backend: values.backend as BackendChoice,
  cacheDtype: values['cache-dtype'] as KvCacheDType,
});
try {
  const { layers, dModel, heads, kvHeads, vocab } = decoder.config;
  const attn = decoder.attn;
  const build = attn.backend === 'webgpu' ? '' : `, ${attn.relaxedSimd ? 'relaxed SIMD' : 'SIMD128'}, ${attn.threads} thread${attn.threads > 1 ? 's' : ''}`;
  console.log(`decoder: ${layers} layers, d_model ${dModel}, ${heads} query heads over ${kvHeads} KV heads (E = ${dModel / heads}), vocabulary of ${vocab.length}; backend ${attn.backend}${build}`);
  console.log(`KV caches: ${values['cache-dtype']}, ${decoder.config.maxLength} tokens each, ${(decoder.cacheBytes / 2 ** 20).toFixed(2)} MiB in all`);
  const prompt = decoder.encode(values.prompt);
  // One untimed run warms the engine (wasm compilation, first allocations).
  await decoder.generate(prompt, Math.min(count, 4));
  const run = await decoder.generate(prompt, count);
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
  const sorted = [...run.stepMs].sort((a, b) => a - b);
  console.log(`prompt (${prompt.length} tokens): ${JSON.stringify(values.prompt)}`);
  console.log(`generated ${run.tokens.length} tokens: ${JSON.stringify(decoder.decode(run.tokens))}`);
  console.log(`token ids: ${run.tokens.join(' ')}`);
  console.log(`prefill ${run.prefillMs.toFixed(2)} ms; ${run.stepMs.length} steps: median ${median(run.stepMs).toFixed(3)} ms/step (min ${sorted[0]?.toFixed(3)}, max ${sorted[sorted.length - 1]?.toFixed(3)}), ${(1000 / median(run.stepMs)).toFixed(0)} tokens/s; of a step, ${median(run.attentionMs).toFixed(3)} ms in its ${layers} attention calls on the caches (median)`);
  if (values.check) {
    const full = decoder.generateFull(prompt, count);
    const same = full.tokens.every((t, i) => t === run.tokens[i]);
    let diff = 0;
    for (let i = 0; i < full.logits.length; i++) diff = Math.max(diff, Math.abs(full.logits[i]! - run.logits[i]!));
    console.log(`without the cache (full causal attention over the sequence at every step): ${median(full.stepMs).toFixed(3)} ms/step; tokens ${same ? 'the same' : 'DIFFER'}; last step's logits differ by at most ${diff.toExponential(2)}`);
    if (!same) process.exitCode = 1;
  }
} finally {
  decoder.dispose();
  attention?.dispose();
}
