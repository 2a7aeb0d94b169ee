/**
 * The training lab's tasks: sequences of tokens whose right answer at a position is the token held
 * at one earlier position, the *right key*. A model that solves such a task has learnt to put its
 * attention weight on that key.
 *
 * - `copy`: every token is drawn uniformly; at position i ≥ COPY_OFFSET the model must output the
 *   token at i − COPY_OFFSET. Right key: i − COPY_OFFSET.
 * - `induction`: the first half (HALF tokens) is drawn uniformly and the second half repeats it,
 *   so the token at position i ≥ HALF is the token at i − HALF. At a second-half position
 *   i ≤ LENGTH − 2 the model must predict the NEXT token, the one at i + 1: the current token's
 *   copy in the first half is at i − HALF, and the token that followed it there, at i − HALF + 1,
 *   is the answer. Right key: i − HALF + 1, for i = HALF … LENGTH − 2 (the first half cannot be
 *   predicted). Positions are what define the copy: a token may occur twice in the first half.
 *
 * Batches are drawn from the package's seeded mulberry32 stream (`attn.randomUniform` with an
 * offset), so a seed gives the same sequences on every platform.
 */
import type { Attention } from 'sdpa-web';

export type TaskName = 'copy' | 'induction';
export const TASK_NAMES: readonly TaskName[] = ['copy', 'induction'];

/** Tokens per sequence. */
export const LENGTH = 12;
/** The induction task's first half. */
export const HALF = LENGTH / 2;
/** How far back the copy task looks. */
export const COPY_OFFSET = 3;
/** The vocabulary: one letter per token id. */
export const VOCAB = 'ABCDEFGH';

/** The right key of query position `i`, or −1 where the task asks nothing at i. */
export function rightKey(task: TaskName, i: number): number {
  if (task === 'copy') return i >= COPY_OFFSET && i < LENGTH ? i - COPY_OFFSET : -1;
  return i >= HALF && i < LENGTH - 1 ? i - HALF + 1 : -1;
}

/** The query positions the task asks about (where the loss and the pattern score are taken). */
export function queryPositions(task: TaskName): number[] {
  return Array.from({ length: LENGTH }, (_, i) => i).filter((i) => rightKey(task, i) >= 0);
}

/** What each task asks, in words (the page's text and the test's messages). */
export const TASK_TEXT: Record<TaskName, string> = {
  copy: `copy the token ${COPY_OFFSET} places back: at position i ≥ ${COPY_OFFSET + 1} (counting from 1) the answer is the token at i − ${COPY_OFFSET}`,
  induction: `induction: the second half repeats the first ${HALF} tokens; at a second-half position i the answer is the next token, the one that followed the current token's copy in the first half, at i − ${HALF} + 1`,
};

/**
 * `count` sequences of `task` (row-major `[count, LENGTH]` token ids), from draws
 * `offset … offset + count·LENGTH − 1` of the stream `seed`.
 */
export function sampleSequences(attn: Attention, task: TaskName, count: number, seed: number, offset: number): Int32Array {
  const u = attn.randomUniform([count, LENGTH], seed, { low: 0, high: 1, offset }).data;
  const tokens = new Int32Array(count * LENGTH);
  const n = VOCAB.length;
  const draw = (x: number) => Math.min(n - 1, Math.floor(x * n));
  for (let s = 0; s < count; s++) {
    const row = s * LENGTH;
    if (task === 'copy') {
      for (let i = 0; i < LENGTH; i++) tokens[row + i] = draw(u[row + i]!);
    } else {
      for (let i = 0; i < HALF; i++) tokens[row + i] = tokens[row + HALF + i] = draw(u[row + i]!);
    }
  }
  return tokens;
}

/** Token ids of a typed sequence (letters of VOCAB, case-insensitive; spaces ignored). */
export function encode(text: string): number[] {
  const ids: number[] = [];
  for (const ch of text.toUpperCase()) {
    if (ch === ' ') continue;
    const id = VOCAB.indexOf(ch);
    if (id < 0) throw new RangeError(`sequence: '${ch}' is not a token; use the letters ${VOCAB}`);
    ids.push(id);
  }
  if (ids.length === 0) throw new RangeError('sequence: type at least one letter');
  if (ids.length > LENGTH) throw new RangeError(`sequence: at most ${LENGTH} letters; got ${ids.length}`);
  return ids;
}

export const decode = (ids: ArrayLike<number>): string => Array.from(ids, (t) => VOCAB[t] ?? '?').join('');
