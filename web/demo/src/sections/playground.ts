// Section 3: edit Q, K, V (or X and W_Q/W_K/W_V), choose scaling, temperature, mask and backend, and see the
// weights, their entropy and max per row, and the output. All state lives in the URL.
import type { Attention, AttentionOptions, BackendName, Tensor } from 'sdpa-web';
import { normalSampler, uniformStream } from '../../../examples/worked-examples';
import { getParam, selectable, setParams, type App } from '../lib/app';
import { fieldMessage, readWholeNumber } from '../lib/fields';
import { attentionStages } from '../lib/compute';
import { pytorchAttention } from '../lib/pytorch';
import { fitMath, tex } from '../lib/katex';
import { heatmap, matrixTable } from '../lib/plots';
import { afterPaint, el, entropy, fmt, isFullyMasked, maxOf, rowsOf, seqLabels } from '../lib/tensors';

type Mode = 'qkv' | 'x';
type MaskKind = 'none' | 'causal-tl' | 'causal-br' | 'padding' | 'custom';
const MATS = ['q', 'k', 'v', 'x', 'wq', 'wk', 'wv'] as const;
type MatName = (typeof MATS)[number];

const DEFAULTS: Record<MatName, string> = {
  q: '1 0 1\n0 1 0\n1 1 0',
  k: '1 0 1\n0 1 1\n1 0 0\n0 0 1\n1 1 1',
  v: '1 0\n0 1\n1 1\n0.5 0\n0 0.5',
  x: '1.0 0.5 0.2 0.8\n0.3 0.9 0.1 0.4\n0.7 0.2 0.6 0.3',
  wq: '0.5 0.3\n0.2 0.4\n0.1 0.6\n0.7 0.2',
  wk: '0.4 0.1\n0.3 0.5\n0.6 0.2\n0.2 0.4',
  wv: '0.6 0.3\n0.2 0.7\n0.4 0.1\n0.3 0.5',
};
/**
 * The playground's size limit: every matrix at most this many rows and columns. Within it a recompute
 * (parse, the library's calls, heatmaps and tables) stays well under 100 ms; larger inputs belong in
 * a script calling the library.
 */
export const MAX_ROWS = 32;
export const MAX_COLS = 64;
/** Matrices whose text is longer than this stay out of the URL (a link must stay small). */
const MAX_URL_MATRIX_CHARS = 1500;
const LABELS: Record<MatName, string> = { q: 'Q  [Lq × d_k]', k: 'K  [Lk × d_k]', v: 'V  [Lk × d_v]', x: 'X  [n × d_model]', wq: 'W_Q  [d_model × d_k]', wk: 'W_K  [d_model × d_k]', wv: 'W_V  [d_model × d_v]' };

/** Parse a small matrix from text: rows on lines (or `;`), numbers split by spaces/commas; `[[…],[…]]` pastes work too. */
export function parseMatrix(text: string, name: string): Tensor {
  const norm = text.replace(/\]\s*,?\s*\[/g, '\n').replace(/[[\]]/g, '').trim();
  if (!norm) throw new Error(`${name} is empty`);
  const rows = norm.split(/\n|;/).map((r) => r.trim()).filter(Boolean).map((r) => r.split(/[\s,]+/).filter(Boolean).map((s) => {
    const x = Number(s.replace('−', '-'));
    if (!Number.isFinite(x)) throw new Error(`${name}: “${s}” is not a number`);
    return x;
  }));
  const n = rows[0].length;
  rows.forEach((r, i) => {
    if (r.length !== n) throw new Error(`${name}: row ${i + 1} has ${r.length} numbers, row 1 has ${n}`);
  });
  if (rows.length > MAX_ROWS) throw new RangeError(`${name} has ${rows.length} rows: the playground takes at most ${MAX_ROWS}`);
  if (n > MAX_COLS) throw new RangeError(`${name} has ${n} columns: the playground takes at most ${MAX_COLS}`);
  return { data: Float32Array.from(rows.flat()), shape: [rows.length, n] };
}

const matText = (t: Tensor, digits = 3) => rowsOf(t).map((r) => r.map((x) => +x.toFixed(digits)).join(' ')).join('\n');
const urlMat = (s: string) => s.trim().split('\n').map((r) => r.trim().split(/\s+/).join(',')).join(';');
const fromUrlMat = (s: string) => s.split(';').map((r) => r.split(',').join(' ')).join('\n');

