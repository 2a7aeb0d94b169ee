// Device-limits planner: a WebGPU device's limits (this browser's adapter, WebGPU's defaults, a small
// made-up device, or your own) → the longest call that fits, how the package's planner splits it, and
// the memory of the weights matrix against the O(n) path the flash kernel takes. Then the library is
// asked: a WebGPU instance with these limits (gpuLimits) names the kernel it compiles, runs the
// longest call that fits and refuses one key more.
import * as Plot from '@observablehq/plot';
import { renderPlot } from '../lib/plots';
import { maxAbsDiff, toleranceBound, type GpuLimitCaps } from 'sdpa-web';
import { getParam, setParams, type App } from '../lib/app';
import { randn } from '../lib/compute';
import { planCall, WEBGPU_DEFAULT_LIMITS, type DeviceLimits } from '../lib/planner';
import { el } from '../lib/tensors';
import { formatBytes as fmtBytes } from '../lib/units';

const LIMIT_NAMES = ['maxStorageBufferBindingSize', 'maxBufferSize', 'maxComputeWorkgroupStorageSize', 'maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupsPerDimension'] as const;
/** A made-up small device: one buffer holds 128 KiB, so the boundary is a call the page can run. */
const SMALL_LIMITS: DeviceLimits = { ...WEBGPU_DEFAULT_LIMITS, maxStorageBufferBindingSize: 131072, maxBufferSize: 131072 };
const CALL_DEFAULTS = { batch: 1, heads: 12, length: 4096, headDim: 64 };
/** The longest boundary call the page runs to check the library (on a software adapter it is slow). */
const CHECK_MAX_LENGTH = 1024;


async function adapterLimits(): Promise<DeviceLimits | undefined> {
  const gpu = (navigator as unknown as { gpu?: { requestAdapter(): Promise<{ limits: Record<string, number> } | null> } }).gpu;
  const adapter = await gpu?.requestAdapter().catch(() => null);
  if (!adapter) return undefined;
  return Object.fromEntries(LIMIT_NAMES.map((n) => [n, adapter.limits[n]])) as unknown as DeviceLimits;
}

