// Heatmaps, matrix tables and line plots, drawn with Observable Plot.
import * as Plot from '@observablehq/plot';
import type { Extra, MatrixView } from './compute';
import { el, fmt, fmtCell, fmtExact, rowsOf } from './tensors';

const CELL = 46;
/**
 * A matrix too large for numbers in its cells (more columns or rows than these) is drawn compact:
 * small cells, drawn as one image (a raster, a pixel per cell) with one hover tip, so a 32 × 32
 * matrix is a few hundred nodes, not thousands, and draws in a few milliseconds.
 */
const NUMBERED_COLS = 12;
const NUMBERED_ROWS = 16;
const COMPACT_CELL = 18;
/** Viridis at 0 and 1: a mask's hidden and may-attend cells, coloured as weights 0 and 1 are. */
const VIRIDIS_ENDS = ['#440154', '#fde725'] as const;

/** Cell text colour that stays readable on the cell's fill (viridis is dark at 0, light at 1). */
function textFill(kind: MatrixView['kind'], v: number, maxAbs: number): string {
  if (!Number.isFinite(v)) return 'currentColor';
  if (kind === 'weights' || kind === 'mask') return v > 0.55 ? '#111' : '#fff';
  return Math.abs(v) / (maxAbs || 1) > 0.55 ? '#fff' : '#111';
}

/**
 * Plot puts a <style> element into every plot and legend, and each one added to or taken from the
 * page makes the browser recompute the style of every plot on it (tens of milliseconds on a page of
 * thirty plots, for each plot drawn). Their rules, a few distinct texts, go once each into one shared
 * <style> in the head instead.
 */
const sharedRules = new Set<string>();
let sharedStyle: HTMLStyleElement | undefined;
function hoistPlotStyles<T extends Element>(node: T): T {
  for (const style of node.querySelectorAll('style')) {
    const rules = style.textContent ?? '';
    if (!sharedRules.has(rules)) {
      sharedRules.add(rules);
      sharedStyle ??= document.head.appendChild(el('style', { 'data-plot-rules': '' }));
      sharedStyle.append(rules);
    }
    style.remove();
  }
  return node;
}

/** Plot's bottom margin when an x axis is drawn below the plot and no margin is given. */
const PLOT_MARGIN_BOTTOM = 30;
/**
 * Room under a bottom axis label for its descenders: Plot sets the label's text box on the drawing's
 * bottom edge, where the underscore of "d_k" and the tails of g, p, y were cut off.
 */
const DESCENDER_ROOM = 6;

/**
 * Plot.plot with its inline <style> rules shared (see {@link hoistPlotStyles}) and room under a
 * bottom x-axis label (the label keeps its place under the axis; the drawing grows).
 */
export function renderPlot(options: Plot.PlotOptions): ReturnType<typeof Plot.plot> {
  const x = options.x;
  const labelBelow = x?.label != null && x.axis !== 'top' && x.axis !== null && x.labelOffset === undefined;
  const margin = options.marginBottom ?? PLOT_MARGIN_BOTTOM;
  const roomy = { ...options, marginBottom: margin + DESCENDER_ROOM, x: { ...x, labelOffset: margin - 3 }, ...(options.height !== undefined ? { height: options.height + DESCENDER_ROOM } : {}) };
  return hoistPlotStyles(Plot.plot(labelBelow ? roomy : options));
}