export function mountPlayground(app: App): void {
  const sec = document.getElementById('playground')!;
  sec.append(el('p', { text: 'Edit the matrices (one row per line; pasting [[1, 2], [3, 4]] works too), then change the scaling, temperature, mask or backend. Everything recomputes through sdpa-web and the URL keeps the state, so you can share this exact view.' }));

  const mode = el('select', { id: 'pg-mode', 'aria-label': 'Inputs' }, el('option', { value: 'qkv', text: 'Q, K, V directly' }), el('option', { value: 'x', text: 'X and W_Q, W_K, W_V (self-attention)' }));
  const areas = {} as Record<MatName, HTMLTextAreaElement>;
  const areaLabels = {} as Record<MatName, HTMLElement>;
  const inputs = el('div', { class: 'matrix-inputs' });
  for (const m of MATS) {
    const ta = el('textarea', { id: `pg-${m}`, rows: 5, cols: 22, spellcheck: 'false', 'aria-describedby': 'pg-error' });
    ta.value = getParam(`p${m}`) ? fromUrlMat(getParam(`p${m}`)!) : DEFAULTS[m];
    areas[m] = ta;
    areaLabels[m] = el('label', { for: `pg-${m}` }, LABELS[m], ta);
    inputs.append(areaLabels[m]);
  }
  const tokQ = el('input', { type: 'text', id: 'pg-tokq', size: 28, placeholder: 'e.g. The, cat, sat', value: getParam('ptq') ?? '' });
  const tokK = el('input', { type: 'text', id: 'pg-tokk', size: 28, placeholder: 'e.g. The, cat, sat, on, mat', value: getParam('ptk') ?? '' });
  // The size fields show the current Q, K, V shapes (kept in step by recompute) and size the
  // random matrices the button draws.
  const rnd = el('button', { type: 'button', id: 'pg-random', text: 'Random Q, K, V' });
  const sizeIn = (id: string, label: string, max: number) => el('input', { type: 'number', min: 1, max, step: 1, value: 4, id, 'aria-label': label });
  const lqIn = sizeIn('pg-lq', 'Lq', MAX_ROWS), lkIn = sizeIn('pg-lk', 'Lk', MAX_ROWS), dkIn = sizeIn('pg-dk', 'd_k', MAX_COLS), dvIn = sizeIn('pg-dv', 'd_v', MAX_COLS);
  const sizeFields = [[lqIn, 'Lq', MAX_ROWS], [lkIn, 'Lk', MAX_ROWS], [dkIn, 'd_k', MAX_COLS], [dvIn, 'd_v', MAX_COLS]] as const;

  const scaled = el('input', { type: 'checkbox', id: 'pg-scaled', checked: getParam('pscaled') !== '0' });
  const temp = el('input', { type: 'range', id: 'pg-temp', min: -1.5, max: 1.5, step: 0.05, value: Math.log10(Number(getParam('pT') ?? 1)) });
  const tempOut = el('output', { for: 'pg-temp', class: 'big' });
  const maskSel = el('select', { id: 'pg-mask' }, ...([['none', 'none'], ['causal-tl', 'causal, top-left (is_causal=True)'], ['causal-br', 'causal, bottom-right (aligned to the last key)'], ['padding', 'padding / key length'], ['custom', 'custom: click cells']] as const).map(([v, t]) => el('option', { value: v, text: t })));
  maskSel.value = getParam('pmask') ?? 'none';
  // A text field (numeric keypad): what was typed, letters included, is echoed in its message.
  const keyLen = el('input', { type: 'text', inputmode: 'numeric', id: 'pg-keylen', size: 4, value: getParam('pkeylen') ?? '3' });
  // The variants of current models, each an option of the call (empty = off).
  const numberIn = (id: string, label: string, param: string, attrs: Record<string, string | number> = {}) =>
    el('input', { type: 'number', id, 'aria-label': label, value: getParam(param) ?? '', placeholder: 'off', ...attrs });
  const softcapIn = numberIn('pg-softcap', 'Softcap c', 'psoftcap', { min: 0, step: 0.5 });
  const winLeftIn = numberIn('pg-win-left', 'Window: keys to the left', 'pwl', { min: 0, step: 1 });
  const winRightIn = numberIn('pg-win-right', 'Window: keys to the right', 'pwr', { min: 0, step: 1 });
  const alibiIn = numberIn('pg-alibi', 'ALiBi slope m', 'palibi', { step: 0.1 });
  const sinkIn = numberIn('pg-sink', 'Sink logit', 'psink', { step: 0.5 });
  const docsIn = el('input', { type: 'text', id: 'pg-docs', size: 10, placeholder: 'e.g. 2, 3', 'aria-label': 'Document lengths', value: getParam('pdocs') ?? '' });
  const variantControls = el('fieldset', { class: 'controls', id: 'pg-variants' },
    el('legend', { text: 'Variants of current models (each an option of the call; empty = off)' }),
    el('label', {}, 'Softcap c (Gemma 2): c·tanh(s/c)', softcapIn),
    el('label', {}, 'Sliding window: left', winLeftIn),
    el('label', {}, 'right', winRightIn),
    el('label', {}, 'ALiBi slope m (BLOOM): −m·|p − j|', alibiIn),
    el('label', {}, 'Sink logit (gpt-oss)', sinkIn),
    el('label', {}, 'Documents: lengths in positions', docsIn),
  );
  const backendSel = el('select', { id: 'pg-backend', 'aria-describedby': 'pg-backend-status' });
  const backendNote = el('p', { id: 'pg-backend-status', class: 'note', role: 'status' });
  const maskGrid = el('div', { class: 'mask-grid', role: 'group', 'aria-label': 'Custom mask: pressed = may attend' });
  let customCells = getParam('pcells') ?? '';

  const controls = el('div', { class: 'controls' },
    el('label', {}, 'Inputs', mode),
    el('label', {}, el('span', {}, scaled, ' divide by √d_k')),
    el('label', {}, 'Temperature T (softmax(S·scale / T))', temp, tempOut),
    el('label', {}, 'Mask', maskSel),
    el('label', { id: 'pg-keylen-label' }, 'Valid keys (padding)', keyLen),
    el('label', {}, 'Backend', backendSel),
  );
  const randomRow = el('div', { class: 'row', role: 'group', 'aria-label': 'Shapes of Q, K, V' }, el('span', { class: 'note', text: 'Shapes:' }), el('label', {}, 'Lq ', lqIn), el('label', {}, 'Lk ', lkIn), el('label', {}, 'd_k ', dkIn), el('label', {}, 'd_v ', dvIn), rnd);
  const error = el('p', { id: 'pg-error', class: 'error-text', role: 'alert' });
  const limitNote = el('p', { class: 'note', id: 'pg-limit', 'data-rows': MAX_ROWS, 'data-cols': MAX_COLS, text: `Each matrix: up to ${MAX_ROWS} rows and ${MAX_COLS} columns (larger inputs belong in a script calling sdpa-web). Small matrices are kept in the URL; larger ones are not, so a link stays short.` });
  const progress = el('p', { class: 'note', id: 'pg-progress', role: 'status' });
  const results = el('div', { id: 'pg-results', 'data-version': '0' }, progress);
  const views = el('div', { class: 'views' });
  sec.append(controls, variantControls, backendNote, randomRow, inputs, el('div', { class: 'row' }, el('label', {}, 'Query tokens ', tokQ), el('label', {}, 'Key tokens ', tokK)), el('div', { id: 'pg-mask-cells' }, maskGrid), limitNote, error, results);

  mode.value = (getParam('pmode') as Mode) ?? 'qkv';
  let attn: Attention = app.attn;
  let version = 0;

  // The library's backend list, with its reasons verbatim. WebGPU stays selectable where 'auto'
  // passed over a software adapter: an explicit 'webgpu' instance uses it (or says why it cannot).
  const backends = app.backends;
  backendSel.append(el('option', { value: 'auto', text: `auto (${app.attn.backend})` }));
  for (const b of backends) {
    const text = b.available ? b.name : `${b.name} — ${selectable(b) ? 'not chosen by auto' : 'unavailable'}: ${b.reason ?? 'unknown reason'}`;
    backendSel.append(el('option', { value: b.name, disabled: !selectable(b), text, title: text }));
  }
  const wantBackend = getParam('pbackend');
  if (wantBackend && backends.some((b) => b.name === wantBackend && selectable(b))) backendSel.value = wantBackend;
  const describeBackends = () => {
    const gpuNote = attn.backend === 'webgpu' ? ' Weights and output come from its WebGPU kernels (asynchronously); the masked scores from explain, the library’s float32 scalar reference.' : '';
    const autoWhy = app.attn.fallbackReason ? ` Auto chose ${app.attn.backend}: ${app.attn.fallbackReason}.` : '';
    const off = backends.filter((b) => !b.available && !selectable(b));
    backendNote.textContent = `Computing with ${attn.backend}.${gpuNote}${autoWhy}${off.length ? ` Unavailable here: ${off.map((b) => `${b.name} (${b.reason})`).join('; ')}.` : ''}`;
  };

  function sizes(): { lq: number; lk: number } {
    try {
      if (mode.value === 'x') {
        const n = parseMatrix(areas.x.value, 'X').shape[0];
        return { lq: n, lk: n };
      }
      return { lq: parseMatrix(areas.q.value, 'Q').shape[0], lk: parseMatrix(areas.k.value, 'K').shape[0] };
    } catch {
      return { lq: 0, lk: 0 };
    }
  }

  function renderMaskGrid(): void {
    const { lq, lk } = sizes();
    const show = maskSel.value === 'custom' && lq > 0;
    maskGrid.hidden = !show;
    if (!show) return;
    if (customCells.length !== lq * lk) customCells = '1'.repeat(lq * lk);
    const ql = tokLabels(tokQ.value, 'q', lq);
    const kl = mode.value === 'x' ? ql : tokLabels(tokK.value, 'k', lk);
    // A header row of key labels and a column of query labels around the cells (rows: queries).
    maskGrid.style.gridTemplateColumns = `auto repeat(${lk}, 30px)`;
    const label = (text: string, cls: string) => el('span', { class: cls, title: text, text, 'aria-hidden': 'true' });
    const cells = Array.from({ length: lq * lk }, (_, idx) => {
      const i = Math.floor(idx / lk), j = idx % lk;
      const on = customCells[idx] === '1';
      const b = el('button', { type: 'button', 'aria-pressed': String(on), 'aria-label': `query ${ql[i]} → key ${kl[j]}: ${on ? 'may attend' : 'masked'}`, text: on ? '✓' : '−∞', 'data-cell': `${i},${j}` });
      b.addEventListener('click', () => {
        customCells = customCells.slice(0, idx) + (on ? '0' : '1') + customCells.slice(idx + 1);
        renderMaskGrid();
        (maskGrid.querySelector(`[data-cell="${i},${j}"]`) as HTMLElement).focus();
        void recompute();
      });
      return b;
    });
    maskGrid.replaceChildren(
      el('span', { class: 'mask-corner', text: 'query ↓ key →', 'aria-hidden': 'true' }),
      ...kl.map((k) => label(k, 'mask-key')),
      ...ql.flatMap((q, i) => [label(q, 'mask-query'), ...cells.slice(i * lk, (i + 1) * lk)]),
    );
  }

  /**
   * The variants' options from their fields. Query i sits at position i + offset (0 top-left
   * causal, else Lk − Lq, as the library places it) and key j at j; documents split the
   * positions 0, 1, … into runs of the given lengths (the last run continues to the end).
   */
  function variantOptions(lq: number, lk: number, offset: number): AttentionOptions {
    const o: AttentionOptions = {};
    const num = (input: HTMLInputElement, name: string) => {
      if (input.value.trim() === '') return undefined;
      const n = Number(input.value);
      if (!Number.isFinite(n)) throw new RangeError(`${name} must be a number; got ${input.value}`);
      return n;
    };
    const softcap = num(softcapIn, 'softcap');
    if (softcap !== undefined) o.softcap = softcap;
    const left = num(winLeftIn, 'window.left'), right = num(winRightIn, 'window.right');
    if (left !== undefined || right !== undefined) o.window = { ...(left !== undefined ? { left } : {}), ...(right !== undefined ? { right } : {}) };
    const slope = num(alibiIn, 'ALiBi slope');
    if (slope !== undefined) o.alibiSlopes = new Float32Array([slope]);
    const sink = num(sinkIn, 'sink');
    if (sink !== undefined) o.sinks = new Float32Array([sink]);
    const lengths = docsIn.value.split(',').map((x) => x.trim()).filter(Boolean).map(Number);
    if (lengths.length) {
      if (lengths.some((n) => !(Number.isInteger(n) && n > 0))) throw new RangeError(`document lengths must be positive integers; got ${docsIn.value}`);
      const idOf = (position: number) => {
        let end = 0;
        for (let d = 0; d < lengths.length; d++) if (position < (end += lengths[d]!)) return d;
        return lengths.length - 1;
      };
      o.queryDocuments = { data: Int32Array.from({ length: lq }, (_, i) => idOf(Math.max(0, offset + i))), shape: [1, lq] };
      o.keyDocuments = { data: Int32Array.from({ length: lk }, (_, j) => idOf(j)), shape: [1, lk] };
    }
    return o;
  }

  /**
   * Which key tiles the library's SIMD kernel reads with these options, on a 512-token call
   * (the playground's matrices fit one tile): its tile map, from traceOnlineSoftmax.
   */
  function tileMapView(inst: Attention, o: AttentionOptions): HTMLElement {
    const L = 512;
    const x = inst.randomUniform([1, 1, L, 8], 1);
    const wide: AttentionOptions = { ...o, scale: undefined, attnMask: undefined, ...variantOptions(L, L, 0) };
    if (o.isCausal === 'bottom-right') wide.isCausal = 'bottom-right';
    const { tileMap } = inst.traceOnlineSoftmax(x, x, x, { ...wide, row: 0 });
    const [blocks, tiles] = tileMap.shape;
    const read = tileMap.visited.reduce((a, b) => a + b, 0);
    const view = {
      name: `Key tiles the SIMD kernel reads: ${read} of ${blocks * tiles}`,
      tensor: { data: Float32Array.from(tileMap.visited), shape: [blocks, tiles] },
      rowLabels: Array.from({ length: blocks }, (_, b) => `rows ${b * tileMap.blockRows}–${(b + 1) * tileMap.blockRows - 1}`),
      colLabels: Array.from({ length: tiles }, (_, t) => `${t * tileMap.tileKeys}`),
      rowAxis: `query block (${tileMap.blockRows} rows)`,
      colAxis: `key tile (${tileMap.tileKeys} keys)`,
      kind: 'mask' as const,
    };
    return el('div', { class: 'view', id: 'pg-tiles', 'data-read': String(read) },
      heatmap(view, { decimals: 0 }),
      el('p', { class: 'note', text: `The same options (window, documents, causal) on a ${L}-token call: a bright cell (may attend) is a block of ${tileMap.blockRows} queries reading a tile of ${tileMap.tileKeys} keys; dark cells (hidden: every key of the tile masked for those queries) are never read, so their cost is never paid (a window of w costs about Lq·w, not Lq·Lk).` }));
  }

  function describeVariants(o: AttentionOptions): string[] {
    const parts: string[] = [];
    if (o.softcap) parts.push(`softcap ${o.softcap}`);
    if (o.window) parts.push(`window ${o.window.left ?? '∞'} left, ${o.window.right ?? '∞'} right`);
    if (o.alibiSlopes) parts.push(`ALiBi m = ${o.alibiSlopes[0]}`);
    if (o.sinks) parts.push(`sink ${o.sinks[0]}`);
    if (o.queryDocuments) parts.push(`documents ${docsIn.value}`);
    return parts;
  }

  function syncVisibility(): void {
    const x = mode.value === 'x';
    for (const m of MATS) areaLabels[m].hidden = x ? ['q', 'k', 'v'].includes(m) : !['q', 'k', 'v'].includes(m);
    randomRow.hidden = x;
    tokK.disabled = x;
    (document.getElementById('pg-keylen-label') as HTMLElement).hidden = maskSel.value !== 'padding';
    tempOut.textContent = `T = ${(10 ** Number(temp.value)).toFixed(2)}`;
  }

  /** The edited matrices as URL parameters, or none when their text would make a long link. */
  function urlMatrices(seeded: boolean): Record<string, string | null> {
    const kept = MATS.filter((m) => (mode.value === 'x') === ['x', 'wq', 'wk', 'wv'].includes(m) && areas[m].value.trim() !== DEFAULTS[m] && !(seeded && ['q', 'k', 'v'].includes(m)));
    const encoded = Object.fromEntries(kept.map((m) => [m, urlMat(areas[m].value)]));
    const small = Object.values(encoded).reduce((a, t) => a + t.length, 0) <= MAX_URL_MATRIX_CHARS;
    limitNote.dataset.inUrl = String(small);
    return Object.fromEntries(MATS.map((m) => [`p${m}`, small && m in encoded ? encoded[m]! : null]));
  }

  /**
   * Draw `pieces` into the results in order, each replacing its previous drawing, one per task with a
   * paint between; false when a newer recompute (version) took over meanwhile.
   */
  async function drawPieces(pieces: Piece[], my: number): Promise<boolean> {
    let last: { results: Element; views: Element | null } = { results: progress, views: null };
    for (const [n, piece] of pieces.entries()) {
      progress.textContent = `Drawing ${piece.what} (${n + 1} of ${pieces.length})…`;
      const node = piece.draw();
      node.id = piece.id;
      results.querySelector(`#${piece.id}`)?.remove();
      if (piece.inside) document.getElementById(piece.inside)!.append(node);
      else if (piece.inViews) {
        if (last.views) last.views.after(node);
        else {
          last.results.after(views);
          last.results = views;
          views.prepend(node);
        }
        last.views = node;
      } else {
        last.results.after(node);
        last.results = node;
      }
      await afterPaint();
      if (my !== version) return false;
    }
    // What an earlier drawing showed and this one does not (X mode's projections).
    const drawn = new Set(pieces.map((p) => p.id));
    for (const c of [...results.children, ...views.children]) if (c !== progress && c !== views && !drawn.has(c.id)) c.remove();
    endDrawing();
    return true;
  }
  const endDrawing = () => {
    progress.textContent = '';
    results.removeAttribute('aria-busy');
  };

  /** Valid keys (padding mask): a whole number from 0 to Lk, or the reason beside the field. */
  const validKeys = (lk: number) => readWholeNumber(keyLen, 'Valid keys', 0, lk);

  async function recompute(): Promise<void> {
    syncVisibility();
    renderMaskGrid();
    const T = 10 ** Number(temp.value);
    const seeded = mode.value === 'qkv' && !!random && (['q', 'k', 'v'] as const).every((m) => areas[m].value === random!.text[m]);
    setParams({
      pmode: mode.value === 'qkv' ? null : mode.value, pscaled: scaled.checked ? null : '0', pT: Math.abs(T - 1) < 1e-9 ? null : T.toFixed(3), pmask: maskSel.value === 'none' ? null : maskSel.value,
      pkeylen: maskSel.value === 'padding' ? keyLen.value.trim() : null, pcells: maskSel.value === 'custom' ? customCells : null, pbackend: backendSel.value === 'auto' ? null : backendSel.value,
      ptq: tokQ.value || null, ptk: tokK.value || null,
      psoftcap: softcapIn.value || null, pwl: winLeftIn.value || null, pwr: winRightIn.value || null,
      palibi: alibiIn.value || null, psink: sinkIn.value || null, pdocs: docsIn.value.trim() || null,
      ...urlMatrices(seeded),
      prnd: seeded ? random!.key : null,
    });
    const my = ++version;
    // Busy from the start of the computation to the last piece drawn (or the error shown).
    results.setAttribute('aria-busy', 'true');
    try {
      error.textContent = '';
      MATS.forEach((m) => areas[m].removeAttribute('aria-invalid'));
      let q: Tensor, k: Tensor, v: Tensor;
      const parse = (m: MatName, n: string) => {
        try {
          return parseMatrix(areas[m].value, n);
        } catch (e) {
          areas[m].setAttribute('aria-invalid', 'true');
          throw e;
        }
      };
      const extra: [string, string, Tensor][] = [];
      if (mode.value === 'x') {
        const x = parse('x', 'X');
        q = attn.matmul(x, parse('wq', 'W_Q'));
        k = attn.matmul(x, parse('wk', 'W_K'));
        v = attn.matmul(x, parse('wv', 'W_V'));
        extra.push(['pg-xq', 'Q = XW_Q', q], ['pg-xk', 'K = XW_K', k], ['pg-xv', 'V = XW_V', v]);
      } else {
        q = parse('q', 'Q');
        k = parse('k', 'K');
        v = parse('v', 'V');
      }
      const lq = q.shape[0], lk = k.shape[0], dk = q.shape[1];
      ([[lqIn, lq], [lkIn, lk], [dkIn, dk], [dvIn, v.shape[1]]] as const).forEach(([input, n]) => {
        if (document.activeElement !== input && !input.hasAttribute('aria-invalid')) input.value = String(n);
      });
      let keys = lk;
      if (maskSel.value === 'padding') {
        const n = validKeys(lk);
        if (n === undefined) throw new RangeError(fieldMessage(keyLen).textContent ?? 'Valid keys');
        keys = n;
      } else fieldMessage(keyLen).textContent = '';
      const base = scaled.checked ? 1 / Math.sqrt(dk) : 1;
      const opts: AttentionOptions = { scale: base / T };
      if (maskSel.value === 'causal-tl') opts.isCausal = 'top-left';
      else if (maskSel.value === 'causal-br') opts.isCausal = 'bottom-right';
      else if (maskSel.value === 'padding' || maskSel.value === 'custom') {
        const d = new Uint8Array(lq * lk);
        for (let i = 0; i < lq; i++) for (let j = 0; j < lk; j++) d[i * lk + j] = maskSel.value === 'padding' ? Number(j < keys) : Number(customCells[i * lk + j] === '1');
        opts.attnMask = { data: d, shape: [lq, lk] };
      }
      Object.assign(opts, variantOptions(lq, lk, maskSel.value === 'causal-tl' ? 0 : lk - lq));
      // The selected backend computes the weights and the output (on 'webgpu' they arrive
      // asynchronously; the page never calls the CPU-only sync API); explain gives the masked scores.
      const inst = attn;
      const [st, res] = await Promise.all([inst.explain(q, k, v, opts), inst.scaledDotProductAttention(q, k, v, { ...opts, returnWeights: true })]);
      if (my !== version) return;
      st.weights = res.weights!;
      st.output = res.output;
      const ql = tokLabels(tokQ.value, 'q', lq);
      const kl = mode.value === 'x' ? ql : tokLabels(tokK.value, 'k', lk);
      const maskLabel = [maskSel.selectedOptions[0].textContent ?? '', ...describeVariants(opts)].filter((x) => x && x !== 'none').join(' + ') || 'none';
      const stages = attentionStages(st, { qLabels: ql, kLabels: kl, vDims: v.shape[1], scale: opts.scale!, dk, maskLabel, maskTex: 'M' });
      const weights = stages.find((s) => s.id === 'weights')!.views[0];
      const masked = stages.find((s) => s.id === 'masked')!.views[0];
      const output = stages.find((s) => s.id === 'output')!.views[0];
      const w = rowsOf(st.weights);
      const lbl = tokLabels(tokQ.value, 'x', lq);
      const statsTable = () => el('table', { class: 'data', id: 'pg-row-stats' }, el('thead', {}, el('tr', {}, ...([['query', 'query row'], ['max weight', 'the row’s largest weight'], ['entropy', 'entropy of the row’s weights, in nats'], ['of ln Lk', 'the entropy as a share of its largest possible value, ln Lk (uniform weights)'], ['status', 'status']] as const).map(([h, title]) => el('th', { scope: 'col', title, text: h })))), el('tbody', {}, ...w.map((r, i) => {
        const fm = isFullyMasked(r);
        return el('tr', fm ? { class: 'fully-masked' } : {}, el('th', { scope: 'row', text: ql[i] }), el('td', { text: fm ? '—' : fmt(maxOf(r), 3) }), el('td', { text: fm ? '—' : fmt(entropy(r), 3) }), el('td', { text: fm ? '—' : `${((100 * entropy(r)) / Math.log(lk || 1) || 0).toFixed(0)}%` }), el('td', { text: fm ? 'fully masked: every key is masked, all weights 0' : 'ok' }));
      })));
      const numbers = (what: string, open: boolean, table: () => HTMLElement) => el('details', { class: 'numbers', open }, el('summary', { text: `Numbers of ${what}` }), table());
      // The results are drawn a piece per task, each laid out and painted before the next is built,
      // so a large input never blocks the page for long; a note says how far the drawing is.
      const pieces: Piece[] = [
        { id: 'pg-summary', what: 'the summary', draw: () => el('p', { class: 'note', text: `Q [${lq} × ${dk}], K [${lk} × ${dk}], V [${lk} × ${v.shape[1]}] · scale ${+opts.scale!.toPrecision(4)} (${scaled.checked ? `1/√${dk}` : '1'} / T) · mask: ${maskLabel} · backend ${inst.backend}` }) },
        { id: 'pg-formula', what: 'the formula', draw: () => fitMath(tex(`A = \\operatorname{softmax}\\!\\left(\\frac{QK^{\\top} \\cdot ${scaled.checked ? `\\frac{1}{\\sqrt{${dk}}}` : '1'}}{T = ${T.toFixed(2)}} + M\\right),\\quad O = AV`, true)) },
        ...extra.map(([id, name, t]): Piece => ({ id, what: name, inViews: true, draw: () => el('div', { class: 'view' }, heatmap({ name, tensor: t, rowLabels: lbl, colLabels: seqLabels('d', t.shape[1]), rowAxis: 'token', colAxis: 'dimension', kind: 'signed' })) })),
        { id: 'pg-masked', what: 'the masked scores', inViews: true, draw: () => el('div', { class: 'view' }, heatmap(masked)) },
        { id: 'pg-weights', what: 'the weights', inViews: true, draw: () => el('div', { class: 'view' }, heatmap(weights)) },
        { id: 'pg-weights-numbers', what: 'the numbers of the weights', inside: 'pg-weights', draw: () => numbers('the weights', false, () => matrixTable(weights)) },
        { id: 'pg-stats', what: 'the row statistics', inViews: true, draw: () => el('div', { class: 'view' }, el('figcaption', { text: 'Per row: max weight and entropy' }), statsTable()) },
        { id: 'pg-output', what: 'the output', inViews: true, draw: () => el('div', { class: 'view' }, heatmap(output), numbers('the output', true, () => matrixTable(output))) },
        { id: 'pg-tiles', what: 'the key tiles read', inViews: true, draw: () => tileMapView(inst, opts) },
        { id: 'pg-pytorch-view', what: 'the PyTorch code', draw: () => el('details', {}, el('summary', { text: 'Copy this view as PyTorch' }), el('pre', { class: 'snippet', id: 'pg-pytorch' }, el('code', { text: pytorchAttention(q, k, v, { options: opts, title: 'sdpa-web playground' }) }))) },
      ];
      if (!(await drawPieces(pieces, my))) return;
      results.dataset.version = String(my);
      results.dataset.backend = inst.backend;
    } catch (e) {
      if (my !== version) return;
      endDrawing();
      error.textContent = e instanceof Error ? `${e.name === 'Error' ? '' : `${e.name}: `}${e.message}` : String(e);
      results.dataset.version = String(my);
    }
  }

  // Random inputs live in the URL as their seed and shapes (prnd=seed:Lq,Lk,d_k,d_v), not as numbers:
  // the same seed draws the same matrices again. An edit of Q, K or V afterwards stores the numbers.
  let random: { key: string; text: Record<'q' | 'k' | 'v', string> } | undefined;
  const drawRandom = (seed: number, lq: number, lk: number, dk: number, dv: number) => {
    const nrm = normalSampler(uniformStream(app.attn, seed));
    const mk = (r: number, c: number) => matText({ data: Float32Array.from({ length: r * c }, () => nrm()), shape: [r, c] });
    areas.q.value = mk(lq, dk);
    areas.k.value = mk(lk, dk);
    areas.v.value = mk(lk, dv);
    random = { key: `${seed}:${lq},${lk},${dk},${dv}`, text: { q: areas.q.value, k: areas.k.value, v: areas.v.value } };
  };
  const fromUrl = /^(\d+):(\d+),(\d+),(\d+),(\d+)$/.exec(getParam('prnd') ?? '');
  if (fromUrl) {
    const [seed, lq, lk, dk, dv] = fromUrl.slice(1).map(Number);
    const ok = [[lq, lqIn], [lk, lkIn], [dk, dkIn], [dv, dvIn]].every(([n, input]) => (n as number) >= 1 && (n as number) <= Number((input as HTMLInputElement).max));
    if (ok) drawRandom(seed, lq, lk, dk, dv);
  }
  /** The four shape fields, each a whole number within its limit (else its message shows), or undefined. */
  const readSizes = () => {
    const sizes = sizeFields.map(([input, name, max]) => readWholeNumber(input, name, 1, max));
    return sizes.every((n) => n !== undefined) ? (sizes as number[]) : undefined;
  };
  rnd.addEventListener('click', () => {
    const sizes = readSizes();
    if (!sizes) return;
    drawRandom(Math.floor(Math.random() * 1e9), ...(sizes as [number, number, number, number]));
    void recompute();
  });
  // A changed shape draws random matrices of that shape at once (the current seed, when there is one).
  for (const [input] of sizeFields) input.addEventListener('change', () => {
    const sizes = readSizes();
    if (!sizes) return;
    const seed = random ? Number(random.key.split(':')[0]) : Math.floor(Math.random() * 1e9);
    drawRandom(seed, ...(sizes as [number, number, number, number]));
    void recompute();
  });
  backendSel.addEventListener('change', async () => {
    try {
      const next = backendSel.value === 'auto' ? app.attn : await app.create(backendSel.value as BackendName);
      if (attn !== app.attn && attn !== next) attn.dispose();
      attn = next;
      describeBackends();
    } catch (e) {
      backendNote.textContent = `Could not start ${backendSel.value}: ${e instanceof Error ? e.message : String(e)}. Still computing with ${attn.backend}.`;
      backendSel.value = attn === app.attn ? 'auto' : attn.backend;
    }
    void recompute();
  });
  let timer: number | undefined;
  const debounced = () => {
    clearTimeout(timer);
    timer = window.setTimeout(() => void recompute(), 200);
  };
  for (const m of MATS) areas[m].addEventListener('input', debounced);
  for (const c of [tokQ, tokK, keyLen, softcapIn, winLeftIn, winRightIn, alibiIn, sinkIn, docsIn]) c.addEventListener('input', debounced);
  temp.addEventListener('input', () => {
    tempOut.textContent = `T = ${(10 ** Number(temp.value)).toFixed(2)}`;
    debounced();
  });
  for (const c of [mode, scaled, maskSel]) c.addEventListener('change', () => void recompute());

  // "Edit in the playground" from a worked example.
  document.addEventListener('sdpa:playground-load', (e) => {
    const d = (e as CustomEvent<PlaygroundLoad>).detail;
    mode.value = d.mode;
    for (const [m, t] of Object.entries(d.matrices) as [MatName, Tensor][]) areas[m].value = matText(t, 7);
    tokQ.value = d.queryTokens.join(', ');
    tokK.value = d.keyTokens.join(', ');
    scaled.checked = true;
    temp.value = '0';
    maskSel.value = d.mask ?? 'none';
    if (d.validKeys !== undefined) keyLen.value = String(d.validKeys);
    void recompute();
    sec.scrollIntoView({ behavior: 'smooth', block: 'start' });
  });

  (async () => {
    if (backendSel.value !== 'auto') {
      attn = await app.create(backendSel.value as BackendName).catch((e: unknown) => {
        app.error('playground', e);
        backendSel.value = 'auto';
        return app.attn;
      });
    }
    describeBackends();
    await recompute();
  })().catch((e) => app.error('playground', e));
}

/** One piece of the playground's results: drawn in a task of its own, into the results, their views or the element `inside`. */
interface Piece {
  id: string;
  /** What it shows, for the progress note. */
  what: string;
  inViews?: boolean;
  inside?: string;
  draw(): HTMLElement;
}

/** What a worked example hands to the playground. */
export interface PlaygroundLoad {
  mode: Mode;
  matrices: Partial<Record<MatName, Tensor>>;
  queryTokens: string[];
  keyTokens: string[];
  mask?: MaskKind;
  validKeys?: number;
}

function tokLabels(text: string, prefix: string, n: number): string[] {
  const t = text.split(',').map((s) => s.trim()).filter(Boolean);
  return Array.from({ length: n }, (_, i) => t[i] ?? `${prefix}${i + 1}`);
}
