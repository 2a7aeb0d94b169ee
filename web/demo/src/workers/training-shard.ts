// A training lab shard worker: computes one shard of a batch's gradient with the weights it is sent
// (data parallelism: the trainer worker computes the other shard at the same time).
import { createAttention, type Attention } from 'sdpa-web';
import { parameterShapes, TinyTransformer } from '../../../examples/train/model';
import type { ShardReply, ShardRequest } from '../lib/training-protocol';

function serve(port: MessagePort): void {
  // Created when the port arrives, so that the first shard does not wait for it.
  const attn: Promise<Attention> = createAttention({ backend: 'simd', threads: 1 });
  port.onmessage = async (e: MessageEvent<ShardRequest>) => {
    const r = e.data;
    try {
      const a = await attn;
      const params = parameterShapes(r.heads, r.layers).map((p, i) => ({ ...p, data: r.params[i]! }));
      const { lossSum, gradients } = new TinyTransformer(a, r.heads, r.layers, params).lossAndGradients(r.tokens, r.count, r.task, r.normalizer);
      const reply: ShardReply = { type: 'gradients', lossSum, gradients };
      port.postMessage(reply, gradients.map((g) => g.buffer));
    } catch (err) {
      const reply: ShardReply = { type: 'error', message: err instanceof Error ? err.message : String(err) };
      port.postMessage(reply);
    }
  };
}

self.onmessage = (e: MessageEvent<{ port: MessagePort }>) => serve(e.data.port);