/** A labelled heatmap of a 2-D matrix (rows = queries, columns = keys). −∞ cells are hatched grey. */
export function heatmap(view: MatrixView, opts: { decimals?: number; title?: string; cell?: number; numbers?: boolean; legend?: boolean } = {}): HTMLElement {
  const t = view.tensor;
  const rows = t.shape.length === 1 ? [Array.from(t.data)] : rowsOf(t);
  const nr = rows.length;
  const nc = rows[0]?.length ?? 0;
  const compact = opts.cell === undefined && (nc > NUMBERED_COLS || nr > NUMBERED_ROWS);
  const cell = opts.cell ?? (compact ? COMPACT_CELL : CELL);
  const masked = new Set(view.maskedRows ?? []);
  const cells = rows.flatMap((r, i) => r.map((v, j) => ({ i, j, v })));
  const finite = cells.filter((c) => Number.isFinite(c.v));
  const maxAbs = Math.max(1e-12, ...finite.map((c) => Math.abs(c.v)));
  const decimals = opts.decimals ?? (nc > 8 ? 2 : 3);
  const showText = opts.numbers !== false && nc <= NUMBERED_COLS && nr <= NUMBERED_ROWS;
  const rowLabel = (i: number) => `${view.rowLabels[i] ?? i + 1}${masked.has(i) ? ' (fully masked)' : ''}`;
  const longest = Math.max(...Array.from({ length: nr }, (_, i) => rowLabel(i).length));
  const marginLeft = Math.min(260, 16 + longest * 7);
  const colLongest = Math.max(...view.colLabels.map((s) => s.length));
  const rotate = colLongest * 7 > cell * (opts.numbers === false ? 0.8 : 1);
  const marginBottom = rotate ? Math.min(160, 28 + colLongest * 5) : 40;
  const legend = opts.legend !== false;
  const color =
    view.kind === 'mask'
      ? { type: 'ordinal' as const, domain: [0, 1], range: [VIRIDIS_ENDS[0], VIRIDIS_ENDS[1]], tickFormat: (m: number) => (m ? 'may attend' : 'hidden'), label: 'mask', legend }
      : view.kind === 'weights'
        ? { type: 'linear' as const, scheme: 'viridis' as const, domain: [0, 1], label: 'weight', legend }
        : { type: 'linear' as const, scheme: 'rdbu' as const, domain: [-maxAbs, maxAbs], reverse: true, label: 'value', legend };
  const xAxis = { label: `${view.colAxis || 'column'} →`, labelAnchor: 'center' as const, tickRotate: rotate ? -35 : 0, axis: 'bottom' as const };
  const yAxis = { label: `${view.rowAxis || 'row'} ↓`, labelAnchor: 'top' as const };
  /** One rect per cell (a tooltip each), numbers in them where they fit. */
  const cellMarks = () => ({
    x: { ...xAxis, domain: Array.from({ length: nc }, (_, j) => j), tickFormat: (j: number) => view.colLabels[j] ?? String(j + 1) },
    y: { ...yAxis, domain: Array.from({ length: nr }, (_, i) => i), tickFormat: rowLabel },
    marks: [
      Plot.cell(finite, { x: 'j', y: 'i', fill: 'v', inset: 0.5, title: cellTitle }),
      Plot.cell(cells.filter((c) => !Number.isFinite(c.v)), { x: 'j', y: 'i', fill: 'var(--masked-cell)', inset: 0.5, title: cellTitle }),
      showText ? Plot.text(cells, { x: 'j', y: 'i', text: (c: { v: number }) => fmtCell(c.v, decimals, maxAbs), fill: (c: { v: number }) => textFill(view.kind, c.v, maxAbs), fontSize: cell >= 60 ? 15 : 11 }) : null,
    ],
  });
  /** Cell (i, j) spans [j, j + 1] × [i, i + 1]: a raster of the values over the masked colour (−∞ cells are transparent), one tip. */
  const compactCells = () => {
    const centres = (n: number) => Array.from({ length: n }, (_, k) => k + 0.5);
    return {
      x: { ...xAxis, type: 'linear' as const, domain: [0, nc], ticks: centres(nc), tickFormat: (x: number) => view.colLabels[Math.floor(x)] ?? String(Math.floor(x) + 1) },
      y: { ...yAxis, type: 'linear' as const, domain: [0, nr], reverse: true, ticks: centres(nr), tickFormat: (y: number) => rowLabel(Math.floor(y)) },
      marks: [
        Plot.frame({ fill: 'var(--masked-cell)' }),
        Plot.raster(Float64Array.from(cells, (c) => (Number.isFinite(c.v) ? c.v : NaN)), { x1: 0, x2: nc, y1: 0, y2: nr, width: nc, height: nr, imageRendering: 'pixelated' }),
        Plot.tip(cells, Plot.pointer({ x: (c: { j: number }) => c.j + 0.5, y: (c: { i: number }) => c.i + 0.5, title: cellTitle })),
      ],
    };
  };
  const cellTitle = (c: { v: number; i: number; j: number }) => `${rowLabel(c.i)} → ${view.colLabels[c.j]}: ${Number.isFinite(c.v) ? fmtExact(c.v) : 'masked (−∞)'}`;
  const plot = renderPlot({
    title: opts.title,
    width: marginLeft + 20 + Math.max(nc, 2) * cell,
    height: 30 + marginBottom + nr * (opts.cell || compact ? cell : Math.min(CELL, 36)),
    marginLeft,
    marginBottom,
    marginTop: 30,
    padding: 0.04,
    style: { background: 'transparent', fontSize: cell >= 60 ? '14px' : '12px' },
    color,
    ...(compact ? compactCells() : cellMarks()),
  });
  const fig = el('figure', { class: 'heatmap', 'data-testid': 'heatmap', 'data-name': view.name, role: 'img', 'aria-label': `Heatmap of ${view.name}, ${nr} × ${nc}, rows ${view.rowAxis}, columns ${view.colAxis}` });
  fig.append(el('figcaption', { text: `${view.name} [${t.shape.join(' × ')}]` }), plot);
  return fig;
}

