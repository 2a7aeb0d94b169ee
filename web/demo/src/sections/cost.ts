// Section 6: the n²·d compute and n² memory of attention (the seed's 512-token, 12-layer, 12-head example),
// and a live benchmark of sdpa-web's backends in this browser.
import * as Plot from '@observablehq/plot';
import { renderPlot } from '../lib/plots';
import { getParam, selectable, setParams, webgpuLabel, type App } from '../lib/app';
import { heavy } from '../lib/heavy';
import { wholeNumberProblem } from '../lib/fields';
import { el } from '../lib/tensors';
import { formatBytes } from '../lib/units';

const MiB = 2 ** 20;
const fmtFlops = (f: number) => (f >= 1e12 ? `${(f / 1e12).toFixed(2)} TFLOP` : f >= 1e9 ? `${(f / 1e9).toFixed(2)} GFLOP` : `${(f / 1e6).toFixed(2)} MFLOP`);

export function mountCost(app: App): void {
  const sec = document.getElementById('cost')!;
  // Each field's URL parameter and default; only what differs from the default goes into the URL.
  const num = (id: string, param: string, label: string, value: number, max: number) => {
    const fromUrl = Number(getParam(param));
    const i = el('input', { type: 'number', id, value: Number.isInteger(fromUrl) && fromUrl >= 1 && fromUrl <= max ? fromUrl : value, min: 1, max, step: 1, required: true, inputmode: 'numeric', 'aria-describedby': 'cost-error' });
    return { input: i, label: el('label', {}, label, i), param, name: label, fallback: value, max };
  };
  const fields = [num('cost-n', 'cn', 'sequence length n', 512, 2 ** 24), num('cost-d', 'cd', 'head dimension d', 64, 65536), num('cost-heads', 'ch', 'heads', 12, 4096), num('cost-layers', 'cl', 'layers', 12, 4096), num('cost-batch', 'cb', 'batch', 1, 65536)];
  const [n, d, h, l, b] = fields.map((f) => f.input);
  const bytes = el('select', { id: 'cost-bytes' }, el('option', { value: '4', text: 'float32 (4 B)' }), el('option', { value: '2', text: 'float16 (2 B)' }));
  if (getParam('cbytes') === '2') bytes.value = '2';
  const error = el('p', { id: 'cost-error', class: 'error-text', role: 'alert' });
  const result = el('div', { id: 'cost-result', 'aria-live': 'polite' });
  const growth = el('div', { id: 'cost-growth' });
  sec.append(
    el('p', { text: 'Per head and layer, QKᵀ costs 2·n²·d floating-point operations and A·V another 2·n²·d; the softmax is O(n²). The weights A are an n × n matrix per head and layer. The defaults are the text’s example: n = 512, float32, 12 layers × 12 heads.' }),
    el('div', { class: 'controls' }, ...fields.map((f) => f.label), el('label', {}, 'element type', bytes)),
    error,
    el('div', { class: 'cost-grid' }, result, growth),
  );

  /** The fields' values, or a message naming each field that is not a whole number within its range. */
  function read(): number[] | string {
    const bad: string[] = [];
    for (const f of fields) {
      const problem = wholeNumberProblem(f.input.value, f.name, 1, f.max);
      if (problem) f.input.setAttribute('aria-invalid', 'true');
      else f.input.removeAttribute('aria-invalid');
      if (problem) bad.push(problem);
    }
    return bad.length ? bad.join(' ') : fields.map((f) => Number(f.input.value));
  }

  function calc(): void {
    const values = read();
    error.textContent = typeof values === 'string' ? values : '';
    result.classList.toggle('stale', typeof values === 'string');
    growth.classList.toggle('stale', typeof values === 'string');
    if (typeof values === 'string') return;
    setParams({ ...Object.fromEntries(fields.map((f, i) => [f.param, values[i] === f.fallback ? null : String(values[i])])), cbytes: bytes.value === '4' ? null : bytes.value });
    const [N, D, H, L, B] = values;
    const by = Number(bytes.value);
    const flopsHead = 4 * N * N * D;
    const per = N * N * by;
    const total = per * H * L * B;
    result.replaceChildren(el('table', { class: 'data' }, el('tbody', {},
      ...([
        ['scores per head and layer (n²)', (N * N).toLocaleString('en')],
        ['FLOPs per head and layer (4·n²·d)', fmtFlops(flopsHead)],
        [`FLOPs, all ${H} heads × ${L} layers × batch ${B}`, fmtFlops(flopsHead * H * L * B)],
        ['weights memory per head and layer (n² × bytes)', `${formatBytes(per)} (${(per / 1e6).toFixed(2)} MB)`],
        [`weights memory, ${H} × ${L} × ${B}`, `${formatBytes(total)} (${(total / 1e6).toFixed(1)} MB)`],
      ] as [string, string][]).map(([k, v]) => el('tr', {}, el('th', { scope: 'row', text: k }), el('td', {}, el('output', { class: 'big', text: v })))),
    )));
    const ns = [128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768];
    const pts = ns.flatMap((x) => [{ n: x, y: (x * x * by * H * L * B) / MiB, what: 'weights memory (MiB)' }, { n: x, y: (4 * x * x * D * H * L * B) / 1e9, what: 'compute (GFLOP)' }]);
    growth.replaceChildren(el('figure', {}, el('figcaption', { text: 'Both grow with n²: doubling n quadruples them' }), renderPlot({
      // As wide as its box (never wider: a scaled-down plot shrinks its text below 11 px).
      width: Math.min(560, Math.max(260, growth.clientWidth || sec.clientWidth - 32)), height: 300, marginLeft: 60,
      style: { background: 'transparent', fontSize: '12px' },
      x: { type: 'log', label: 'sequence length n (log scale)', grid: true },
      y: { type: 'log', label: 'MiB or GFLOP (log scale)', grid: true },
      color: { legend: true, scheme: 'observable10' },
      marks: [Plot.line(pts, { x: 'n', y: 'y', z: 'what', stroke: 'what', strokeWidth: 2 }), Plot.dot(pts, { x: 'n', y: 'y', stroke: 'what', tip: true }), Plot.ruleX([N], { strokeDasharray: '4,3' }), Plot.text([N], { x: (x: number) => x, frameAnchor: 'top', text: () => `n = ${N}`, dy: 8, dx: 4, textAnchor: 'start' })],
    })));
  }
  for (const c of [n, d, h, l, b, bytes]) c.addEventListener('input', calc);
  calc();

  // ── Live benchmark ──
  const maxN = el('select', { id: 'bench-max' }, ...[256, 512, 1024, 2048].map((x) => el('option', { value: String(x), text: `up to n = ${x}` })));
  maxN.value = ['256', '512', '2048'].includes(getParam('cbench') ?? '') ? getParam('cbench')! : '1024';
  maxN.addEventListener('change', () => setParams({ cbench: maxN.value === '1024' ? null : maxN.value }));
  const runBtn = el('button', { type: 'button', class: 'primary', id: 'bench-run', text: 'Run benchmark' });
  const progress = el('progress', { id: 'bench-progress', value: 0, max: 1 });
  const status = el('span', { id: 'bench-status', role: 'status', text: 'Not run yet. It times single-head attention [n × 64] on every available backend.' });
  const plot = el('div', { id: 'bench-plot' });
  const table = el('div', { id: 'bench-table' });
  sec.append(el('h3', { text: 'Live benchmark in this browser' }), el('div', { class: 'controls' }, el('label', {}, 'Sizes', maxN), runBtn, el('div', {}, progress, ' ', status)), el('div', { class: 'cost-grid' }, plot, table));

  runBtn.addEventListener('click', async () => {
    runBtn.disabled = true;
    sec.dataset.benchDone = '';
    const E = 64;
    const ns = [64, 128, 256, 512, 1024, 2048].filter((x) => x <= Number(maxN.value));
    // Every backend that can run here, WebGPU included where 'auto' passed over a software adapter
    // (then labelled as the CPU emulation it is).
    const backends = app.backends.filter(selectable).map((x) => ({ name: x.name, label: x.name === 'webgpu' ? webgpuLabel(app.attn) : x.name }));
    const skipped = app.backends.filter((x) => !selectable(x));
    const notes: string[] = [];
    const results: { n: number; gflops: number; backend: string; ms: number }[] = [];
    progress.max = ns.length * backends.length;
    progress.value = 0;
    const rows = el('tbody');
    table.replaceChildren(el('table', { class: 'data' }, el('thead', {}, el('tr', {}, ...['backend', 'n', 'median ms', 'GFLOP/s'].map((c) => el('th', { scope: 'col', text: c })))), rows));
    plot.replaceChildren();
    // A table row per point; the plot (each redraw a 10–15 ms task on the page's thread)
    // once a backend's series is complete or a second after its last redraw.
    let drawnAt = 0;
    try {
      // The timed calls run in a worker (its own instances): the page stays responsive meanwhile.
      for (const { name, label } of backends) {
        for (const N of ns) {
          status.textContent = `${label}: n = ${N}…`;
          try {
            const { ms } = await heavy('bench', { backend: name, n: N, headDim: E });
            const result = { n: N, backend: label, ms, gflops: (4 * N * N * E) / (ms * 1e6) };
            results.push(result);
            rows.append(el('tr', {}, el('td', { text: result.backend }), el('td', { text: String(N) }), el('td', { text: ms.toFixed(3) }), el('td', { text: result.gflops.toFixed(2) })));
            progress.value += 1;
            if (performance.now() - drawnAt > 1000) drawPlot();
          } catch (e) {
            notes.push(`${name} could not run: ${e instanceof Error ? e.message : String(e)}`);
            progress.value += ns.length - ns.indexOf(N);
            break;
          }
        }
        drawPlot();
      }
      status.textContent = `Done. Median of up to 15 runs per point; this machine’s other work adds noise.${notes.length ? ` ${notes.join('; ')}.` : ''}${skipped.length ? ` Not measured: ${skipped.map((s) => `${s.name} (${s.reason})`).join('; ')}.` : ''}`;
      sec.dataset.benchDone = 'true';
    } catch (e) {
      app.error('benchmark', e);
    } finally {
      runBtn.disabled = false;
    }

    function drawPlot(): void {
      drawnAt = performance.now();
      plot.replaceChildren(el('figure', { 'data-testid': 'bench-plot' }, el('figcaption', { text: 'Attention throughput: 4·n²·d FLOP per call, d = 64' }), renderPlot({
        width: 560, height: 320, marginLeft: 56,
        style: { background: 'transparent', fontSize: '12px' },
        x: { type: 'log', label: 'sequence length n (log scale)', grid: true },
        y: { label: 'GFLOP/s', grid: true, zero: true },
        color: { legend: true, scheme: 'observable10' },
        marks: [Plot.line(results, { x: 'n', y: 'gflops', z: 'backend', stroke: 'backend', strokeWidth: 2 }), Plot.dot(results, { x: 'n', y: 'gflops', stroke: 'backend', tip: true })],
      })));
    }
  });
}
