// Online softmax, traced from the kernel: the fused SIMD kernel reads the keys in tiles and keeps,
// per query row, a running max m, a running denominator ℓ and an accumulator a = Σ e^(s−m)·v. The
// numbers shown after each tile are the kernel's own (attn.traceOnlineSoftmax, a trace hook in the
// C++ kernel), and the last tile's a/ℓ is the library's output row.
import * as Plot from '@observablehq/plot';
import { renderPlot } from '../lib/plots';
import type { Attention } from 'sdpa-web';
import { intParam, selectable, setParams, type App } from '../lib/app';
import { ONLINE_KEY_COUNTS, ONLINE_ROWS, onlineTrace, webgpuOnlineTrace, type OnlineStep, type OnlineTrace } from '../lib/explainers';
import { fitMath, tex } from '../lib/katex';
import { el, fmt } from '../lib/tensors';

const DEFAULT_KEYS = 320;
const DEFAULT_ROW = 0;
const DEFAULT_SPIKE = 200;

const vec = (xs: number[], d = 3) => `(${xs.map((x) => fmt(x, d)).join(', ')})`;

/** A vector in two unbreakable halves, so a narrow table can put them on two lines. */
function halves(xs: number[]): (HTMLElement | string)[] {
  const cut = Math.ceil(xs.length / 2);
  const part = (ys: number[], open: string, close: string) => el('span', { class: 'half', text: `${open}${ys.map((x) => fmt(x, 4)).join(', ')}${close}` });
  return [part(xs.slice(0, cut), '(', ','), ' ', part(xs.slice(cut), '', ')')];
}

