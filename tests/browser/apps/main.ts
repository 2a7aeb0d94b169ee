// A user's app: one attention call through the installed package. The outcome goes to
// body[data-result] (or body[data-error]) for the test driving the page.
import { createAttention } from 'sdpa-web';

async function main(): Promise<void> {
  const attn = await createAttention({ backend: 'simd' });
  const q = { data: new Float32Array([1, 0]), shape: [1, 2] };
  const kv = { data: new Float32Array([1, 0, 0, 1]), shape: [2, 2] };
  const { output } = await attn.scaledDotProductAttention(q, kv, kv);
  const result = {
    output: Array.from(output.data),
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
