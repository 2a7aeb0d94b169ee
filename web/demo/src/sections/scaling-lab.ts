// Section 4: the seeds' experiment, live. Random q, k ~ N(0,1) for d_k = 2 … 1024: score std unscaled vs
// scaled, mean max weight and entropy of the softmax rows, a histogram of scores, and a temperature slider.
// The work runs in chunks of query rows between which the page paints its progress and takes input.
import * as Plot from '@observablehq/plot';
import type { Attention, Tensor } from 'sdpa-web';
import { getParam, setParams, type App } from '../lib/app';
import { randnInPieces, rowsPerChunk, scoreStatsFor, type StatsRow } from '../lib/compute';
import { heatmap, linePlot, renderPlot } from '../lib/plots';
import { el, entropy, maxOf, stdOf, nextFrame, rowsOf, seqLabels, tensor } from '../lib/tensors';

const DKS = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];
const SAMPLES = [32, 64, 128, 256, 1000];
const SEED = 7;
const DEFAULTS = { samples: '64', dk: '512', temp: '0' };


/**
 * Mean max weight and mean entropy of softmax(QKᵀ·scale) rows, and the first `m` rows' first `m`
 * weights, computed by sdpa-web in chunks of query rows; `stale()` stops it early (a newer request).
 */
async function weightStats(attn: Attention, q: Tensor, k: Tensor, scale: number, m: number, stale: () => boolean): Promise<{ meanMax: number; meanEntropy: number; corner: number[] } | undefined> {
  const [n, dk] = q.shape;
  const v = tensor(new Float32Array(n), [n, 1]);
  let sumMax = 0, sumH = 0;
  const corner: number[] = [];
  const step = rowsPerChunk(n, dk);
  for (let r0 = 0; r0 < n; r0 += step) {
    const r1 = Math.min(n, r0 + step);
    const st = await attn.explain({ data: q.data.subarray(r0 * dk, r1 * dk), shape: [r1 - r0, dk] }, k, v, { scale });
    rowsOf(st.weights).forEach((r, i) => {
      sumMax += maxOf(r);
      sumH += entropy(r);
      if (r0 + i < m) corner.push(...r.slice(0, m));
    });
    await nextFrame();
    if (stale()) return undefined;
  }
  return { meanMax: sumMax / n, meanEntropy: sumH / n, corner };
}

/** A heatmap cell small enough that m columns (and their labels) fit `width` px undistorted: its text is never scaled below its size. */
const cornerCell = (width: number, m: number) => Math.max(16, Math.min(46, Math.floor(((width || 360) - 110) / m)));

