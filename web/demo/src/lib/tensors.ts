// Small helpers for the page: building tensors from the examples' plain arrays, reshaping and formatting.
// No attention math here: every score, weight and output on the page comes from sdpa-web.
import type { Tensor } from 'sdpa-web';
import type { Matrix, MatrixInput, UniformSource } from '../../../examples/worked-examples';
import { resolveMatrix } from '../../../examples/worked-examples';


/** Any numeric tensor the page displays (float32 from the library, float64 from its reference). */
export interface NumTensor {
  data: ArrayLike<number>;
  shape: readonly number[];
}

export const size = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

/** A literal matrix as a tensor, or a random one drawn by `source` (the page's Attention instance). */
export function toTensor(m: Matrix | MatrixInput, source: UniformSource): Tensor {
  const r = resolveMatrix(m as MatrixInput, source);
  return { data: Float32Array.from(r.data), shape: r.shape.slice() };
}

export function tensor(data: ArrayLike<number>, shape: readonly number[]): Tensor {
  return { data: Float32Array.from(data as ArrayLike<number>), shape: shape.slice() };
}

/** Swap the last two axes (a data shuffle, e.g. to hand Kᵀ to `matmul`). */
export function transpose(t: NumTensor): Tensor {
  const r = t.shape.length;
  const m = t.shape[r - 2];
  const n = t.shape[r - 1];
  const b = size(t.shape.slice(0, r - 2));
  const out = new Float32Array(t.data.length);
  for (let z = 0; z < b; z++)
    for (let i = 0; i < m; i++) for (let j = 0; j < n; j++) out[z * m * n + j * m + i] = t.data[z * m * n + i * n + j];
  return { data: out, shape: [...t.shape.slice(0, r - 2), n, m] };
}

export function eye(n: number): Tensor {
  const d = new Float32Array(n * n);
  for (let i = 0; i < n; i++) d[i * n + i] = 1;
  return { data: d, shape: [n, n] };
}

/** Slice item `index` of the leading axis. */
export function slice0(t: NumTensor, index: number): NumTensor {
  const inner = size(t.shape.slice(1));
  return { data: Array.prototype.slice.call(t.data, index * inner, (index + 1) * inner), shape: t.shape.slice(1) };
}

export function rowsOf(t: NumTensor): number[][] {
  const n = t.shape[t.shape.length - 1] ?? 1;
  const rows: number[][] = [];
  for (let i = 0; i < t.data.length; i += n) rows.push(Array.from({ length: n }, (_, j) => t.data[i + j]));
  return rows;
}

/** Entropy (nats) of one row of weights; 0·log 0 = 0. A display statistic. */
export function entropy(row: ArrayLike<number>): number {
  let h = 0;
  for (let i = 0; i < row.length; i++) if (row[i] > 0) h -= row[i] * Math.log(row[i]);
  return h;
}

/** Sample standard deviation (a display statistic). */
export function stdOf(a: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m += a[i];
  m /= a.length;
  let s = 0;
  for (let i = 0; i < a.length; i++) s += (a[i] - m) ** 2;
  return Math.sqrt(s / (a.length - 1));
}

export function maxOf(row: ArrayLike<number>): number {
  let m = -Infinity;
  for (let i = 0; i < row.length; i++) if (row[i] > m) m = row[i];
  return m;
}

export function isFullyMasked(row: ArrayLike<number>): boolean {
  for (let i = 0; i < row.length; i++) if (row[i] !== 0) return false;
  return true;
}

/** Format a number for a matrix cell. */
export function fmt(x: number, decimals = 3): string {
  if (x === -Infinity) return '−∞';
  if (x === Infinity) return '∞';
  if (Number.isNaN(x)) return 'NaN';
  const s = x.toFixed(decimals);
  return (s.startsWith('-') && Number(s) === 0 ? s.slice(1) : s).replace('-', '−');
}

/**
 * Format a number for a heatmap cell (about 46 px): at most about six characters, so big values do not
 * run into their neighbours. The exact value is in the cell's tooltip and the numbers table.
 */
export function fmtCell(x: number, decimals = 3, maxAbs = Math.abs(x)): string {
  if (!Number.isFinite(x)) return fmt(x);
  // One format per matrix (from its largest magnitude), so a column reads evenly.
  if (maxAbs >= 1e4) return Math.abs(x) < 1 ? fmt(x, 0) : x.toExponential(0).replace('e+', 'e').replace(/-/g, '−');
  if (maxAbs >= 100) return fmt(x, 0);
  if (maxAbs >= 10) return fmt(x, Math.min(decimals, 1));
  if (maxAbs >= 1) return fmt(x, Math.min(decimals, 2));
  return fmt(x, decimals);
}

/** Format with a sensible number of significant digits (for tooltips and exact values). */
export function fmtExact(x: number): string {
  if (!Number.isFinite(x)) return fmt(x);
  return Number(x.toPrecision(7)).toString().replace('-', '−');
}

export const seqLabels = (prefix: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${prefix}${i + 1}`);

export const shapeStr = (shape: number[]): string => `[${shape.join(' × ')}]`;

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number | boolean | undefined> = {},
  ...children: (Node | string | null | undefined)[]
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (k === 'class') e.className = String(v);
    else if (k === 'text') e.textContent = String(v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) if (c != null) e.append(c);
  return e;
}

/** Let the browser paint (progress bars) between chunks of work. */
export const nextFrame = (): Promise<void> => new Promise((r) => setTimeout(r, 0));

/**
 * Resolve once the browser has laid out and painted what was added so far (after the next animation
 * frame), so the next piece of drawing starts in a task of its own. A page in a background tab gets
 * no frames: it goes on after 100 ms.
 */
export const afterPaint = (): Promise<void> =>
  new Promise((resolve) => {
    const fallback = setTimeout(resolve, 100);
    requestAnimationFrame(() => {
      clearTimeout(fallback);
      setTimeout(resolve, 0);
    });
  });
