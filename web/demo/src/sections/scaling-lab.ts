// Section 4: the seeds' experiment, live. Random q, k ~ N(0,1) for d_k = 2 … 1024: score std unscaled vs
// scaled, mean max weight and entropy of the softmax rows, a histogram of scores, and a temperature slider.
import * as Plot from '@observablehq/plot';
import type { App } from '../lib/app';
import { randn, scoreStatsFor, type StatsRow } from '../lib/compute';
import { heatmap, linePlot } from '../lib/plots';
import { el, entropy, maxOf, stdOf, nextFrame, rowsOf, seqLabels, tensor } from '../lib/tensors';

const DKS = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];
const SEED = 7;

export function mountScalingLab(app: App): void {
  const sec = document.getElementById('scaling')!;
  sec.append(el('p', { text: 'For each d_k, draw n random queries and n random keys with N(0, 1) entries and let sdpa-web compute the scores and the softmax. Without scaling, the score std grows like √d_k and the softmax collapses to one-hot (max weight → 1, entropy → 0). Dividing by √d_k keeps the std at 1 and the weights soft.' }));
  const samples = el('select', { id: 'lab-samples' }, ...[32, 64, 128, 256, 1000].map((n) => el('option', { value: String(n), text: `${n} queries × ${n} keys` })));
  samples.value = '64';
  const runBtn = el('button', { type: 'button', class: 'primary', id: 'lab-run', text: 'Run experiment' });
  const progress = el('progress', { id: 'lab-progress', max: DKS.length, value: 0 });
  const progressText = el('span', { id: 'lab-progress-text', role: 'status', text: 'Not run yet.' });
  const dkSel = el('select', { id: 'lab-dk' }, ...DKS.map((d) => el('option', { value: String(d), text: `d_k = ${d}` })));
  dkSel.value = '512';
  const temp = el('input', { type: 'range', id: 'lab-temp', min: -1, max: 1, step: 0.05, value: 0 });
  const tempOut = el('output', { for: 'lab-temp', class: 'big', text: 'T = 1.00' });
  const plots = el('div', { class: 'small-multiples', id: 'lab-plots' });
  const hist = el('div', { id: 'lab-hist' });
  const tempPanel = el('div', { id: 'lab-temp-panel' });
  sec.append(
    el('div', { class: 'controls' }, el('label', {}, 'Sample size', samples), runBtn, el('div', {}, progress, ' ', progressText)),
    plots,
    el('div', { class: 'controls' }, el('label', {}, 'Histogram and temperature for', dkSel), el('label', {}, 'Temperature on top of ÷√d_k: softmax(QKᵀ / (√d_k · T))', temp, tempOut)),
    el('div', { class: 'views' }, hist, tempPanel),
  );

  let rows: StatsRow[] = [];
  let running = false;

  async function run(): Promise<void> {
    if (running) return;
    running = true;
    runBtn.disabled = true;
    rows = [];
    sec.dataset.done = '';
    const n = Number(samples.value);
    const t0 = performance.now();
    try {
      for (const [i, dk] of DKS.entries()) {
        progress.value = i;
        progressText.textContent = `d_k = ${dk} (${i + 1} of ${DKS.length})…`;
        await nextFrame();
        rows.push(await scoreStatsFor(app.attn, dk, n, SEED));
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
    }
  }

  function drawPlots(): void {
    const pts = (f: (r: StatsRow) => [string, number][]) => rows.flatMap((r) => f(r).map(([series, y]) => ({ x: r.dk, y, series })));
    plots.replaceChildren(
      el('figure', { class: 'view', 'data-testid': 'lab-std' }, el('figcaption', { text: 'Std of the scores: unscaled grows like √d_k, scaled stays at 1' }), linePlot({ kind: 'lines', title: '', xLabel: 'd_k (log scale)', yLabel: 'std of scores (log scale)', xLog: true, yLog: true, points: pts((r) => [['unscaled q·k', r.unscaledStd], ['scaled q·k/√d_k', r.scaledStd], ['reference √d_k', Math.sqrt(r.dk)], ['reference 1', 1]]) })),
      el('figure', { class: 'view' }, el('figcaption', { text: 'Mean max weight per softmax row' }), linePlot({ kind: 'lines', title: '', xLabel: 'd_k (log scale)', yLabel: 'mean max weight', xLog: true, points: pts((r) => [['unscaled', r.maxWeightUnscaled], ['scaled', r.maxWeightScaled], ['reference 1/n (uniform)', 1 / Number(samples.value)]]) })),
      el('figure', { class: 'view' }, el('figcaption', { text: 'Mean entropy per softmax row (nats)' }), linePlot({ kind: 'lines', title: '', xLabel: 'd_k (log scale)', yLabel: 'mean entropy (nats)', xLog: true, points: pts((r) => [['unscaled', r.entropyUnscaled], ['scaled', r.entropyScaled], ['reference ln n (uniform)', Math.log(Number(samples.value))]]) })),
    );
  }

  function drawHist(): void {
    const r = rows.find((x) => x.dk === Number(dkSel.value));
    if (!r) return;
    const one = (label: string, values: number[]) =>
      el('figure', { class: 'view', 'data-testid': 'lab-hist' }, el('figcaption', { text: `${label}, d_k = ${r.dk}: std ${stdOf(values).toFixed(2)}` }), Plot.plot({
        width: 420, height: 260, marginLeft: 50,
        style: { background: 'transparent', fontSize: '12px' },
        x: { label: `${label} →`, grid: true },
        y: { label: 'count', grid: true },
        marks: [Plot.rectY(values, Plot.binX({ y: 'count' }, { x: (v: number) => v, thresholds: 40, fill: label.startsWith('unscaled') ? '#e45756' : '#4c78a8' } as Parameters<typeof Plot.binX>[1])), Plot.ruleY([0])],
      }));
    const raw = Array.from(r.sampleScores);
    // The scaled scores come from the same sdpa-web run: scores × 1/√d_k.
    hist.replaceChildren(el('div', { class: 'views' }, one('unscaled scores q·k', raw), one('scaled scores q·k/√d_k', Array.from(r.sampleScaled))));
  }

  async function drawTemp(): Promise<void> {
    const dk = Number(dkSel.value);
    const T = 10 ** Number(temp.value);
    tempOut.textContent = `T = ${T.toFixed(2)}`;
    const n = Number(samples.value);
    const q = randn(app.attn, [n, dk], SEED * 7919 + dk);
    const k = randn(app.attn, [n, dk], SEED * 104729 + dk);
    const st = await app.attn.explain(q, k, tensor(new Float32Array(n), [n, 1]), { scale: 1 / (Math.sqrt(dk) * T) });
    const w = rowsOf(st.weights);
    const mMax = w.reduce((a, r) => a + maxOf(r), 0) / w.length;
    const mH = w.reduce((a, r) => a + entropy(r), 0) / w.length;
    const m = Math.min(10, n);
    const sub = tensor(w.slice(0, m).flatMap((r) => r.slice(0, m)), [m, m]);
    tempPanel.replaceChildren(el('div', { class: 'view' },
      el('p', { id: 'lab-temp-stats', text: `d_k = ${dk}, T = ${T.toFixed(2)}: mean max weight ${mMax.toFixed(3)}, mean entropy ${mH.toFixed(3)} nats (uniform: ${Math.log(n).toFixed(2)}).` }),
      heatmap({ name: `weights, first ${m} queries × ${m} of ${n} keys`, tensor: sub, rowLabels: seqLabels('q', m), colLabels: seqLabels('k', m), rowAxis: 'query', colAxis: 'key', kind: 'weights' }, { decimals: 2 }),
    ));
  }

  runBtn.addEventListener('click', () => void run());
  // Run once, with the default (small) sample size, when the section first scrolls into view.
  const seen = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting)) {
      seen.disconnect();
      if (!rows.length) void run();
    }
  });
  seen.observe(plots);
  dkSel.addEventListener('change', () => {
    drawHist();
    void drawTemp();
  });
  temp.addEventListener('input', () => void drawTemp());
}