export function mountScalingLab(app: App): void {
  const sec = document.getElementById('scaling')!;
  sec.append(el('p', { text: 'For each d_k, draw n random queries and n random keys with N(0, 1) entries and let sdpa-web compute the scores and the softmax. Without scaling, the score std grows like √d_k and the softmax collapses to one-hot (max weight → 1, entropy → 0). Dividing by √d_k keeps the std at 1 and the weights soft.' }));
  const samples = el('select', { id: 'lab-samples', 'aria-label': 'Sample size' }, ...SAMPLES.map((n) => el('option', { value: String(n), text: `${n} queries × ${n} keys` })));
  samples.value = SAMPLES.map(String).includes(getParam('ls') ?? '') ? getParam('ls')! : DEFAULTS.samples;
  const runBtn = el('button', { type: 'button', class: 'primary', id: 'lab-run', text: 'Run experiment' });
  const progress = el('progress', { id: 'lab-progress', max: DKS.length, value: 0, 'aria-label': 'Experiment progress' });
  const progressText = el('span', { id: 'lab-progress-text', role: 'status', text: 'Not run yet.' });
  const dkSel = el('select', { id: 'lab-dk' }, ...DKS.map((d) => el('option', { value: String(d), text: `d_k = ${d}` })));
  dkSel.value = DKS.map(String).includes(getParam('ldk') ?? '') ? getParam('ldk')! : DEFAULTS.dk;
  const tempParam = Number(getParam('lT') ?? DEFAULTS.temp);
  const temp = el('input', { type: 'range', id: 'lab-temp', min: -1, max: 1, step: 0.05, value: Number.isFinite(tempParam) ? Math.max(-1, Math.min(1, tempParam)) : 0 });
  const tempOut = el('output', { for: 'lab-temp', class: 'big', text: `T = ${(10 ** Number(temp.value)).toFixed(2)}` });
  const plots = el('div', { class: 'lab-plots', id: 'lab-plots' });
  const hist = el('div', { id: 'lab-hist', class: 'lab-pair' });
  const tempPanel = el('div', { id: 'lab-temp-panel' });
  sec.append(
    el('div', { class: 'controls' }, el('label', {}, 'Sample size', samples), runBtn, el('div', { class: 'progress' }, progress, ' ', progressText)),
    plots,
    el('div', { class: 'controls' }, el('label', {}, 'Histogram and temperature for', dkSel), el('label', {}, 'Temperature on top of ÷√d_k: softmax(QKᵀ / (√d_k · T))', temp, tempOut)),
    hist,
    tempPanel,
  );

  let rows: StatsRow[] = [];
  let running = false;
  const writeUrl = () => setParams({ ls: samples.value === DEFAULTS.samples ? null : samples.value, ldk: dkSel.value === DEFAULTS.dk ? null : dkSel.value, lT: Number(temp.value) === 0 ? null : temp.value });

  async function run(): Promise<void> {
    if (running) return;
    running = true;
    runBtn.disabled = true;
    samples.disabled = true;
    rows = [];
    sec.dataset.done = '';
    const n = Number(samples.value);
    const t0 = performance.now();
    try {
      for (const [i, dk] of DKS.entries()) {
        progressText.textContent = `d_k = ${dk} (${i + 1} of ${DKS.length})…`;
        progress.value = i;
        await nextFrame();
        // Between chunks of query rows: show the progress and let the page take input.
        rows.push(await scoreStatsFor(app.attn, dk, n, SEED, async (done) => {
          progress.value = i + done;
          await nextFrame();
        }));
        drawPlots();
      }
      progress.value = DKS.length;
      progressText.textContent = `Done: ${DKS.length} values of d_k, ${n}×${n} scores each, in ${((performance.now() - t0) / 1000).toFixed(1)} s (sdpa-web’s explain, its float32 scalar reference, and its softmax).`;
      drawHist();
      await drawTemp();
      sec.dataset.done = 'true';
    } catch (e) {
      app.error('scaling lab', e);
      progressText.textContent = 'Failed (see the error above).';
    } finally {
      running = false;
      runBtn.disabled = false;
      samples.disabled = false;
    }
  }

  /** The std plot across the full width; max weight and entropy side by side below it (stacked on a phone). */
  function drawPlots(): void {
    if (!rows.length) return;
    const full = Math.max(300, plots.clientWidth - 24);
    const half = full >= 760 ? Math.floor((full - 16) / 2) - 24 : full;
    const n = Number(samples.value);
    const pts = (f: (r: StatsRow) => [string, number][]) => rows.flatMap((r) => f(r).map(([series, y]) => ({ x: r.dk, y, series })));
    plots.replaceChildren(
      el('figure', { class: 'view wide', 'data-testid': 'lab-std' }, el('figcaption', { text: 'Std of the scores: unscaled grows like √d_k, scaled stays at 1' }), linePlot({ kind: 'lines', title: '', xLabel: 'd_k (log scale)', yLabel: 'std of scores (log scale)', xLog: true, yLog: true, points: pts((r) => [['unscaled q·k', r.unscaledStd], ['scaled q·k/√d_k', r.scaledStd], ['reference √d_k', Math.sqrt(r.dk)], ['reference 1', 1]]) }, [], full)),
      el('div', { class: 'lab-pair' },
        el('figure', { class: 'view' }, el('figcaption', { text: 'Mean max weight per softmax row' }), linePlot({ kind: 'lines', title: '', xLabel: 'd_k (log scale)', yLabel: 'mean max weight', xLog: true, points: pts((r) => [['unscaled', r.maxWeightUnscaled], ['scaled', r.maxWeightScaled], ['reference 1/n (uniform)', 1 / n]]) }, [], half)),
        el('figure', { class: 'view' }, el('figcaption', { text: 'Mean entropy per softmax row (nats)' }), linePlot({ kind: 'lines', title: '', xLabel: 'd_k (log scale)', yLabel: 'mean entropy (nats)', xLog: true, points: pts((r) => [['unscaled', r.entropyUnscaled], ['scaled', r.entropyScaled], ['reference ln n (uniform)', Math.log(n)]]) }, [], half)),
      ),
    );
  }

  function drawHist(): void {
    const r = rows.find((x) => x.dk === Number(dkSel.value));
    if (!r) return;
    const full = Math.max(300, hist.clientWidth);
    const width = full >= 760 ? Math.floor((full - 16) / 2) - 24 : full - 24;
    const one = (label: string, values: number[]) =>
      el('figure', { class: 'view', 'data-testid': 'lab-hist' }, el('figcaption', { text: `${label}, d_k = ${r.dk}: std ${stdOf(values).toFixed(2)}` }), renderPlot({
        width, height: 260, marginLeft: 50,
        style: { background: 'transparent', fontSize: '12px' },
        x: { label: `${label} →`, grid: true },
        y: { label: 'count', grid: true },
        marks: [Plot.rectY(values, Plot.binX({ y: 'count' }, { x: (v: number) => v, thresholds: 40, fill: label.startsWith('unscaled') ? '#e45756' : '#4c78a8' } as Parameters<typeof Plot.binX>[1])), Plot.ruleY([0])],
      }));
    // The scaled scores come from the same sdpa-web run: scores × 1/√d_k.
    hist.replaceChildren(one('unscaled scores q·k', Array.from(r.sampleScores)), one('scaled scores q·k/√d_k', Array.from(r.sampleScaled)));
  }

  let tempToken = 0;
  async function drawTemp(): Promise<void> {
    const my = ++tempToken;
    const dk = Number(dkSel.value);
    const T = 10 ** Number(temp.value);
    tempOut.textContent = `T = ${T.toFixed(2)}`;
    const n = Number(samples.value);
    const q = await randnInPieces(app.attn, [n, dk], SEED * 7919 + dk, nextFrame);
    const k = await randnInPieces(app.attn, [n, dk], SEED * 104729 + dk, nextFrame);
    if (my !== tempToken) return;
    const m = Math.min(10, n);
    const stats = await weightStats(app.attn, q, k, 1 / (Math.sqrt(dk) * T), m, () => my !== tempToken);
    if (!stats) return;
    tempPanel.replaceChildren(el('div', { class: 'view' },
      el('p', { id: 'lab-temp-stats', text: `d_k = ${dk}, T = ${T.toFixed(2)}: mean max weight ${stats.meanMax.toFixed(3)}, mean entropy ${stats.meanEntropy.toFixed(3)} nats (uniform: ${Math.log(n).toFixed(2)}).` }),
      heatmap({ name: `weights, first ${m} queries × ${m} of ${n} keys`, tensor: tensor(stats.corner, [m, m]), rowLabels: seqLabels('q', m), colLabels: seqLabels('k', m), rowAxis: 'query', colAxis: 'key', kind: 'weights' }, { decimals: 2, numbers: tempPanel.clientWidth >= 480, cell: cornerCell(tempPanel.clientWidth, m) }),
    ));
  }

  runBtn.addEventListener('click', () => void run());
  samples.addEventListener('change', writeUrl);
  // The section runs once, with the chosen sample size, when its code loads (it is scrolled to).
  void run();
  new ResizeObserver(() => {
    if (!running) drawPlots();
  }).observe(plots);
  dkSel.addEventListener('change', () => {
    writeUrl();
    drawHist();
    void drawTemp();
  });
  temp.addEventListener('input', () => {
    writeUrl();
    void drawTemp();
  });
}
