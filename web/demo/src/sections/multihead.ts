// Section 5: several heads side by side on a short sentence (seeded Xavier projections), GQA's head → KV
// mapping, and top-left vs bottom-right causal masks when Lq ≠ Lk.
import * as Plot from '@observablehq/plot';
import type { AttentionOptions, AttentionStages, Tensor } from 'sdpa-web';
import { normalSampler, randomMatrix, uniformStream, type UniformSource } from '../../../examples/worked-examples';
import { getParam, setParams, type App } from '../lib/app';
import { readWholeNumber } from '../lib/fields';
import { heatmap, renderPlot } from '../lib/plots';
import { el, rowsOf, slice0, tensor, type NumTensor } from '../lib/tensors';

const D_MODEL = 16;
/** The heads' colours: CSS variables with a light and a dark value each (style.css). */
const HEAD_COLORS = Array.from({ length: 8 }, (_, i) => `var(--head-${i + 1})`);

function hash(s: string): number {
  let h = 2166136261;
  for (const c of s) h = Math.imul(h ^ c.charCodeAt(0), 16777619);
  return h >>> 0;
}

/** Token embeddings: a seeded N(0,1) vector per distinct word plus a sinusoidal position code. */
function embed(source: UniformSource, tokens: string[], seed: number): Tensor {
  const d = new Float32Array(tokens.length * D_MODEL);
  tokens.forEach((t, i) => {
    const nrm = normalSampler(uniformStream(source, hash(t.toLowerCase()) ^ seed));
    for (let j = 0; j < D_MODEL; j++) {
      const f = 1 / 10000 ** ((2 * Math.floor(j / 2)) / D_MODEL);
      d[i * D_MODEL + j] = nrm() + (j % 2 ? Math.cos(i * f) : Math.sin(i * f));
    }
  });
  return { data: d, shape: [tokens.length, D_MODEL] };
}

/** [L, H·dh] → [1, H, L, dh] (a data shuffle). */
function splitHeads(t: Tensor, h: number): Tensor {
  const [l, hd] = t.shape;
  const dh = hd / h;
  const out = new Float32Array(t.data.length);
  for (let i = 0; i < l; i++) for (let hh = 0; hh < h; hh++) for (let e = 0; e < dh; e++) out[(hh * l + i) * dh + e] = t.data[i * hd + hh * dh + e];
  return { data: out, shape: [1, h, l, dh] };
}

function headView(w: NumTensor, tokens: string[], color: string, title: string): Element {
  // Opacity relative to the row's largest weight (each query's strongest line fully drawn), width absolute.
  const links = rowsOf(w).flatMap((r, i) => {
    const top = Math.max(...r) || 1;
    return r.map((v, j) => ({ i, j, v, share: v / top }));
  });
  const ys = tokens.map((_, i) => i);
  return renderPlot({
    title,
    width: 220,
    height: 40 + tokens.length * 24,
    marginLeft: 8,
    marginRight: 8,
    style: { background: 'transparent', fontSize: '12px' },
    x: { domain: [0, 1], axis: null },
    y: { domain: ys, axis: null, reverse: false },
    marks: [
      Plot.link(links, { x1: 0.3, y1: 'i', x2: 0.7, y2: 'j', stroke: color, strokeOpacity: (d: { share: number }) => 0.15 + 0.85 * d.share, strokeWidth: (d: { v: number }) => 0.5 + 3 * d.v }),
      Plot.text(ys, { x: 0.28, y: (i: number) => i, text: (i: number) => tokens[i], textAnchor: 'end' }),
      Plot.text(ys, { x: 0.72, y: (i: number) => i, text: (i: number) => tokens[i], textAnchor: 'start' }),
    ],
  });
}

function gqaMap(h: number, hkv: number): Element {
  const g = h / hkv;
  const q = Array.from({ length: h }, (_, i) => ({ i, kv: Math.floor(i / g) }));
  const kvx = (j: number) => (j + 0.5) * (h / hkv) - 0.5;
  return renderPlot({
    width: Math.max(320, 70 * h),
    height: 150,
    marginLeft: 90,
    style: { background: 'transparent', fontSize: '12px' },
    x: { domain: [-0.6, h - 0.4], axis: null },
    y: { domain: ['query heads', 'K/V heads'], label: null, axis: 'left' },
    marks: [
      Plot.link(q, { x1: 'i', y1: () => 'query heads', x2: (d: { kv: number }) => kvx(d.kv), y2: () => 'K/V heads', stroke: (d: { i: number }) => HEAD_COLORS[d.i % 8], strokeWidth: 2, markerEnd: 'arrow' }),
      Plot.dot(q, { x: 'i', y: () => 'query heads', r: 12, fill: (d: { i: number }) => HEAD_COLORS[d.i % 8] }),
      Plot.text(q, { x: 'i', y: () => 'query heads', text: (d: { i: number }) => `Q${d.i + 1}`, fill: 'var(--bg)', fontWeight: 'bold' }),
      Plot.dot(Array.from({ length: hkv }, (_, j) => j), { x: kvx, y: () => 'K/V heads', r: 14, fill: 'var(--masked-cell)' }),
      Plot.text(Array.from({ length: hkv }, (_, j) => j), { x: kvx, y: () => 'K/V heads', text: (j: number) => `KV${j + 1}`, fontWeight: 'bold' }),
    ],
  });
}

