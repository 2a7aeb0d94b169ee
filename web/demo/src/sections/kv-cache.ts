// The KV-cache explainer: the generation example's tiny decoder prefills a prompt, then generates a
// token per step. Each step computes one new query row per head; its key and value are appended to
// the layer's cache, and the row attends over everything cached (sdpa-web on the cache, in place).
// The page steps through the run: the weights grow by one row, the cache by one column.
import { intParam, setParams, type App } from '../lib/app';
import { cachedRows, headRow, KV_PROMPT, KV_TOKENS, kvCacheRun, type KvRun } from '../lib/kv-explainer';
import { el, fmt } from '../lib/tensors';

const SVG = 'http://www.w3.org/2000/svg';
const PLAY_MS = 650;

/** Viridis at t ∈ [0, 1] (the page's colour for weights), from nine stops. */
const VIRIDIS = ['#440154', '#472d7b', '#3b528b', '#2c728e', '#21918c', '#28ae80', '#5ec962', '#addc30', '#fde725'];
function viridis(t: number): string {
  const x = Math.min(1, Math.max(0, t)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(x));
  const mix = (a: string, b: string, f: number) => {
    const pa = [1, 3, 5].map((k) => parseInt(a.slice(k, k + 2), 16));
    const pb = [1, 3, 5].map((k) => parseInt(b.slice(k, k + 2), 16));
    return `rgb(${pa.map((c, j) => Math.round(c + (pb[j]! - c) * f)).join(' ')})`;
  };
  return mix(VIRIDIS[i]!, VIRIDIS[i + 1]!, x - i);
}

/** Blue (negative) to red (positive), for keys and values. */
function diverging(v: number, maxAbs: number): string {
  const t = Math.max(-1, Math.min(1, v / (maxAbs || 1)));
  return t < 0 ? `color-mix(in srgb, #2166ac ${Math.round(-t * 100)}%, var(--card))` : `color-mix(in srgb, #b2182b ${Math.round(t * 100)}%, var(--card))`;
}