export function mountOnlineSoftmax(app: App): void {
  const sec = document.getElementById('online')!;
  let keys = intParam('okeys', (n) => ONLINE_KEY_COUNTS.includes(n), DEFAULT_KEYS);
  let row = intParam('orow', (n) => n >= 0 && n < ONLINE_ROWS, DEFAULT_ROW);
  let spike = intParam('ospike', (n) => n >= -1 && n < 512, DEFAULT_SPIKE);
  if (spike >= keys) spike = -1;

  const keysSelect = el('select', { id: 'online-keys', 'aria-label': 'keys' }, ...ONLINE_KEY_COUNTS.map((n) => el('option', { value: String(n), text: String(n) })));
  keysSelect.value = String(keys);
  const rowSelect = el('select', { id: 'online-row', 'aria-label': 'query row' }, ...Array.from({ length: ONLINE_ROWS }, (_, i) => el('option', { value: String(i), text: `q${i + 1}` })));
  rowSelect.value = String(row);
  const spikeSlider = el('input', { type: 'range', id: 'online-spike', min: -1, max: keys - 1, step: 1, value: spike, 'aria-label': 'strong key' });
  const spikeOut = el('output', { for: 'online-spike', id: 'online-spike-out' });
  const plots = el('div', { id: 'online-plots', class: 'lab-pair' });
  const table = el('div', { id: 'online-table', class: 'view wide trace-steps' });
  const verdict = el('div', { id: 'online-verdict', class: 'var-numbers', 'aria-live': 'polite' });
  const gpuPanel = el('div', { id: 'online-webgpu', class: 'view wide trace-steps' });
  const canGpu = app.backends.some((b) => b.name === 'webgpu' && selectable(b));
  let gpuAttn: Promise<Attention> | undefined;

  sec.append(
    el('p', { text: 'The formula asks for a whole row of scores before the softmax can start: the row’s maximum and its sum of exponentials. A fused kernel never holds that row. It reads the keys a tile at a time and keeps three things per query: the largest score so far m, the sum so far ℓ of e^(s − m), and the accumulator a, the same weighted sum of value rows. When a tile brings a larger score, everything kept so far is rescaled by e^(m_old − m_new):' }),
    fitMath(tex('\\begin{aligned} m &\\leftarrow \\max\\big(m_{\\text{old}},\\ \\max_{j \\in \\text{tile}} s_j\\big) \\\\ \\ell &\\leftarrow \\ell\\,e^{m_{\\text{old}}-m} + \\textstyle\\sum_{j \\in \\text{tile}} e^{s_j-m} \\\\ a &\\leftarrow a\\,e^{m_{\\text{old}}-m} + \\textstyle\\sum_{j \\in \\text{tile}} e^{s_j-m}\\,v_j \\\\ o &= a/\\ell \\quad \\text{after the last tile} \\end{aligned}', true)),
    el('p', { text: `Below, ${ONLINE_ROWS} queries attend over up to 512 keys (d_k = 16, 4 value columns). The numbers after each tile are the kernel’s own: sdpa-web’s SIMD kernel records them for one row as it runs (a trace hook in the C++ kernel, not a JavaScript copy of it). Plant a strong key and watch the running max jump in its tile, and the earlier sum shrink.` }),
    el('div', { class: 'controls' },
      el('label', {}, 'Keys', keysSelect),
      el('label', {}, 'Query row', rowSelect),
      el('label', {}, 'Strong key', spikeSlider),
      spikeOut,
    ),
    plots,
    table,
    verdict,
    el('h3', { text: 'The same row on the WebGPU kernel' }),
    el('p', { text: 'sdpa-web’s WebGPU flash kernel does the same on the GPU, with a key tile chosen from the device’s workgroup memory (64, 32 or 16 keys; on small devices its per-row kernel takes what fits). Here it records the same row from inside the shader: where its tiles differ from the SIMD kernel’s the steps differ, but the last a/ℓ agrees to float32 rounding.' }),
    gpuPanel,
  );

  let token = 0;
  async function show(): Promise<void> {
    const my = ++token;
    spikeOut.textContent = spike < 0 ? 'none' : `k${spike + 1}`;
    setParams({ okeys: keys === DEFAULT_KEYS ? null : String(keys), orow: row === DEFAULT_ROW ? null : String(row), ospike: spike === DEFAULT_SPIKE ? null : String(spike) });
    try {
      const t = await onlineTrace(app.attn, keys, row, spike);
      if (my !== token) return;
      drawPlots(t);
      drawTable(t);
      drawVerdict(t);
      sec.dataset.shown = `${keys}:${row}:${spike}`;
      await showGpu(my, t);
    } catch (e) {
      app.error('online softmax', e);
    }
  }

  async function showGpu(my: number, t: OnlineTrace): Promise<void> {
    if (!canGpu) {
      gpuPanel.replaceChildren(el('p', { class: 'note', text: `WebGPU is not available in this browser (${app.backends.find((b) => b.name === 'webgpu')?.reason ?? 'no navigator.gpu'}).` }));
      return;
    }
    gpuPanel.replaceChildren(el('p', { class: 'progress-text', text: 'Tracing on WebGPU…' }));
    try {
      gpuAttn ??= app.create('webgpu');
      const g = await webgpuOnlineTrace(await gpuAttn, keys, row, spike);
      if (my !== token) return;
      const diff = Math.max(...g.output.map((x, c) => Math.abs(x - t.output[c]!)));
      const last = g.steps[g.steps.length - 1]!;
      gpuPanel.replaceChildren(
        stepTable(g.steps, `Query q${row + 1} on WebGPU: tiles of ${g.tileKeys} keys (${g.kernel.split(':')[0]} kernel)`, 'online-webgpu-steps'),
        el('p', {}, el('span', { class: 'stat' }, 'After its last tile, a/ℓ = ', el('strong', { 'data-testid': 'online-webgpu-final', 'data-v': JSON.stringify(last.partial), text: vec(last.partial, 6) }))),
        el('p', { class: 'note', 'data-testid': 'online-webgpu-output', 'data-v': JSON.stringify(g.output), text: `WebGPU output row ${vec(g.output, 6)}: ${diff === 0 ? 'the same as the SIMD kernel’s, bit for bit' : `${diff.toExponential(1)} from the SIMD kernel’s`}.` }),
      );
      sec.dataset.gpuShown = `${keys}:${row}:${spike}`;
    } catch (e) {
      gpuAttn = undefined;
      gpuPanel.replaceChildren(el('p', { class: 'note', text: `WebGPU could not run here: ${e instanceof Error ? e.message : String(e)}` }));
    }
  }

  function drawPlots(t: OnlineTrace): void {
    const width = Math.max(260, Math.min(520, plots.clientWidth >= 760 ? plots.clientWidth / 2 - 40 : plots.clientWidth - 24));
    const pts = t.steps.map((s, n) => ({ tile: n + 1, keys: `k${s.firstKey + 1}–k${s.lastKey + 1}`, m: s.max, l: s.sum, rescale: s.rescale }));
    const figure = (id: string, caption: string, marks: Plot.Markish[], y: string) =>
      el('figure', { class: 'view', 'data-testid': id }, el('figcaption', { text: caption }), renderPlot({
        width, height: 220, marginLeft: 52,
        style: { background: 'transparent', fontSize: '12px' },
        x: { label: 'after key tile', ticks: pts.map((p) => p.tile), tickFormat: (d: number) => String(d) },
        y: { label: y, grid: true },
        marks,
      }));
    plots.replaceChildren(
      figure('online-max', 'The running max m after each tile of keys', [Plot.line(pts, { x: 'tile', y: 'm', stroke: '#4c78a8', curve: 'step-after' }), Plot.dot(pts, { x: 'tile', y: 'm', fill: '#4c78a8', r: 4, tip: true, channels: { keys: 'keys' } })], 'max score m'),
      figure('online-sum', 'The running denominator ℓ = Σ e^(s − m): it drops when m jumps', [Plot.line(pts, { x: 'tile', y: 'l', stroke: '#f58518' }), Plot.dot(pts, { x: 'tile', y: 'l', fill: '#f58518', r: 4, tip: true, channels: { keys: 'keys', rescale: 'rescale' } })], 'ℓ'),
    );
  }

  function drawTable(t: OnlineTrace): void {
    table.replaceChildren(stepTable(t.steps, `Query q${row + 1}, tiles of ${t.tileKeys} keys, as the SIMD kernel computed them: m the running max, ℓ the denominator, a the accumulator`, 'online-steps'));
  }

  function stepTable(steps: OnlineStep[], caption: string, testid: string): HTMLElement {
    const head: [string, string][] = [['tile', 'tile'], ['keys', 'keys'], ['m', 'the running max'], ['rescale', 'e^(m_old − m): the factor on ℓ and a'], ['ℓ', 'the running denominator'], ['a', 'the accumulator'], ['a/ℓ', 'the output so far']];
    return el('table', { class: 'data', 'data-testid': testid },
      el('caption', { text: caption }),
      el('thead', {}, el('tr', {}, ...head.map(([h, title], c) => el('th', { scope: 'col', title, class: c === 5 ? 'acc' : c === 1 ? 'keys' : '', text: h })))),
      el('tbody', {}, ...steps.map((s, n) => el('tr', { class: s.rescale < 1 ? 'jump' : '' },
        el('td', { text: String(n + 1) }),
        el('td', { class: 'vec keys', text: `k${s.firstKey + 1}–k${s.lastKey + 1}` }),
        el('td', { text: fmt(s.max, 3) }),
        el('td', { text: n === 0 ? '—' : fmt(s.rescale, 4) }),
        el('td', { text: fmt(s.sum, 4) }),
        el('td', { class: 'vec acc', text: vec(s.accumulator, 3) }),
        el('td', { class: 'vec partial', 'data-partial': JSON.stringify(s.partial) }, ...halves(s.partial)),
      ))),
    );
  }

  function drawVerdict(t: OnlineTrace): void {
    const last = t.steps[t.steps.length - 1]!;
    const same = t.output.every((x, c) => x === t.callOutput[c]);
    const err = Math.max(...t.output.map((x, c) => Math.abs(x - t.reference[c]!)));
    const stored = t.weights.length;
    verdict.replaceChildren(
      el('p', {}, el('span', { class: 'stat' }, 'After the last tile, a/ℓ = ', el('strong', { 'data-testid': 'online-final', 'data-v': JSON.stringify(last.partial), text: vec(last.partial, 6) }))),
      el('p', {}, el('span', { class: 'stat' }, 'sdpa-web’s output row = ', el('strong', { 'data-testid': 'online-output', 'data-v': JSON.stringify(t.callOutput), text: vec(t.callOutput, 6) })),
        el('span', { class: 'note', text: same ? ' (the traced run and a plain call agree bit for bit)' : ' (differs from the traced run!)' })),
      el('p', { class: 'note', text: `float64 reference: ${vec(t.reference, 6)}; largest difference ${err.toExponential(1)}. The kernel kept ${2 + t.output.length} numbers for this row; the plain formula stores its ${stored} weights.` }),
    );
  }

  keysSelect.addEventListener('change', () => {
    keys = Number(keysSelect.value);
    spikeSlider.max = String(keys - 1);
    if (spike >= keys) spike = -1;
    spikeSlider.value = String(spike);
    void show();
  });
  rowSelect.addEventListener('change', () => {
    row = Number(rowSelect.value);
    void show();
  });
  spikeSlider.addEventListener('input', () => {
    spike = Number(spikeSlider.value);
    void show();
  });
  void show();
}
