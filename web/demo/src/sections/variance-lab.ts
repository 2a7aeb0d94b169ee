// Variance lab: why the scores are divided by √d_k. For q, k with independent N(0, 1) entries,
// q·k = Σ q_i k_i is a sum of d_k terms of variance 1, so Var(q·k) = d_k. A d_k slider draws real
// queries and keys, the library computes the scores and one query's attention, and the page plots the
// variance itself (unscaled and scaled) against d_k.
import * as Plot from '@observablehq/plot';
import { renderPlot } from '../lib/plots';
import { getParam, setParams, type App } from '../lib/app';
import { rowSummary, VARIANCE_DKS, VARIANCE_KEYS, VARIANCE_SAMPLES, varianceAt, type VariancePoint } from '../lib/explainers';
import { fitMath, tex } from '../lib/katex';
import { el, fmt, nextFrame, seqLabels } from '../lib/tensors';

const DEFAULT_DK = 64;
const SERIES_UNSCALED = 'unscaled: Var(q·k)';
const SERIES_SCALED = 'scaled: Var(q·k/√d_k)';

export function mountVarianceLab(app: App): void {
  const sec = document.getElementById('variance')!;
  const fromUrl = Number(getParam('vdk'));
  const start = VARIANCE_DKS.includes(fromUrl) ? fromUrl : DEFAULT_DK;
  const slider = el('input', { type: 'range', id: 'var-dk', min: 0, max: VARIANCE_DKS.length - 1, step: 1, value: VARIANCE_DKS.indexOf(start), 'aria-label': 'd_k' });
  const dkOut = el('output', { for: 'var-dk', class: 'big', id: 'var-dk-out', text: `d_k = ${start}` });
  const numbers = el('div', { class: 'var-numbers', id: 'var-numbers', 'aria-live': 'polite' });
  const plot = el('div', { id: 'var-plot', class: 'view wide' });
  const bars = el('div', { id: 'var-bars', class: 'lab-pair' });
  sec.append(
    el('p', { text: `Take a query q and a key k whose ${'d_k'} entries are independent, with mean 0 and variance 1. Their dot product is a sum of d_k products, each with mean 0 and variance 1, so the variances add up:` }),
    fitMath(tex('\\begin{aligned} \\operatorname{Var}(q\\cdot k) &= \\sum_{i=1}^{d_k} \\operatorname{Var}(q_i k_i) = \\sum_{i=1}^{d_k} \\mathbb{E}[q_i^2]\\,\\mathbb{E}[k_i^2] = d_k, \\\\ \\operatorname{Var}\\!\\Big(\\frac{q\\cdot k}{\\sqrt{d_k}}\\Big) &= 1 \\end{aligned}', true)),
    el('p', { text: `Move d_k: the page draws ${VARIANCE_SAMPLES} queries and ${VARIANCE_SAMPLES} keys with N(0, 1) entries, sdpa-web computes the ${VARIANCE_SAMPLES}² scores, and the page measures their variance. Below, one query attends over ${VARIANCE_KEYS} keys: without the ÷√d_k its softmax turns one-hot as d_k grows.` }),
    el('div', { class: 'controls' }, el('label', {}, 'Key dimension d_k', slider), dkOut),
    numbers,
    plot,
    bars,
  );
  const points = new Map<number, VariancePoint>();
  let token = 0;

  async function show(dk: number): Promise<void> {
    const my = ++token;
    dkOut.textContent = `d_k = ${dk}`;
    setParams({ vdk: dk === DEFAULT_DK ? null : String(dk) });
    try {
      if (!points.has(dk)) points.set(dk, await varianceAt(app.attn, dk));
      if (my !== token) return;
      const p = points.get(dk)!;
      const u = rowSummary(p.weightsUnscaled), s = rowSummary(p.weightsScaled);
      numbers.replaceChildren(
        el('p', {}, el('span', { class: 'stat' }, 'Var(q·k) = ', el('strong', { 'data-testid': 'var-unscaled', 'data-v': String(p.varUnscaled), text: fmt(p.varUnscaled, 2) })), el('span', { class: 'note', text: ` (d_k = ${dk})` })),
        el('p', {}, el('span', { class: 'stat' }, 'Var(q·k / √d_k) = ', el('strong', { 'data-testid': 'var-scaled', 'data-v': String(p.varScaled), text: fmt(p.varScaled, 3) })), el('span', { class: 'note', text: ' (the target: 1)' })),
        el('p', { class: 'note', text: `One query over ${VARIANCE_KEYS} keys: max weight ${fmt(u.max, 3)} and entropy ${fmt(u.entropy, 2)} nats unscaled; ${fmt(s.max, 3)} and ${fmt(s.entropy, 2)} nats with ÷√d_k (uniform: ${fmt(Math.log(VARIANCE_KEYS), 2)}).` }),
      );
      drawPlot(dk);
      drawBars(p);
      sec.dataset.shown = String(dk);
    } catch (e) {
      app.error('variance lab', e);
    }
  }

  function drawPlot(current: number): void {
    const width = Math.max(300, plot.clientWidth - 24);
    // Series names are legend labels, never CSS: Plot reads a string starting with "var(" as a CSS variable.
    const pts = [...points.values()].sort((a, b) => a.dk - b.dk).flatMap((p) => [{ dk: p.dk, v: p.varUnscaled, series: SERIES_UNSCALED }, { dk: p.dk, v: p.varScaled, series: SERIES_SCALED }]);
    const ref = VARIANCE_DKS.flatMap((dk) => [{ dk, v: dk, series: 'reference d_k' }, { dk, v: 1, series: 'reference 1' }]);
    plot.replaceChildren(el('figure', { 'data-testid': 'var-plot' }, el('figcaption', { text: 'The variance of the scores against d_k (log–log): measured points on the line Var = d_k, and at 1 after ÷√d_k' }), renderPlot({
      width, height: Math.round(Math.min(340, Math.max(240, width * 0.45))), marginLeft: 56,
      style: { background: 'transparent', fontSize: '12px' },
      x: { type: 'log', base: 2, label: 'd_k (log scale)', grid: true, domain: [1, 1024] },
      y: { type: 'log', label: 'variance of the scores (log scale)', grid: true, domain: [0.3, 2000] },
      color: { legend: true, scheme: 'observable10', domain: [SERIES_UNSCALED, SERIES_SCALED, 'reference d_k', 'reference 1'] },
      marks: [
        Plot.line(ref, { x: 'dk', y: 'v', z: 'series', stroke: 'series', strokeDasharray: '5,4', strokeWidth: 1.5 }),
        Plot.dot(pts, { x: 'dk', y: 'v', fill: 'series', stroke: 'series', r: 4, tip: true }),
        Plot.ruleX([current], { strokeOpacity: 0.4 }),
      ],
    })));
  }

  function drawBars(p: VariancePoint): void {
    const width = Math.max(280, Math.min(520, bars.clientWidth >= 760 ? bars.clientWidth / 2 - 40 : bars.clientWidth - 24));
    const one = (title: string, w: number[], fill: string, id: string) =>
      el('figure', { class: 'view', 'data-testid': id }, el('figcaption', { text: title }), renderPlot({
        width, height: 220, marginLeft: 44,
        style: { background: 'transparent', fontSize: '12px' },
        x: { domain: seqLabels('k', VARIANCE_KEYS), label: 'key', tickRotate: 0 },
        y: { domain: [0, 1], label: 'weight', grid: true },
        marks: [Plot.barY(w.map((y, j) => ({ key: `k${j + 1}`, y })), { x: 'key', y: 'y', fill, tip: true }), Plot.ruleY([0])],
      }), el('p', { class: 'weights-row note', 'data-weights': JSON.stringify(w), text: w.map((x) => fmt(x, 3)).join('  ') }));
    bars.replaceChildren(
      one(`softmax(q·k): no scaling, d_k = ${p.dk}`, p.weightsUnscaled, '#e45756', 'var-weights-unscaled'),
      one(`softmax(q·k/√d_k): sdpa-web’s weights, d_k = ${p.dk}`, p.weightsScaled, '#4c78a8', 'var-weights-scaled'),
    );
  }

  slider.addEventListener('input', () => void show(VARIANCE_DKS[Number(slider.value)]));
  // The whole curve, one d_k at a time, then the reader's d_k.
  void (async () => {
    await show(start);
    for (const dk of VARIANCE_DKS) {
      if (points.has(dk)) continue;
      points.set(dk, await varianceAt(app.attn, dk));
      await nextFrame();
      drawPlot(VARIANCE_DKS[Number(slider.value)]);
    }
    sec.dataset.done = 'true';
  })().catch((e: unknown) => app.error('variance lab', e));
}