function svg(tag: string, attrs: Record<string, string | number>): SVGElement {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

const show = (ch: string) => (ch === ' ' ? '␣' : ch);
const vec = (xs: number[], d = 3) => `(${xs.map((x) => fmt(x, d)).join(', ')})`;

export function mountKvCache(app: App): void {
  const sec = document.getElementById('kvcache')!;
  const body = el('div', { class: 'kv-body' }, el('p', { class: 'progress-text', text: 'Generating with sdpa-web…' }));
  sec.append(
    el('p', { text: 'A model that writes text calls attention once per new token. Without a cache, each step would recompute the keys and values of every earlier token. With a KV cache, each layer keeps them: a step projects only the new token, appends its key and value row to the cache, and attends with one new query row per head over everything cached.' }),
    el('p', { class: 'kv-untrained', text: 'The decoder is untrained: its weights are seeded random numbers, so the characters it writes are gibberish. What it shows is the mechanics — how the cache grows and what each new query attends to — not what a trained model would say.' }),
    el('p', { text: `Below, a tiny seeded decoder (the package’s generation example: ${2} layers, 4 query heads sharing 2 key/value heads, head size 8) reads the prompt “${KV_PROMPT}” in one call per layer (the prefill: every prompt row at once, causal), then generates ${KV_TOKENS} characters greedily, one step each. Every weight shown comes from sdpa-web’s call on the cache (attn.createKvCache, cache.append, then scaledDotProductAttention(query, cache, { isCausal: true, enableGqa: true })).` }),
    body,
  );

  void (async () => {
    let run: KvRun;
    try {
      run = await kvCacheRun(app.attn);
    } catch (e) {
      body.replaceChildren(el('p', { class: 'error-text', text: `The decoder could not run: ${e instanceof Error ? e.message : String(e)}` }));
      app.error('KV cache', e);
      return;
    }
    const { config } = run;
    const last = run.steps.length - 1;
    const group = config.heads / config.kvHeads;
    const e = config.dModel / config.heads;
    let step = intParam('kvs', (n) => n >= 0 && n <= last, 0);
    let layer = intParam('kvl', (n) => n >= 1 && n <= config.layers, 1) - 1;
    let head = intParam('kvh', (n) => n >= 1 && n <= config.heads, 1) - 1;

    const text = [...run.prompt, ...run.tokens].map((t) => config.vocab[t]!);
    const slider = el('input', { type: 'range', id: 'kv-step', min: 0, max: last, step: 1, value: step, 'aria-label': 'step' });
    const stepOut = el('output', { for: 'kv-step', id: 'kv-step-out' });
    const first = el('button', { type: 'button', id: 'kv-first', text: '« Prefill' });
    const back = el('button', { type: 'button', id: 'kv-back', text: '◀ Back', 'aria-label': 'previous step' });
    const next = el('button', { type: 'button', id: 'kv-next', class: 'primary', text: 'Step ▶', 'aria-label': 'next step' });
    const play = el('button', { type: 'button', id: 'kv-play', text: 'Play', 'aria-pressed': 'false' });
    const layerSelect = el('select', { id: 'kv-layer', 'aria-label': 'layer' }, ...Array.from({ length: config.layers }, (_, l) => el('option', { value: String(l), text: `layer ${l + 1}` })));
    const headSelect = el('select', { id: 'kv-head', 'aria-label': 'query head' }, ...Array.from({ length: config.heads }, (_, h) => el('option', { value: String(h), text: `head ${h + 1} (KV head ${Math.floor(h / group) + 1})` })));
    const strip = el('p', { class: 'kv-tokens', 'data-testid': 'kv-tokens', 'data-v': JSON.stringify(run.tokens), 'aria-live': 'polite' });
    const summary = el('p', { class: 'kv-summary' });
    const matrix = el('figure', { class: 'view kv-figure', 'data-testid': 'kv-matrix' });
    const numbers = el('div', { class: 'kv-numbers' });
    body.replaceChildren(
      el('div', { class: 'controls kv-controls' },
        el('div', { class: 'kv-buttons' }, first, back, next, play),
        el('label', {}, 'Step', slider),
        stepOut,
        el('label', {}, 'Layer', layerSelect),
        el('label', {}, 'Head', headSelect),
      ),
      strip,
      summary,
      matrix,
      numbers,
    );
    layerSelect.value = String(layer);
    headSelect.value = String(head);

    function draw(): void {
      const s = run.steps[step]!;
      const ev = s.layers[layer]!;
      const kvHead = Math.floor(head / group);
      const lastRow = s.rows - 1;
      const weights = headRow(ev.weights!, head, lastRow);
      const query = headRow(ev.query, head, lastRow);
      const output = headRow(ev.output, head, lastRow);
      slider.value = String(step);
      stepOut.textContent = step === 0 ? 'prefill' : `step ${step} of ${last}`;
      first.disabled = back.disabled = step === 0;
      next.disabled = step === last;
      setParams({ kvs: step === 0 ? null : String(step), kvl: layer === 0 ? null : String(layer + 1), kvh: head === 0 ? null : String(head + 1) });

      // The text: the prompt, the tokens generated so far, the one this step chose.
      const upTo = s.start + s.rows;
      strip.replaceChildren(...text.slice(0, upTo + 1).map((ch, i) => el('span', {
        class: `kv-tok${i < run.prompt.length ? ' prompt' : ''}${i >= s.start && i < upTo ? ' fed' : ''}${i === upTo ? ' chosen' : ''}`,
        title: i === upTo ? 'chosen by this step (greedy)' : i >= s.start && i < upTo ? 'this step’s input' : i < run.prompt.length ? 'prompt' : 'generated earlier',
        text: show(ch),
      })));

      const bytes = 2 * config.layers * config.kvHeads * s.cacheLength * e * 4;
      summary.replaceChildren(
        step === 0
          ? `Prefill: the ${s.rows} prompt tokens in one call per layer, ${s.rows} query rows per head, causal (row i sees keys 1…i). `
          : `Step ${step}: the token “${show(config.vocab[s.input]!)}” at position ${s.start + 1} is projected once; its key and value are appended, and its query row attends over all ${s.cacheLength} cached tokens. `,
        el('span', { 'data-testid': 'kv-length', 'data-v': String(s.cacheLength), text: `Each layer’s cache holds ${s.cacheLength} tokens` }),
        ` (${config.layers} layers × ${config.kvHeads} KV heads × keys and values × ${e} floats = ${(bytes / 1024).toFixed(1)} KiB). Next token: “${show(config.vocab[s.next]!)}”.`,
      );

      drawMatrix(kvHead);
      numbers.replaceChildren(
        el('h3', { text: step === 0 ? `The prefill’s last row, head ${head + 1}` : `This step’s new row, head ${head + 1}` }),
        el('p', {}, el('span', { class: 'stat' }, 'query q = ', el('strong', { 'data-testid': 'kv-query', 'data-v': JSON.stringify(query), text: vec(query) }))),
        el('p', { class: 'kv-caption', text: `Its weights over the ${s.cacheLength} cached tokens (they sum to 1):` }),
        el('div', { class: 'table-scroll' }, el('table', { class: 'data kv-row', 'data-testid': 'kv-weights', 'data-v': JSON.stringify(weights) },
          el('tbody', {},
            el('tr', {}, el('th', { scope: 'row', text: 'key' }), ...weights.map((_, j) => el('th', { scope: 'col', text: show(text[j]!) }))),
            el('tr', {}, el('th', { scope: 'row', text: 'weight' }), ...weights.map((w) => el('td', { text: fmt(w, 2), title: String(w) }))),
          ),
        )),
        el('p', {}, el('span', { class: 'stat' }, 'output o = Σ weight·v = ', el('strong', { 'data-testid': 'kv-output', 'data-v': JSON.stringify(output), text: vec(output) }))),
        el('p', { class: 'note', text: step === 0
          ? `At the prefill nothing is cached yet: each layer projects the ${s.rows} prompt tokens once, stores their keys and values, and computes ${s.rows} causal rows of weights per head. Every step after it reuses them.`
          : `Without the cache this step would project all ${upTo} tokens again in each layer and compute ${upTo} × ${s.cacheLength} weights per head; with it, one row of ${s.cacheLength}.` }),
      );
      sec.dataset.shown = `${step}:${layer}:${head}`;
    }

    /** Weights (rows = query positions so far, columns = cached keys), and the cache's keys and values of the KV head below, on the same columns. */
    function drawMatrix(kvHead: number): void {
      const total = run.steps[last]!.cacheLength;
      const s = run.steps[step]!;
      // The drawing shrinks to fit a phone: its labels are sized in drawing units so that they are
      // drawn at 11 px or more, and thinned out (every 2nd, 3rd … token) where cells get too small for them.
      const cell = 12, gap = 10;
      let font = 11.5, label = 16;
      for (let round = 0; round < 4; round++) {
        label = Math.ceil(font * 1.4);
        const natural = label + total * cell + 4;
        font = Math.max(11.5, 11.8 / Math.min(1, (matrix.clientWidth || natural) / natural));
      }
      const rowEvery = Math.ceil(font / cell), colEvery = Math.ceil((0.7 * font) / cell);
      const rowsShown = s.start + s.rows;
      const keys = cachedRows(run, layer, kvHead, step, 'key');
      const values = cachedRows(run, layer, kvHead, step, 'value');
      const maxAbs = Math.max(...keys.flat().map(Math.abs), ...values.flat().map(Math.abs));
      const height = label + total * cell + gap + 2 * (e * cell / 2 + gap + label);
      const width = label + total * cell + 4;
      const root = svg('svg', { viewBox: `0 0 ${width} ${height}`, width, style: `--kv-font: ${font.toFixed(1)}px`, role: 'img', 'aria-label': `Weights of head ${head + 1} in layer ${layer + 1} so far, and the cache of KV head ${kvHead + 1}` });
      // Column labels: the cached tokens (the space for later ones stays empty).
      for (let j = 0; j < s.cacheLength; j++) {
        if (j % colEvery) continue;
        const t = svg('text', { x: label + j * cell + cell / 2, y: label - 4, 'text-anchor': 'middle', class: 'kv-axis' });
        t.textContent = show(text[j]!);
        root.append(t);
      }
      // One row of weights per query position computed so far; this step's rows outlined.
      for (let i = 0; i < rowsShown; i++) {
        if (i % rowEvery === 0) {
          const rowLabel = svg('text', { x: label - 4, y: label + i * cell + cell - 2, 'text-anchor': 'end', class: 'kv-axis' });
          rowLabel.textContent = show(text[i]!);
          root.append(rowLabel);
        }
        const owner = run.steps.findIndex((st) => i >= st.start && i < st.start + st.rows);
        const ev = run.steps[owner]!.layers[layer]!;
        const row = headRow(ev.weights!, head, i - ev.start);
        const top = Math.max(...row);
        row.forEach((w, j) => {
          if (j > i) return;
          const r = svg('rect', { x: label + j * cell, y: label + i * cell, width: cell - 1, height: cell - 1, fill: viridis(w / top) });
          const tip = svg('title', {});
          tip.textContent = `query ${show(text[i]!)} (${i + 1}) → key ${show(text[j]!)} (${j + 1}): ${w.toPrecision(4)}`;
          r.append(tip);
          root.append(r);
        });
      }
      root.append(svg('rect', { x: label - 1, y: label + s.start * cell - 1, width: s.cacheLength * cell + 1, height: s.rows * cell + 1, class: 'kv-new' }));
      // Where the rows of the steps to come will go.
      if (rowsShown < total) root.append(svg('rect', { x: label, y: label + rowsShown * cell + 2, width: total * cell, height: (total - rowsShown) * cell - 2, class: 'kv-empty' }));
      // The cache: keys and values of the KV head, one column per token, the appended ones outlined.
      const strips: [string, number[][]][] = [['K', keys], ['V', values]];
      strips.forEach(([name, rows], k) => {
        const top = label + total * cell + gap + k * (e * cell / 2 + gap + label) + label;
        const cap = svg('text', { x: 0, y: top - 4, class: 'kv-axis' });
        cap.textContent = `${name} cache, KV head ${kvHead + 1}: ${rows.length} tokens × ${e}`;
        root.append(cap);
        rows.forEach((vecRow, j) => vecRow.forEach((v, d) => root.append(svg('rect', { x: label + j * cell, y: top + d * cell / 2, width: cell - 1, height: cell / 2, fill: diverging(v, maxAbs) }))));
        root.append(svg('rect', { x: label + (s.cacheLength - s.rows) * cell - 1, y: top - 1, width: s.rows * cell + 1, height: e * cell / 2 + 2, class: 'kv-new' }));
        root.append(svg('rect', { x: label + s.cacheLength * cell, y: top, width: (total - s.cacheLength) * cell, height: e * cell / 2, class: 'kv-empty' }));
      });
      matrix.replaceChildren(
        el('figcaption', { text: `Layer ${layer + 1}, head ${head + 1}: the weights so far, a row per query position (this step’s outlined; each row coloured from 0 to its largest weight), and below them the cache it read` }),
        root,
      );
    }

    let timer: ReturnType<typeof setInterval> | undefined;
    const stop = () => {
      if (timer !== undefined) clearInterval(timer);
      timer = undefined;
      play.textContent = 'Play';
      play.setAttribute('aria-pressed', 'false');
    };
    const go = (to: number) => {
      step = Math.max(0, Math.min(last, to));
      draw();
    };
    first.addEventListener('click', () => { stop(); go(0); });
    back.addEventListener('click', () => { stop(); go(step - 1); });
    next.addEventListener('click', () => { stop(); go(step + 1); });
    slider.addEventListener('input', () => { stop(); go(Number(slider.value)); });
    play.addEventListener('click', () => {
      if (timer !== undefined) return stop();
      if (step === last) go(0);
      play.textContent = 'Pause';
      play.setAttribute('aria-pressed', 'true');
      timer = setInterval(() => {
        go(step + 1);
        if (step === last) stop();
      }, PLAY_MS);
    });
    layerSelect.addEventListener('change', () => { layer = Number(layerSelect.value); draw(); });
    headSelect.addEventListener('change', () => { head = Number(headSelect.value); draw(); });
    draw();
  })();
}