export function mountLimits(app: App): void {
  const sec = document.getElementById('limits')!;
  const device = el('select', { id: 'lim-device' },
    el('option', { value: 'adapter', text: 'this browser’s WebGPU adapter' }),
    el('option', { value: 'default', text: 'WebGPU’s default limits (every device has these)' }),
    el('option', { value: 'small', text: 'a small made-up device (128 KiB buffers)' }),
    el('option', { value: 'custom', text: 'custom limits' }));
  const limitInputs = Object.fromEntries(LIMIT_NAMES.map((n) => [n, el('input', { type: 'number', id: `lim-${n}`, min: 1, step: 1 })])) as Record<(typeof LIMIT_NAMES)[number], HTMLInputElement>;
  const callField = (id: string, param: string, value: number) => {
    const fromUrl = Number(getParam(param));
    return el('input', { type: 'number', id, min: 1, step: 1, value: Number.isInteger(fromUrl) && fromUrl >= 1 ? fromUrl : value });
  };
  const B = callField('lim-batch', 'db', CALL_DEFAULTS.batch), H = callField('lim-heads', 'dh', CALL_DEFAULTS.heads), L = callField('lim-length', 'dn', CALL_DEFAULTS.length), E = callField('lim-dim', 'de', CALL_DEFAULTS.headDim);
  const error = el('p', { class: 'error-text', role: 'alert', id: 'lim-error' });
  const result = el('div', { id: 'lim-result' });
  const plot = el('div', { id: 'lim-plot' });
  const check = el('div', { id: 'lim-check', class: 'view', 'aria-live': 'polite' });
  sec.append(
    el('p', { text: 'A GPU buffer has a size limit, and a workgroup a memory limit. The WebGPU backend cuts a call into pieces whose buffers fit (as many whole heads per piece as fit), picks a kernel whose key tiles fit the workgroup memory, and never builds the n × n weights: the flash kernel keeps two numbers per query row instead.' }),
    el('div', { class: 'controls' }, el('label', {}, 'Device', device)),
    // The five limits: open beside the device on a wide screen, one tap away on a phone.
    el('details', { class: 'lim-fields', open: innerWidth >= 600 }, el('summary', { text: 'The device’s limits (bytes and counts; edit any)' }), el('div', { class: 'controls' }, ...LIMIT_NAMES.map((n) => el('label', {}, n, limitInputs[n])))),
    el('div', { class: 'controls' }, el('label', {}, 'batch B', B), el('label', {}, 'heads H', H), el('label', {}, 'length L (Lq = Lk)', L), el('label', {}, 'head dim E = Ev', E)),
    error,
    el('div', { class: 'cost-grid lim-grid' }, result, plot),
    el('h3', { text: 'Asking the library' }),
    check,
  );
  let adapter: DeviceLimits | undefined;
  let checkToken = 0;

  const limits = (): DeviceLimits => Object.fromEntries(LIMIT_NAMES.map((n) => [n, Number(limitInputs[n].value)])) as unknown as DeviceLimits;
  const fill = (l: DeviceLimits) => LIMIT_NAMES.forEach((n) => (limitInputs[n].value = String(l[n])));

  function draw(): void {
    if (device.value === 'adapter' && !adapter) {
      // Nothing to plan with: no invented numbers where this device's would be.
      error.textContent = '';
      setParams({ dl: null, dlim: null });
      result.replaceChildren(el('p', { class: 'note', id: 'lim-no-adapter', text: 'This browser has no WebGPU adapter, so there are no limits of its own to plan with. Choose WebGPU’s default limits, the small made-up device or your own limits to see how a call would be split.' }));
      plot.replaceChildren();
      void askLibrary(WEBGPU_DEFAULT_LIMITS, Number(E.value), Number(L.value));
      return;
    }
    const l = limits();
    const call = { batch: Number(B.value), heads: Number(H.value), length: Number(L.value), headDim: Number(E.value) };
    const bad = [...LIMIT_NAMES.map((n) => [n, l[n]] as const), ...Object.entries(call)].filter(([, v]) => !(Number.isInteger(v) && v >= 1)).map(([n]) => n);
    error.textContent = bad.length ? `${bad.join(', ')}: a whole number of at least 1, please.` : '';
    if (bad.length) return;
    setParams({ dl: device.value === 'adapter' ? null : device.value, dlim: device.value === 'custom' ? LIMIT_NAMES.map((n) => l[n]).join(',') : null, db: call.batch === CALL_DEFAULTS.batch ? null : String(call.batch), dh: call.heads === CALL_DEFAULTS.heads ? null : String(call.heads), dn: call.length === CALL_DEFAULTS.length ? null : String(call.length), de: call.headDim === CALL_DEFAULTS.headDim ? null : String(call.headDim) });
    const p = planCall(l, call);
    const row = (k: string, v: string, id?: string) => el('tr', {}, el('th', { scope: 'row', text: k }), el('td', id ? { 'data-testid': id } : {}, el('output', { text: v })));
    result.replaceChildren(el('table', { class: 'data' }, el('tbody', {},
      row('one buffer may hold (min of binding and buffer size)', fmtBytes(p.cap)),
      row('Q, K, V, O: each B·H·L·E·4 bytes', fmtBytes(p.tensorBytes)),
      row('weights matrix A: B·H·L²·4 bytes (never built by the flash kernel)', fmtBytes(p.weightsBytes)),
      row('the flash kernel instead keeps per row: max and sum, B·H·L·8 bytes', fmtBytes(p.statsBytes)),
      row('longest L on this device (one head’s K/V in one buffer)', p.maxLength.toLocaleString('en'), 'lim-max-length'),
      row('longest L if one head’s weights matrix had to fit one buffer', p.maxLengthWeights.toLocaleString('en')),
      row('this call', p.error ? `does not fit: ${p.error}` : `${p.chunks} piece${p.chunks > 1 ? 's' : ''} of up to ${p.headsPerChunk} head${p.headsPerChunk > 1 ? 's' : ''}, ${p.dispatches} dispatch${p.dispatches > 1 ? 'es' : ''} of the flash kernel`, 'lim-split'),
      row('kernel', `${p.kernel.tiled ? `tiled flash kernel (${p.kernel.rows} rows a workgroup, 4 lanes a row)` : 'per-row flash kernel'}, ${p.kernel.blockKeys} keys per tile, ${fmtBytes(p.kernel.workgroupBytes)} of ${fmtBytes(l.maxComputeWorkgroupStorageSize)} workgroup memory`, 'lim-kernel'),
    )));
    const ns = Array.from({ length: 15 }, (_, i) => 2 ** (i + 6));
    const pts = ns.flatMap((n) => [{ n, bytes: 4 * n * call.headDim, what: 'one head’s K (flash path)' }, { n, bytes: 4 * n * n, what: 'one head’s weights matrix' }]);
    const width = Math.min(520, Math.max(280, plot.clientWidth || 480));
    plot.replaceChildren(el('figure', {}, el('figcaption', { text: 'One head’s buffers against the buffer limit: L² outgrows it long before L' }), renderPlot({
      width, height: 280, marginLeft: 64, marginRight: 24,
      style: { background: 'transparent', fontSize: '12px' },
      x: { type: 'log', base: 2, label: 'length L (log scale)', grid: true, ticks: [64, 1024, 16384, 262144], tickFormat: (n: number) => (n >= 1024 ? `${n / 1024}K` : String(n)) },
      y: { type: 'log', label: 'bytes (log scale)', grid: true, ticks: [2 ** 20, 2 ** 30, 2 ** 40], tickFormat: (b: number) => ['1 MiB', '1 GiB', '1 TiB'][Math.round(Math.log2(b) / 10) - 2] },
      color: { legend: true, scheme: 'observable10' },
      marks: [Plot.line(pts, { x: 'n', y: 'bytes', stroke: 'what', strokeWidth: 2 }), Plot.ruleY([p.cap], { stroke: 'currentColor', strokeDasharray: '4,3' }), Plot.text([p.cap], { y: (c: number) => c, frameAnchor: 'left', dy: -8, dx: 6, text: () => 'buffer limit' }), Plot.ruleX([call.length], { strokeOpacity: 0.4 })],
    })));
    void askLibrary(l, call.headDim, call.length);
  }

  /** The library with these limits: its kernel for this head dim, and the boundary call when it is short enough to run here. */
  async function askLibrary(wanted: DeviceLimits, headDim: number, length: number): Promise<void> {
    const my = ++checkToken;
    sec.dataset.checked = '';
    if (!adapter) {
      check.replaceChildren(el('p', { class: 'note', text: 'No WebGPU adapter in this browser: the numbers above are the planner’s rule; the library cannot be asked here.' }));
      sec.dataset.checked = 'none';
      return;
    }
    // gpuLimits can only lower the device's limits: the library plans with the smaller of each.
    const l = Object.fromEntries(LIMIT_NAMES.map((n) => [n, Math.min(wanted[n], adapter![n])])) as unknown as DeviceLimits;
    const lowered = LIMIT_NAMES.filter((n) => l[n] < wanted[n]);
    check.replaceChildren(el('p', { class: 'progress-text', text: 'Asking the library on WebGPU…' }));
    let gpu;
    try {
      gpu = await app.createWith({ backend: 'webgpu', gpuLimits: l as GpuLimitCaps });
      const small = Math.min(length, 256);
      const [q, k, v] = [1, 2, 3].map((s) => randn(app.attn, [small, headDim], 900 + s));
      await gpu.scaledDotProductAttention(q, k, v);
      const predicted = planCall(l, { batch: 1, heads: 1, length: small, headDim }).pipelineKey;
      const pipelines = gpu.webgpuInfo()?.pipelines ?? [];
      const parts: HTMLElement[] = [
        el('p', {}, `For E = ${headDim} at L = ${small}, the library compiled `, el('code', { id: 'lim-pipeline', text: pipelines.filter((p) => p.startsWith('flash')).join(', ') }), pipelines.includes(predicted) ? ' — the kernel and key tile the planner above predicts.' : ` — the planner above predicts ${predicted}.`),
      ];
      if (lowered.length) parts.push(el('p', { class: 'note', text: `This browser’s adapter offers less than the chosen ${lowered.join(', ')}: the library plans with the adapter’s.` }));
      const boundary = planCall(l, { batch: 1, heads: 1, length: 1, headDim }).maxLength;
      if (boundary <= CHECK_MAX_LENGTH) {
        const [bq, bk, bv] = [1, 2, 3].map((s) => randn(app.attn, [boundary, headDim], 910 + s));
        const out = await gpu.scaledDotProductAttention(bq, bk, bv);
        const ref = app.attn.referenceAttention(bq, bk, bv).output.data;
        const err = maxAbsDiff(out.output.data, ref);
        // The rule's e_ref: the plain float32 (scalar) backend's error on the same inputs.
        const scalar = await app.createWith({ backend: 'scalar' });
        const eRef = maxAbsDiff(scalar.scaledDotProductAttentionSync(bq, bk, bv).output.data, ref);
        scalar.dispose();
        const bound = toleranceBound(eRef, 4, bv.data);
        parts.push(el('p', { id: 'lim-fits', 'data-error': String(err) }, `L = ${boundary}: runs; max |o − o₆₄| = ${err.toExponential(2)} (the tests’ bound ${bound.toExponential(2)}).`));
        const [oq, ok, ov] = [1, 2, 3].map((s) => randn(app.attn, [boundary + 1, headDim], 920 + s));
        const refused = await gpu.scaledDotProductAttention(oq, ok, ov).then(() => 'runs (not expected)', (e: unknown) => (e instanceof Error ? `${e.name}: ${e.message}` : String(e)));
        parts.push(el('p', { id: 'lim-refused' }, `L = ${boundary + 1}: `, el('q', { text: refused })));
      } else {
        parts.push(el('p', { class: 'note', text: `The boundary, L = ${boundary.toLocaleString('en')}, is too long to run here; choose the small made-up device to watch the library run the longest call that fits and refuse one key more.` }));
      }
      if (my !== checkToken) return;
      check.replaceChildren(...parts);
      sec.dataset.checked = 'true';
    } catch (e) {
      if (my !== checkToken) return;
      check.replaceChildren(el('p', { class: 'error-text', text: `The library could not run on WebGPU here: ${e instanceof Error ? e.message : String(e)}` }));
      sec.dataset.checked = 'error';
    } finally {
      gpu?.dispose();
    }
  }

  const choose = () => {
    if (device.value === 'adapter') {
      if (adapter) fill(adapter);
      else LIMIT_NAMES.forEach((n) => (limitInputs[n].value = ''));
    }
    else if (device.value === 'default') fill(WEBGPU_DEFAULT_LIMITS);
    else if (device.value === 'small') fill(SMALL_LIMITS);
    draw();
  };
  device.addEventListener('change', choose);
  for (const input of Object.values(limitInputs)) input.addEventListener('input', () => {
    device.value = 'custom';
    draw();
  });
  let timer: number | undefined;
  for (const input of [B, H, L, E]) input.addEventListener('input', () => {
    clearTimeout(timer);
    timer = window.setTimeout(draw, 250);
  });

  void (async () => {
    adapter = await adapterLimits();
    if (!adapter) device.options[0]!.textContent = 'this browser’s WebGPU adapter (none here)';
    const want = getParam('dl');
    const custom = (getParam('dlim') ?? '').split(',').map(Number);
    if (want === 'custom' && custom.length === LIMIT_NAMES.length && custom.every((x) => Number.isInteger(x) && x >= 1)) {
      device.value = 'custom';
      fill(Object.fromEntries(LIMIT_NAMES.map((n, i) => [n, custom[i]])) as unknown as DeviceLimits);
      draw();
    } else {
      device.value = want === 'default' || want === 'small' ? want : 'adapter';
      choose();
    }
  })().catch((e: unknown) => app.error('device limits', e));
}
