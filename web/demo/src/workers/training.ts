// The training lab's trainer: owns the model (web/examples/train) and trains it off the main
// thread, sending an update (losses, held-out evaluation, the shown sequence's weights) about
// every UPDATE_MS. Each step's batch is split in Trainer.SHARDS shards: with a shard worker, it
// computes shard 1 while this worker computes shard 0 (both cores busy); the shards are summed in
// order either way, so a seed gives the same run, bit for bit, on one worker or two.
import { createAttention, type Attention } from 'sdpa-web';
import { BATCH, Trainer, type ShardGradients } from '../../../examples/train/model';
import { LENGTH } from '../../../examples/train/tasks';
import type { ShardReply, ShardRequest, TrainerReply, TrainerRequest } from '../lib/training-protocol';

const UPDATE_MS = 150;

const post = (m: TrainerReply) => (self as unknown as { postMessage(m: unknown): void }).postMessage(m);

let attn: Attention | undefined;
let ready: Promise<Attention> | undefined;
let trainer: Trainer | undefined;
/** The sequence each update shows: the student's, or (null) the first held-out sequence. */
let shown: number[] | null = null;
let shardPorts: MessagePort[] = [];
/** Bumped by 'stop' and 'configure': a running loop whose number is stale stops. */
let generation = 0;

/** One shard's gradient from a shard worker. */
function remoteShard(port: MessagePort, t: Trainer, step: number, shard: number): Promise<ShardGradients> {
  return new Promise((resolve, reject) => {
    port.onmessage = (e: MessageEvent<ShardReply>) => (e.data.type === 'gradients' ? resolve(e.data) : reject(new Error(e.data.message)));
    const request: ShardRequest = {
      task: t.config.task,
      heads: t.config.heads,
      layers: t.config.layers,
      params: t.model.params.map((p) => p.data),
      tokens: t.shard(step, shard).slice(),
      count: BATCH / Trainer.SHARDS,
      normalizer: t.batchTerms,
    };
    port.postMessage(request);
  });
}

/** One training step, with the shard workers or without; returns the batch's loss. */
async function trainStep(t: Trainer, shared: boolean): Promise<number> {
  const step = t.step;
  // Shards 0 … k − 1 here, the rest on the shard workers (sent first, so they run meanwhile).
  const remoteCount = shared ? Math.min(shardPorts.length, Trainer.SHARDS - 1) : 0;
  const k = Trainer.SHARDS - remoteCount;
  const remote = shardPorts.slice(0, remoteCount).map((port, i) => remoteShard(port, t, step, k + i));
  const local = Array.from({ length: k }, (_, i) => t.shardGradients(step, i));
  return t.applyShards([...local, ...(await Promise.all(remote))]);
}

/**
 * Whether the shard workers help is measured, not assumed: for such small batches a message round
 * trip per step can cost more than half a batch, and on a busy machine the second core may be
 * taken. In every PROBE_EVERY updates, update 2 trains alone and update 3 with the shard workers
 * (updates 0 and 1, with both, warm both up); the others use the faster. The run is the same
 * either way (see above).
 */
const PROBE_EVERY = 20;
const measured = { alone: 0, shared: 0 };
let updates = 0;

function useShardWorkers(): boolean {
  if (shardPorts.length === 0) return false;
  const phase = updates % PROBE_EVERY;
  if (phase === 2 || phase === 3) return phase === 3;
  return !(measured.alone && measured.shared) || measured.shared > measured.alone;
}

function progress(t: Trainer, losses: [number, number][], stepsPerSecond: number, workers: number): void {
  const tokens = shown ?? Array.from(t.heldOut.subarray(0, LENGTH));
  post({ type: 'progress', step: t.step, losses, evaluation: t.evaluate(), shown: { tokens, answer: t.model.answer(tokens) }, stepsPerSecond, workers, measured: { ...measured } });
}

async function train(untilStep: number, run: number): Promise<void> {
  const t = trainer;
  if (!t) throw new Error('train before configure');
  const mine = ++generation;
  updates = 0;
  measured.alone = measured.shared = 0;
  while (t.step < untilStep) {
    const shared = useShardWorkers();
    const start = performance.now();
    const first = t.step;
    const losses: [number, number][] = [];
    while (t.step < untilStep && performance.now() - start < UPDATE_MS && mine === generation) {
      const step = t.step;
      losses.push([step + 1, await trainStep(t, shared)]);
    }
    // A 'configure' replaced the model: its updates are stale.
    if (trainer !== t) break;
    const rate = ((t.step - first) * 1000) / (performance.now() - start);
    if (updates % PROBE_EVERY === 2 || updates % PROBE_EVERY === 3) measured[shared ? 'shared' : 'alone'] = rate;
    updates++;
    progress(t, losses, rate, shared ? 1 + shardPorts.length : 1);
    // Let 'stop', 'show' and 'configure' in.
    await new Promise((r) => setTimeout(r, 0));
    if (mine !== generation) break;
  }
  post({ type: 'stopped', step: t.step, run, reason: t.step >= untilStep ? 'done' : 'stopped' });
}

self.onmessage = async (e: MessageEvent<TrainerRequest>) => {
  const m = e.data;
  try {
    if (m.type === 'init') {
      shardPorts = m.shardPorts;
      ready = createAttention({ backend: 'simd', threads: m.threads });
      attn = await ready;
      post({ type: 'ready', backend: attn.backend, threads: attn.threads, shardWorkers: shardPorts.length });
    } else if (m.type === 'configure') {
      generation++;
      attn = await ready!;
      trainer = new Trainer(attn, m.config);
      progress(trainer, [], 0, 1);
    } else if (m.type === 'train') {
      await train(m.untilStep, m.run);
    } else if (m.type === 'stop') {
      generation++;
    } else if (m.type === 'show') {
      shown = m.tokens;
      if (trainer) progress(trainer, [], 0, 1);
    }
  } catch (err) {
    post({ type: 'error', message: err instanceof Error ? err.message : String(err) });
  }
};
