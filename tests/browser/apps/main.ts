// A user's app: attention through the installed package (a call, the same call in float16, a
// decode step on a KV cache, a call on 2 MiB of inputs against the float64 reference). The
// outcome goes to body[data-result] (or body[data-error]) for the test driving the page.
import { createAttention, fromFloat16, toFloat16 } from 'sdpa-web';

async function main(): Promise<void> {
  const attn = await createAttention({ backend: 'simd' });
  const q = { data: new Float32Array([1, 0]), shape: [1, 2] };
  const kv = { data: new Float32Array([1, 0, 0, 1]), shape: [2, 2] };
  const { output } = await attn.scaledDotProductAttention(q, kv, kv);
  // The same call in float16, and as a decode step over a KV cache holding the two keys.
  const half = (t: { data: Float32Array; shape: number[] }) => ({ data: toFloat16(t.data), shape: t.shape, dtype: 'float16' as const });
  const float16 = await attn.scaledDotProductAttention(half(q), half(kv), half(kv));
  const cache = attn.createKvCache({ batch: 1, kvHeads: 1, maxLength: 8, headDim: 2 });
  cache.append({ data: kv.data, shape: [1, 1, 2, 2] }, { data: kv.data, shape: [1, 1, 2, 2] });
  const cached = await attn.scaledDotProductAttention({ data: q.data, shape: [1, 1, 1, 2] }, cache, { isCausal: true });
  cache.dispose();
  // Inputs large enough (2 MiB) that a threaded instance copies them in while its kernel runs,
  // against the package's float64 reference.
  const big = (shape: number[], seed: number) => attn.randomUniform(shape, seed);
  const [bq, bk, bv] = [big([1, 2, 1024, 128], 1), big([1, 1, 1024, 128], 2), big([1, 1, 1024, 128], 3)];
  const bigOptions = { isCausal: true, enableGqa: true, window: { left: 300 } } as const;
  const streamed = attn.scaledDotProductAttentionSync(bq, bk, bv, bigOptions).output.data;
  const reference = attn.referenceAttention(bq, bk, bv, bigOptions).output.data;
  let streamedError = 0;
  for (let i = 0; i < streamed.length; i++) streamedError = Math.max(streamedError, Math.abs(streamed[i]! - reference[i]!));
  const result = {
    output: Array.from(output.data),
    float16: Array.from(fromFloat16(float16.output.data as Uint16Array)),
    cached: Array.from(cached.output.data),
    streamedError,
    threads: attn.threads,
    cores: navigator.hardwareConcurrency,
    fallbackReason: attn.fallbackReason ?? null,
    ms: performance.now(),
  };
  attn.dispose();
  document.getElementById('out')!.textContent = JSON.stringify(result, null, 2);
  document.body.dataset.result = JSON.stringify(result);
}

main().catch((e: unknown) => {
  document.getElementById('out')!.textContent = String(e);
  document.body.dataset.error = e instanceof Error ? e.message : String(e);
});