/** The exact numbers of a matrix as a table with row and column labels (`data-v` holds full precision). */
export function matrixTable(view: MatrixView, decimals = 4): HTMLElement {
  const t = view.tensor;
  const rows = t.shape.length === 1 ? [Array.from(t.data)] : rowsOf(t);
  const masked = new Set(view.maskedRows ?? []);
  const table = el('table', { class: 'matrix', 'data-name': view.name, 'data-shape': t.shape.join(',') });
  const head = el('tr', {}, el('th', { scope: 'col', class: 'corner', text: `${view.rowAxis} \\ ${view.colAxis}` }));
  view.colLabels.slice(0, rows[0]?.length ?? 0).forEach((c) => head.append(el('th', { scope: 'col', text: c })));
  table.append(el('thead', {}, head));
  const body = el('tbody');
  rows.forEach((r, i) => {
    const tr = el('tr', masked.has(i) ? { class: 'fully-masked' } : {}, el('th', { scope: 'row', text: `${view.rowLabels[i] ?? i + 1}${masked.has(i) ? ' (fully masked)' : ''}` }));
    r.forEach((v) => tr.append(el('td', { 'data-v': String(v), text: fmt(v, decimals), class: Number.isFinite(v) ? undefined : 'neg-inf' })));
    body.append(tr);
  });
  table.append(body);
  return el('div', { class: 'table-scroll' }, table);
}

/** Render an extra panel (table or line plot). */
export function renderExtra(x: Extra): HTMLElement {
  if (x.kind === 'table') {
    const table = el('table', { class: 'data' });
    table.append(el('thead', {}, el('tr', {}, ...x.columns.map((c) => el('th', { scope: 'col', text: c })))));
    table.append(el('tbody', {}, ...x.rows.map((r) => el('tr', {}, ...r.map((c) => el('td', { text: String(c) }))))));
    return el('figure', { class: 'extra' }, el('figcaption', { text: x.title }), el('div', { class: 'table-scroll' }, table));
  }
  return el('figure', { class: 'extra', 'data-testid': 'line-plot' }, el('figcaption', { text: x.title }), linePlot(x));
}

/** A line plot of `x`'s series (dashed: series named "reference …"), `width` px wide (it scales down with its box). */
export function linePlot(x: Extract<Extra, { kind: 'lines' }>, extraMarks: Plot.Markish[] = [], width = 640): Element {
  return renderPlot({
    width,
    height: Math.round(Math.min(340, Math.max(240, width * 0.5))),
    marginLeft: 56,
    style: { background: 'transparent', fontSize: '12px' },
    x: { type: x.xLog ? 'log' : 'linear', label: x.xLabel, grid: true },
    y: { type: x.yLog ? 'log' : 'linear', label: x.yLabel, grid: true },
    color: { legend: true, scheme: 'observable10', domain: [...new Set(x.points.map((p) => p.series))] },
    marks: [
      Plot.line(x.points.filter((p) => !p.series.startsWith('reference')), { x: 'x', y: 'y', z: 'series', stroke: 'series', strokeWidth: 2 }),
      Plot.line(x.points.filter((p) => p.series.startsWith('reference')), { x: 'x', y: 'y', z: 'series', stroke: 'series', strokeWidth: 1.5, strokeDasharray: '5,4' }),
      Plot.dot(x.points.filter((p) => !p.series.startsWith('reference')), { x: 'x', y: 'y', stroke: 'series', r: 2.5, tip: true }),
      ...extraMarks,
    ],
  });
}
