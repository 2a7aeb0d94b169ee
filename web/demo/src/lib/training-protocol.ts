// Messages between the training lab's section (main thread), its trainer worker and the shard
// workers that compute part of each batch's gradient.
import type { Answer, Evaluation, LabConfig, ShardGradients } from '../../../examples/train/model';
import type { TaskName } from '../../../examples/train/tasks';

/** Main thread → trainer worker. */
export type TrainerRequest =
  /** Once: ports to the shard workers (none: the trainer computes every shard itself). */
  | { type: 'init'; shardPorts: MessagePort[]; threads: number }
  /** A fresh model (step 0) for these settings. */
  | { type: 'configure'; config: LabConfig }
  /** Train until step `untilStep` or a 'stop'; `run` numbers the request (its 'stopped' echoes it). */
  | { type: 'train'; untilStep: number; run: number }
  | { type: 'stop' }
  /** The sequence whose weights and answers each update shows (null: the first held-out sequence). */
  | { type: 'show'; tokens: number[] | null };

export interface Progress {
  type: 'progress';
  step: number;
  /** [step, batch loss] of every step since the last update. */
  losses: [number, number][];
  evaluation: Evaluation;
  /** The model on the shown sequence. */
  shown: { tokens: number[]; answer: Answer };
  /** Training speed over the last update, steps per second (0 before the first step). */
  stepsPerSecond: number;
  /** Workers that computed the last update's steps (1: the trainer alone). */
  workers: number;
  /** The last probes' speeds, steps per second, alone and with the shard workers (0: not yet measured). */
  measured: { alone: number; shared: number };
}

/** Trainer worker → main thread. */
export type TrainerReply =
  | { type: 'ready'; backend: string; threads: number; shardWorkers: number }
  | Progress
  | { type: 'stopped'; step: number; run: number; reason: 'stopped' | 'done' }
  | { type: 'error'; message: string };

/** Trainer worker → shard worker: one shard's gradient with these weights. */
export interface ShardRequest {
  task: TaskName;
  heads: number;
  layers: number;
  /** Every parameter's data, in the model's order. */
  params: Float32Array[];
  tokens: Int32Array;
  count: number;
  normalizer: number;
}

export type ShardReply = ({ type: 'gradients' } & ShardGradients) | { type: 'error'; message: string };