const DEFAULT_SENTENCE = 'the cat sat on the mat';
/** The longest sentence drawn (the head views stay legible); longer ones are cut, and the page says so. */
const MAX_WORDS = 12;
const MAX_SEED = 2 ** 31 - 1;

export function mountMultihead(app: App): void {
  const sec = document.getElementById('multihead')!;
  sec.append(el('p', { text: 'A short sentence with seeded random word embeddings (plus a sinusoidal position code) and Xavier-initialised projections W_Q, W_K, W_V (seeded: the same seed gives the same heads). All heads run in one sdpa-web call on [1, H, L, d_head] tensors; with fewer K/V heads than query heads it is grouped-query attention (enableGqa).' }));
  const sentence = el('input', { type: 'text', id: 'mh-sentence', size: 36, value: getParam('mhs') ?? DEFAULT_SENTENCE });
  const heads = el('select', { id: 'mh-heads' }, ...[1, 2, 4, 8].map((n) => el('option', { value: String(n), text: String(n) })));
  heads.value = getParam('mhh') ?? '4';
  const kvHeads = el('select', { id: 'mh-kv' });
  const seedParam = Number(getParam('mhseed') ?? 42);
  const seed = el('input', { type: 'number', id: 'mh-seed', value: Number.isInteger(seedParam) && seedParam >= 0 && seedParam <= MAX_SEED ? seedParam : 42, min: 0, max: MAX_SEED, step: 1 });
  const causal = el('input', { type: 'checkbox', id: 'mh-causal', checked: getParam('mhc') === '1' });
  const out = el('div', { id: 'mh-out' });
  const overlay = el('div', { id: 'mh-causal-overlay' });
  sec.append(
    el('div', { class: 'controls' }, el('label', {}, 'Sentence', sentence), el('label', {}, 'Query heads', heads), el('label', {}, 'K/V heads (GQA)', kvHeads), el('label', {}, 'Seed', seed), el('label', {}, el('span', {}, causal, ' causal mask'))),
    out,
    el('h3', { text: 'Causal masks when Lq ≠ Lk: top-left vs bottom-right' }),
    el('p', { text: 'With 3 queries (the last three tokens, as when decoding with a cache) and all keys, the two conventions differ: top-left (PyTorch’s is_causal=True) lets query i see keys 0…i; bottom-right aligns the last query with the last key, so query i sees keys 0…i + (Lk − Lq). Grey cells are masked (−∞ before the softmax, weight 0 after).' }),
    overlay,
  );

  function fillKv(): void {
    const h = Number(heads.value);
    const keep = kvHeads.value || getParam('mhkv') || String(Math.max(1, h / 2));
    kvHeads.replaceChildren(...[1, 2, 4, 8].filter((k) => k <= h && h % k === 0).map((k) => el('option', { value: String(k), text: k === h ? `${k} (standard MHA)` : k === 1 ? '1 (multi-query)' : `${k} (GQA)` })));
    kvHeads.value = [...kvHeads.options].some((o) => o.value === keep) ? keep : String(h);
  }

  async function draw(): Promise<void> {
    try {
      const words = sentence.value.trim().split(/\s+/).filter(Boolean);
      const tokens = words.slice(0, MAX_WORDS);
      if (tokens.length < 2) throw new RangeError('type at least two words');
      const seedValue = readWholeNumber(seed, 'Seed', 0, MAX_SEED);
      if (seedValue === undefined) return;
      const h = Number(heads.value), hkv = Number(kvHeads.value), s = seedValue;
      // Only what differs from the defaults goes into the URL.
      setParams({ mhs: sentence.value === DEFAULT_SENTENCE ? null : sentence.value, mhh: heads.value === '4' ? null : heads.value, mhkv: hkv === Math.max(1, h / 2) ? null : kvHeads.value, mhseed: seed.value === '42' ? null : seed.value, mhc: causal.checked ? '1' : null });
      const dh = D_MODEL / h;
      const x = embed(app.attn, tokens, s);
      const w = (n: number, out: number) => tensor(randomMatrix({ random: true, shape: [D_MODEL, out], seed: s * 31 + n, dist: 'xavier-uniform' }, app.attn).data, [D_MODEL, out]);
      const q = splitHeads(app.attn.matmul(x, w(1, h * dh)), h);
      const k = splitHeads(app.attn.matmul(x, w(2, hkv * dh)), hkv);
      const v = splitHeads(app.attn.matmul(x, w(3, hkv * dh)), hkv);
      const opts: AttentionOptions = { enableGqa: hkv !== h, ...(causal.checked ? { isCausal: 'top-left' as const } : {}) };
      const st: AttentionStages = await app.attn.explain(q, k, v, opts);
      const w0 = slice0(st.weights, 0);
      const kvOf = (i: number) => Math.floor(i / (h / hkv));
      const headTitle = (i: number) => `Head ${i + 1}${hkv !== h ? ` → KV ${kvOf(i) + 1}` : ''}`;
      // Every head as a small heatmap in a grid (a button: it opens that head below), then the chosen head in full.
      const chosen = Math.min(h, Math.max(1, Number(getParam('mhsel') ?? 1) || 1)) - 1;
      const cards = Array.from({ length: h }, (_, i) => {
        const card = el('button', { type: 'button', class: 'head-card', 'data-head': String(i + 1), 'aria-pressed': String(i === chosen), 'aria-label': `${headTitle(i)}: show this head in full` },
          el('span', { class: 'head-title', style: `--head: ${HEAD_COLORS[i % 8]}`, text: headTitle(i) }),
          heatmap({ name: `head ${i + 1}`, tensor: slice0(w0, i), rowLabels: tokens, colLabels: tokens, rowAxis: 'query', colAxis: 'key', kind: 'weights' }, { numbers: false, legend: false, cell: 22 }));
        card.addEventListener('click', () => {
          setParams({ mhsel: i === 0 ? null : String(i + 1) });
          for (const c of grid.children) c.setAttribute('aria-pressed', String(c === card));
          showHead(i);
        });
        return card;
      });
      const grid = el('div', { class: 'head-grid', 'data-testid': 'head-view' }, ...cards);
      const detail = el('div', { class: 'views', id: 'mh-detail' });
      const showHead = (i: number) => {
        const wi = slice0(w0, i);
        detail.replaceChildren(
          el('div', { class: 'view', 'data-detail-head': String(i + 1) }, headView(wi, tokens, HEAD_COLORS[i % 8], headTitle(i))),
          el('div', { class: 'view' }, heatmap({ name: `head ${i + 1} weights`, tensor: wi, rowLabels: tokens, colLabels: tokens, rowAxis: 'query', colAxis: 'key', kind: 'weights' }, { decimals: 2 })),
        );
      };
      showHead(chosen);
      out.replaceChildren(
        words.length > MAX_WORDS ? el('p', { class: 'note', id: 'mh-cut', text: `Only the first ${MAX_WORDS} words of your ${words.length} are used (the head views stay legible): “${tokens.join(' ')}”.` }) : '',
        el('p', { class: 'note', text: `X [${tokens.length} × ${D_MODEL}] → Q [1, ${h}, ${tokens.length}, ${dh}], K and V [1, ${hkv}, ${tokens.length}, ${dh}]; ${hkv === h ? 'standard multi-head attention' : `grouped-query attention: each K/V head serves ${h / hkv} query heads`}. Each small map is one head’s weights (rows: queries, columns: keys); pick one to see it in full. Head view: queries on the left, keys on the right; line opacity and width = attention weight.` }),
        el('figure', { class: 'gqa-map' }, el('figcaption', { text: 'Head → K/V head mapping' }), gqaMap(h, hkv)),
        grid,
        detail,
      );
      // Causal overlays for Lq ≠ Lk, on head 1's projections.
      const lk = tokens.length;
      const lq = Math.min(3, lk - 1);
      const qh = slice0(slice0(q, 0), 0), kh = slice0(slice0(k, 0), 0), vh = slice0(slice0(v, 0), 0);
      const qLast = tensor(Array.from(qh.data).slice((lk - lq) * dh), [lq, dh]);
      const kk = tensor(kh.data, [lk, dh]), vv = tensor(vh.data, [lk, dh]);
      const views: HTMLElement[] = [];
      for (const align of ['top-left', 'bottom-right'] as const) {
        const r = await app.attn.explain(qLast, kk, vv, { isCausal: align });
        const ql = tokens.slice(lk - lq);
        views.push(el('div', { class: 'view', 'data-align': align },
          heatmap({ name: `${align}: masked scores`, tensor: r.maskedScores, rowLabels: ql, colLabels: tokens, rowAxis: 'query', colAxis: 'key', kind: 'signed' }, { decimals: 2 }),
          heatmap({ name: `${align}: weights`, tensor: r.weights, rowLabels: ql, colLabels: tokens, rowAxis: 'query', colAxis: 'key', kind: 'weights', maskedRows: rowsOf(r.weights).flatMap((row, i) => (row.every((x) => x === 0) ? [i] : [])) }, { decimals: 2 })));
      }
      overlay.replaceChildren(el('div', { class: 'views' }, ...views));
      sec.dataset.version = String(Number(sec.dataset.version ?? 0) + 1);
    } catch (e) {
      out.replaceChildren(el('p', { class: 'error-text', role: 'alert', text: e instanceof Error ? e.message : String(e) }));
    }
  }

  fillKv();
  heads.addEventListener('change', () => {
    fillKv();
    void draw();
  });
  for (const c of [kvHeads, seed, causal]) c.addEventListener('change', () => void draw());
  let t: number | undefined;
  sentence.addEventListener('input', () => {
    clearTimeout(t);
    t = window.setTimeout(() => void draw(), 300);
  });
  void draw();
}
