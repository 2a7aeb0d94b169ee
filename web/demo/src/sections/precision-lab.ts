// Precision lab: the same inputs on every backend this browser can run (scalar, SIMD128, relaxed SIMD
// with fused multiply-adds, WebGPU), each output held against the library's float64 reference:
// the largest error, where in the output it sits, and the bound of the rule the tests use. Then how
// the error grows with the logit scale and with the length.
import * as Plot from '@observablehq/plot';
import { renderPlot } from '../lib/plots';
import { getParam, setParams, webgpuLabel, type App } from '../lib/app';
import type { PrecisionResult } from '../lib/explainers';
import { heavy, type EngineInfo } from '../lib/heavy';
import { fitMath, tex } from '../lib/katex';
import { el } from '../lib/tensors';

const LENGTHS = [32, 64, 128, 256, 512, 1024];
const SCALES = [1, 2, 4, 8, 16, 32, 64];
const DEFAULTS = { length: 256, scale: 1 };

export function mountPrecisionLab(app: App): void {
  const sec = document.getElementById('precision')!;
  const lengthSel = el('select', { id: 'prec-length' }, ...LENGTHS.map((n) => el('option', { value: String(n), text: `L = ${n}` })));
  const scaleSel = el('select', { id: 'prec-scale' }, ...SCALES.map((s) => el('option', { value: String(s), text: `× ${s}` })));
  lengthSel.value = LENGTHS.includes(Number(getParam('prl'))) ? getParam('prl')! : String(DEFAULTS.length);
  scaleSel.value = SCALES.includes(Number(getParam('prs'))) ? getParam('prs')! : String(DEFAULTS.scale);
  const status = el('p', { id: 'prec-status', class: 'note', role: 'status', text: 'Loading the backends…' });
  const table = el('div', { id: 'prec-table', class: 'table-scroll' });
  const halfTable = el('div', { id: 'prec-float16', class: 'table-scroll' });
  const sweeps = el('div', { id: 'prec-sweeps', class: 'lab-pair' });
  sec.append(
    el('p', { text: 'Every backend computes in float32, and float32 rounds. How much, and where? The same seeded Q, K, V [L × 64] go to each backend this browser can run; sdpa-web’s float64 reference (the oracle of its tests) gives the exact answer. A larger logit scale (the scores multiplied, as with a small temperature) makes the softmax sharper and its exponentials larger: rounding grows with it.' }),
    el('p', { text: 'The tests hold every backend to this rule, where e_ref is the plain float32 (scalar) backend’s own error on the same inputs, f = 2 on the CPU and 4 on WebGPU:' }),
    fitMath(tex('\\max\\lvert o - o_{64}\\rvert \\;\\le\\; f\\cdot e_{\\text{ref}} + 10^{-5}\\cdot\\max(1, \\lvert V\\rvert_{\\max})', true)),
    el('div', { class: 'controls' }, el('label', {}, 'Length Lq = Lk', lengthSel), el('label', {}, 'Logit scale (scores × s)', scaleSel)),
    status,
    table,
    el('p', { text: 'Models in browsers ship in float16: 11 significant bits instead of 24. sdpa-web stores float16 but computes in float32, so only the inputs’ and the output’s roundings show. The same inputs rounded to float16 on SIMD128: the first number is what float16 storage costs against the exact answer of the float32 inputs; the second is the kernel’s own error on the rounded inputs (less the output’s own rounding, half a float16 ulp), held to the same rule.' }),
    halfTable,
    sweeps,
  );
  // The engines and their measurements live in a worker: an L = 1024 run never blocks the page.
  let engines: EngineInfo[] = [];
  let token = 0;

  /** Every engine's result on one input set (`eRef` from the scalar engine), measured in the worker. */
  async function measure(length: number, scale: number) {
    const { results, float16 } = await heavy('precision', { length, scale, withFloat16: false });
    return { rows: engines.map((engine, i) => ({ engine, result: results[i] })), float16 };
  }

  async function run(): Promise<void> {
    const my = ++token;
    const length = Number(lengthSel.value), scale = Number(scaleSel.value);
    setParams({ prl: length === DEFAULTS.length ? null : String(length), prs: scale === DEFAULTS.scale ? null : String(scale) });
    sec.dataset.done = '';
    try {
      if (!engines.length) engines = (await heavy('engines')).map((e) => (e.name === 'webgpu' && !e.reason ? { ...e, how: webgpuLabel(app.attn).replace(/^webgpu( — )?/, '') || e.how } : e));
      status.textContent = `Computing L = ${length}, logit scale ${scale} on ${engines.filter((e) => !e.reason).length} backends…`;
      const { results, float16: half } = await heavy('precision', { length, scale, withFloat16: true });
      const rows = engines.map((engine, i) => ({ engine, result: results[i] as PrecisionResult | undefined }));
      if (my !== token) return;
      table.replaceChildren(el('table', { class: 'data', 'data-testid': 'precision' },
        el('thead', {}, el('tr', {}, ...['backend', 'max |o − o₆₄|', 'where', 'the rule’s bound', 'within'].map((c) => el('th', { scope: 'col', text: c })))),
        el('tbody', {}, ...rows.map(({ engine, result }) => el('tr', { 'data-engine': engine.name },
          el('th', { scope: 'row' }, engine.short, el('small', { class: 'engine-how', text: engine.how })),
          ...(result
            ? [el('td', { 'data-v': String(result.error), text: result.error.toExponential(2) }), el('td', { title: 'query row, value column', text: `q${result.at[0] + 1}, v${result.at[1] + 1}` }), el('td', { text: `${result.bound.toExponential(2)} (f = ${result.factor})` }), el('td', { class: result.error <= result.bound ? 'ok' : 'slip', text: result.error <= result.bound ? '✓ yes' : '✗ no' })]
            : [el('td', { colspan: 4, class: 'note', text: `not here: ${engine.reason}` })]),
        ))),
      ));
      if (half) {
        halfTable.replaceChildren(el('table', { class: 'data', 'data-testid': 'precision-float16' },
          el('thead', {}, el('tr', {}, ...['float16 storage', 'max |o − o₆₄|', 'kernel’s own error', 'the rule’s bound', 'within'].map((c) => el('th', { scope: 'col', text: c })))),
          el('tbody', {}, el('tr', { 'data-engine': 'float16' },
            el('th', { scope: 'row' }, 'SIMD128', el('small', { class: 'engine-how', text: 'halves in, float32 sums, half out' })),
            el('td', { 'data-v': String(half.storage), text: half.storage.toExponential(2) }),
            el('td', { 'data-v': String(half.excess), text: half.excess.toExponential(2) }),
            el('td', { text: `${half.bound.toExponential(2)} (f = 2)` }),
            el('td', { class: half.excess <= half.bound ? 'ok' : 'slip', text: half.excess <= half.bound ? '✓ yes' : '✗ no' }),
          )),
        ));
      }
      status.textContent = `L = ${length}, logit scale ${scale}: each backend’s output against sdpa-web’s float64 referenceAttention. Sweeping the scale and the length…`;
      await sweep(my, length, scale);
      if (my !== token) return;
      status.textContent = `L = ${length}, logit scale ${scale}: each backend’s output against sdpa-web’s float64 referenceAttention.`;
      sec.dataset.done = 'true';
    } catch (e) {
      app.error('precision lab', e);
    }
  }

  async function sweep(my: number, length: number, scale: number): Promise<void> {
    const byScale: { x: number; y: number; backend: string }[] = [];
    const byLength: { x: number; y: number; backend: string }[] = [];
    for (const s of SCALES) {
      for (const { engine, result } of (await measure(length, s)).rows) if (result) byScale.push({ x: s, y: Math.max(result.error, 1e-10), backend: engine.name });
      if (my !== token) return;
    }
    for (const n of LENGTHS) {
      for (const { engine, result } of (await measure(n, scale)).rows) if (result) byLength.push({ x: n, y: Math.max(result.error, 1e-10), backend: engine.name });
      if (my !== token) return;
    }
    const width = Math.max(280, sweeps.clientWidth >= 760 ? sweeps.clientWidth / 2 - 40 : sweeps.clientWidth - 24);
    const chart = (title: string, pts: typeof byScale, xLabel: string, current: number) =>
      el('figure', { class: 'view' }, el('figcaption', { text: title }), renderPlot({
        width, height: 280, marginLeft: 60,
        style: { background: 'transparent', fontSize: '12px' },
        x: { type: 'log', base: 2, label: xLabel, grid: true },
        y: { type: 'log', label: 'max |o − o₆₄| (log scale)', grid: true },
        color: { legend: true, scheme: 'observable10', domain: engines.filter((e) => !e.reason).map((e) => e.name) },
        marks: [Plot.line(pts, { x: 'x', y: 'y', stroke: 'backend', strokeWidth: 2 }), Plot.dot(pts, { x: 'x', y: 'y', stroke: 'backend', tip: true }), Plot.ruleX([current], { strokeOpacity: 0.4 })],
      }));
    sweeps.replaceChildren(chart(`Error against the logit scale (L = ${length})`, byScale, 'logit scale s (log scale)', scale), chart(`Error against the length (logit scale ${scale})`, byLength, 'L (log scale)', length));
  }

  lengthSel.addEventListener('change', () => void run());
  scaleSel.addEventListener('change', () => void run());
  void run();
}
