// Browser tests of the demo page: `vite build` output served by `vite preview`, driven in headless
// Debian Chromium. Every number the page shows is checked against sdpa-web run here in Node.
import { join } from 'node:path';
import { createAttention, type Attention, type GpuLike } from 'sdpa-web';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workedExamples } from '../../web/examples/worked-examples';
import { runExample } from '../../web/demo/src/lib/compute';
import { OUT, openAllSections, start, type Session } from './support';

let s: Session;
let attn: Attention;

/** Parse a number as the page prints it (Unicode minus, −∞). */
function parseShown(t: string): number {
  const x = t.trim().replace(/−/g, '-');
  if (x === '-∞') return -Infinity;
  if (x === '∞') return Infinity;
  return Number(x);
}

/** |shown − value| within the display rounding of `shown` (plus float32 slack). */
function shownMatches(shown: string, value: number): boolean {
  const x = parseShown(shown);
  if (!Number.isFinite(value) || !Number.isFinite(x)) return x === value;
  const decimals = (shown.split('.')[1] ?? '').length;
  return Math.abs(x - value) <= 0.5 * 10 ** -decimals + 1e-6 * Math.max(1, Math.abs(value));
}

/** The playground draws its results a piece per task with a paint between: on a busy machine a recompute takes seconds. */
const PLAYGROUND_DRAWN = { timeout: 15_000 };
/** Waits until the playground's drawing in progress (if any) has drawn its last piece. */
const playgroundDrawn = () => s.page.waitForSelector('#pg-results:not([aria-busy])', { state: 'attached', ...PLAYGROUND_DRAWN });
/**
 * The gallery of every section in both themes at both widths (the screenshots in test-output/, about
 * a minute on 2 cores) is for people to look at: `npm run screenshots` takes it, `npm test` does not.
 */
const GALLERY = process.env.SDPA_SCREENSHOTS === '1';
const shot = (id: string) => s.page.locator(`#${id.replace('-dark', '')}`).screenshot({ path: join(OUT, `section-${id}.png`) });

beforeAll(async () => {
  attn = await createAttention({ backend: 'auto' });
  s = await start();
  await s.page.goto(s.url);
  await s.page.waitForSelector('body[data-ready="true"]', { timeout: 60_000 });
  await openAllSections(s.page);
  await s.page.waitForSelector('.catalogue[data-ready="true"]', { timeout: 120_000 });
});

afterAll(async () => {
  await s?.close();
});

describe('demo page', () => {
  it('loads with no console errors, names its backend, and shows the formula', async () => {
    const status = await s.page.textContent('#backend-status');
    // Chromium has relaxed SIMD: the page runs that build.
    expect(status).toMatch(/Backend: simd \(auto; relaxed SIMD, fused multiply-add, \d+ threads?\)/);
    // 'auto' passed over Chromium's software adapter (SwiftShader): the status line gives the
    // library's reason verbatim. The same reason, from the library in Node handed an adapter that
    // says what the page's adapter says:
    const info = await s.page.evaluate(async () => {
      const gpu = (navigator as unknown as { gpu?: { requestAdapter(): Promise<{ info?: { isFallbackAdapter?: boolean; description?: string; architecture?: string }; isFallbackAdapter?: boolean } | null> } }).gpu;
      const a = await gpu?.requestAdapter();
      return a ? { isFallbackAdapter: a.info?.isFallbackAdapter ?? a.isFallbackAdapter, description: a.info?.description ?? '', architecture: a.info?.architecture ?? '' } : null;
    });
    expect(info?.isFallbackAdapter, 'headless Chromium offers a software WebGPU adapter (--enable-unsafe-webgpu)').toBe(true);
    const gpu: GpuLike = { requestAdapter: async () => ({ limits: {}, info: info!, requestDevice: () => Promise.reject(new Error('unused')) }) };
    const mirror = await createAttention({ backend: 'auto', gpu });
    expect(mirror.fallbackReason).toMatch(/software fallback/);
    expect(status).toContain(mirror.fallbackReason!);
    mirror.dispose();
    await s.page.locator('header.top').screenshot({ path: join(OUT, 'header.png') });
    expect(await s.page.locator('#formula .katex').count()).toBeGreaterThan(0);
    expect(await s.page.evaluate(() => document.getElementById('errors')?.textContent ?? null)).toBeNull();
    expect(s.problems).toEqual([]);
    await shot('formula');
  });

  it('renders every worked example; its shown numbers equal the library’s within display rounding', async () => {
    const page = s.page;
    for (const ex of workedExamples) {
      const run = await runExample(attn, ex);
      await page.selectOption('#example-select', ex.id);
      await page.waitForSelector(`#stage-panel[data-ready="${ex.id}"]`, { timeout: 60_000, state: 'attached' });
      for (const [i, stage] of run.stages.entries()) {
        await page.locator('#stepper .steps button').nth(i).click();
        await page.waitForSelector(`#stage-panel[data-shown="${ex.id}:${i}"]`);
        const tables = await page.$$eval('#stage-panel table.matrix', (ts) => ts.map((t) => ({ name: (t as HTMLElement).dataset.name, cells: [...t.querySelectorAll('td')].map((td) => td.textContent ?? '') })));
        const maps = page.locator('#stage-panel figure[data-testid="heatmap"]');
        expect(await maps.count(), `${ex.id} stage ${stage.id}: heatmaps`).toBe(stage.views.length);
        for (let m = 0; m < stage.views.length; m++) expect(await maps.nth(m).locator('svg').count()).toBeGreaterThan(0);
        expect(tables.map((t) => t.name)).toEqual(stage.views.map((v) => v.name));
        stage.views.forEach((v, j) => {
          const cells = tables[j].cells;
          expect(cells.length, `${ex.id} ${v.name}`).toBe(v.tensor.data.length);
          cells.forEach((c, k) => expect(shownMatches(c, v.tensor.data[k]), `${ex.id} ${stage.id} ${v.name}[${k}]: page ${c}, library ${v.tensor.data[k]}`).toBe(true));
        });
      }
      // Printed-vs-computed: the page's verdicts and computed numbers are the library's.
      const rows = await page.$$eval('#example-detail table.compare tbody tr', (trs) => trs.map((tr) => ({ status: (tr as HTMLElement).dataset.status, computed: [...tr.querySelectorAll('[data-computed]')].map((e) => e.textContent ?? '') })));
      expect(rows.length, ex.id).toBe(run.comparisons.length);
      run.comparisons.forEach((c, j) => {
        expect(rows[j].status, `${ex.id} ${c.printed.label}`).toBe(c.status);
        rows[j].computed.forEach((t, k) => expect(shownMatches(t, c.computed[k]), `${ex.id} ${c.printed.label}[${k}]: page ${t}, library ${c.computed[k]}`).toBe(true));
      });
      if (!run.stages.length) expect(await page.locator('#example-detail figure.extra').count(), ex.id).toBeGreaterThan(0);
    }
    expect(s.problems).toEqual([]);
  });

  it('flags a slip with both the printed and the computed value', async () => {
    const page = s.page;
    await page.selectOption('#example-select', 'ex-full-pipeline-3x4');
    await page.waitForSelector('#stage-panel[data-ready="ex-full-pipeline-3x4"]');
    const q = page.locator('#example-detail tr[data-target="Q"]');
    await expect.poll(() => q.getAttribute('data-status')).toBe('slip');
    expect(await q.locator('.printed').textContent()).toContain('1.07');
    expect(await q.locator('.computed').textContent()).toContain('1.180');
    expect(await q.textContent()).toContain('slip');
    expect(await page.locator('#example-detail tr[data-target="output"] .why').textContent()).toMatch(/slip in this step/);
    await shot('examples');

    await page.selectOption('#example-select', 'ex-google-analogy');
    await page.waitForSelector('#stage-panel[data-ready="ex-google-analogy"]');
    const w = page.locator('#example-detail tr[data-target="weights"]');
    expect(await w.getAttribute('data-status')).toBe('slip');
    expect(await w.locator('.printed').textContent()).toContain('0.52');
    expect(await w.locator('.computed').textContent()).toContain('0.338');
  });

  it('steps through the stages with the keyboard', async () => {
    const page = s.page;
    await page.selectOption('#example-select', 'ex-exercise-4');
    await page.waitForSelector('#stage-panel[data-ready="ex-exercise-4"]');
    await page.locator('#stepper .steps button').first().click();
    await page.keyboard.press('ArrowRight');
    expect(await page.locator('#stepper .steps button[aria-selected="true"]').getAttribute('data-stage')).toBe('scores');
    await page.keyboard.press('End');
    expect(await page.locator('#stepper .steps button[aria-selected="true"]').getAttribute('data-stage')).toBe('output');
    expect(await page.evaluate(() => document.activeElement?.getAttribute('data-stage'))).toBe('output');
  });

  it('playground reacts to an edit, the causal toggle and the backend switch; state lives in the URL', async () => {
    const page = s.page;
    const version = async () => Number(await page.getAttribute('#pg-results', 'data-version'));
    const weights = () => page.$$eval('#pg-weights table.matrix tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => Number((td as HTMLElement).dataset.v))));
    await expect.poll(version, PLAYGROUND_DRAWN).toBeGreaterThan(0);
    const before = await weights();
    expect(before.length).toBe(3);

    let v = await version();
    await page.fill('#pg-q', '3 0 1\n0 1 0\n1 1 2');
    await expect.poll(version, PLAYGROUND_DRAWN).toBeGreaterThan(v);
    const edited = await weights();
    expect(edited).not.toEqual(before);
    edited.forEach((r) => expect(r.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 5));
    // The shape fields show the matrices' shapes.
    const shapeFields = () => Promise.all(['#pg-lq', '#pg-lk', '#pg-dk', '#pg-dv'].map((f) => page.inputValue(f)));
    expect(await shapeFields()).toEqual(['3', '5', '3', '2']);

    v = await version();
    await page.selectOption('#pg-mask', 'causal-tl');
    await expect.poll(version, PLAYGROUND_DRAWN).toBeGreaterThan(v);
    const tl = await weights();
    tl.forEach((r, i) => r.forEach((x, j) => (j > i ? expect(x).toBe(0) : expect(x).toBeGreaterThan(0))));

    v = await version();
    await page.selectOption('#pg-mask', 'causal-br');
    await expect.poll(version, PLAYGROUND_DRAWN).toBeGreaterThan(v);
    const br = await weights();
    br.forEach((r, i) => r.forEach((x, j) => (j > i + 2 ? expect(x).toBe(0) : expect(x).toBeGreaterThan(0))));
    expect(page.url()).toContain('pmask=causal-br');

    // WebGPU (Chromium's software adapter, chosen explicitly) computes what SIMD computes.
    const shown = (id: string) => page.$$eval(`#${id} table.matrix td`, (tds) => tds.map((td) => ({ text: td.textContent ?? '', v: Number((td as HTMLElement).dataset.v) })));
    v = await version();
    await page.selectOption('#pg-backend', 'simd');
    await expect.poll(version, PLAYGROUND_DRAWN).toBeGreaterThan(v);
    expect(await page.getAttribute('#pg-results', 'data-backend')).toBe('simd');
    const simd = { w: await shown('pg-weights'), o: await shown('pg-output') };
    await page.selectOption('#pg-backend', 'webgpu');
    await expect.poll(() => page.getAttribute('#pg-results', 'data-backend'), { timeout: 30_000 }).toBe('webgpu');
    expect(await page.textContent('#pg-summary')).toContain('backend webgpu');
    expect(await page.textContent('#pg-backend-status')).toContain('Computing with webgpu');
    expect(await page.textContent('#pg-error')).toBe('');
    const gpuShown = { w: await shown('pg-weights'), o: await shown('pg-output') };
    for (const key of ['w', 'o'] as const) {
      expect(gpuShown[key].length, key).toBe(simd[key].length);
      gpuShown[key].forEach((c, i) => expect(shownMatches(c.text, simd[key][i].v), `${key}[${i}]: webgpu shows ${c.text}, simd ${simd[key][i].v}`).toBe(true));
    }
    await page.locator('#playground').screenshot({ path: join(OUT, 'section-playground-webgpu.png') });

    v = await version();
    await page.selectOption('#pg-backend', 'scalar');
    await expect.poll(() => page.getAttribute('#pg-results', 'data-backend'), PLAYGROUND_DRAWN).toBe('scalar');
    expect(await page.textContent('#pg-summary')).toContain('backend scalar');
    const scalar = await weights();
    scalar.forEach((r, i) => r.forEach((x, j) => expect(x).toBeCloseTo(br[i][j], 5)));

    // A padding mask with no valid key leaves every row fully masked, and the page says so.
    v = await version();
    await page.selectOption('#pg-mask', 'padding');
    await page.fill('#pg-keylen', '0');
    await expect.poll(async () => (await page.textContent('#pg-row-stats')) ?? '', PLAYGROUND_DRAWN).toContain('fully masked');
    expect(await weights()).toEqual([[0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]]);
    await page.fill('#pg-keylen', '4');
    await expect.poll(async () => (await page.textContent('#pg-row-stats')) ?? '', PLAYGROUND_DRAWN).not.toContain('fully masked');

    // The URL carries the view: reloading it restores the edited Q, mask and backend.
    await page.goto(page.url());
    await page.waitForSelector('body[data-ready="true"]');
    await openAllSections(page);
    await expect.poll(version, PLAYGROUND_DRAWN).toBeGreaterThan(0);
    expect(await page.inputValue('#pg-q')).toBe('3 0 1\n0 1 0\n1 1 2');
    expect(await page.inputValue('#pg-mask')).toBe('padding');
    expect(await page.inputValue('#pg-backend')).toBe('scalar');
    await page.waitForSelector('.catalogue[data-ready="true"]', { timeout: 120_000 });
    await shot('playground');
    expect(s.problems).toEqual([]);
  });

  it('opens a worked example in the playground with the same result', async () => {
    const page = s.page;
    await page.selectOption('#example-select', 'ex-full-pipeline-3x4');
    await page.waitForSelector('#stage-panel[data-ready="ex-full-pipeline-3x4"]');
    await page.selectOption('#pg-backend', 'auto');
    const v = Number(await page.getAttribute('#pg-results', 'data-version'));
    await page.click('#open-in-playground');
    await expect.poll(async () => Number(await page.getAttribute('#pg-results', 'data-version')), PLAYGROUND_DRAWN).toBeGreaterThan(v);
    await expect.poll(() => page.inputValue('#pg-mode'), PLAYGROUND_DRAWN).toBe('x');
    await expect.poll(async () => (await page.textContent('#pg-summary')) ?? '', PLAYGROUND_DRAWN).toContain('mask: none');
    await playgroundDrawn();
    const run = await runExample(attn, workedExamples.find((e) => e.id === 'ex-full-pipeline-3x4')!);
    const out = await page.$$eval('#pg-output table.matrix td', (tds) => tds.map((td) => Number((td as HTMLElement).dataset.v)));
    out.forEach((x, i) => expect(x).toBeCloseTo(run.values.output!.data[i], 5));
  });

  it('draws random Q, K, V of the shapes typed in the shape fields', async () => {
    const page = s.page;
    await page.selectOption('#pg-mode', 'qkv');
    for (const [field, n] of [['#pg-lq', '2'], ['#pg-lk', '3'], ['#pg-dk', '5'], ['#pg-dv', '2']]) await page.fill(field, n);
    await page.click('#pg-random');
    await expect.poll(async () => (await page.textContent('#pg-summary')) ?? '', PLAYGROUND_DRAWN).toContain('Q [2 × 5], K [3 × 5], V [3 × 2]');
    await playgroundDrawn();
    const rows = (id: string) => page.inputValue(id).then((t) => t.trim().split('\n').map((r) => r.trim().split(/\s+/).length));
    expect(await rows('#pg-q')).toEqual([5, 5]);
    expect(await rows('#pg-k')).toEqual([5, 5, 5]);
    expect(await rows('#pg-v')).toEqual([2, 2, 2]);
    expect(await page.$$eval('#pg-output table.matrix tbody tr', (trs) => trs.map((tr) => tr.querySelectorAll('td').length))).toEqual([2, 2]);
    expect(await page.textContent('#pg-error')).toBe('');
  });

  it("playground variants act on the heatmap through the library's options: a window of 0, a sink, documents", async () => {
    const page = s.page;
    const weights = () => page.$$eval('#pg-weights table.matrix tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => Number((td as HTMLElement).dataset.v))));
    const matrix = (id: string) => page.inputValue(id).then((t) => t.trim().split('\n').map((r) => r.trim().split(/\s+/).map(Number)));
    const tensorOf = (rows: number[][]) => ({ data: Float32Array.from(rows.flat()), shape: [rows.length, rows[0]!.length] });
    await page.selectOption('#pg-mode', 'qkv');
    await page.selectOption('#pg-mask', 'none');
    await page.fill('#pg-q', '1 0\n0 1');
    await page.fill('#pg-k', '1 0\n0 1\n1 1');
    await page.fill('#pg-v', '1 2\n3 4\n5 6');
    await expect.poll(async () => (await page.textContent('#pg-summary')) ?? '', PLAYGROUND_DRAWN).toContain('Q [2 × 2], K [3 × 2], V [3 × 2]');
    // Lq = 2 queries at positions 1, 2 (the last of Lk = 3); a window of 0 on both sides leaves key p.
    // Each field's input recomputes: wait for the outcome of both, not for the first recompute.
    await page.fill('#pg-win-left', '0');
    await page.fill('#pg-win-right', '0');
    await expect.poll(weights, PLAYGROUND_DRAWN).toEqual([[0, 1, 0], [0, 0, 1]]);
    expect(await page.textContent('#pg-summary')).toContain('window 0 left, 0 right');
    // The tile map of the same options on 512 tokens: each block of 32 rows reads its one tile.
    // It is drawn after the weights: wait for the whole drawing.
    await playgroundDrawn();
    expect(Number(await page.getAttribute('#pg-tiles', 'data-read'))).toBe(16);
    await page.locator('#playground').screenshot({ path: join(OUT, 'section-playground-variants.png') });
    // A sink joins each row's softmax: the weights are the library's own, and sum below 1.
    const [q, k, vv] = await Promise.all([matrix('#pg-q'), matrix('#pg-k'), matrix('#pg-v')]);
    const docs = (ids: number[]) => ({ data: Int32Array.from(ids), shape: [1, ids.length] });
    const want = attn.scaledDotProductAttentionSync(tensorOf(q), tensorOf(k), tensorOf(vv), {
      window: { left: 1, right: 0 }, sinks: new Float32Array([0.5]), queryDocuments: docs([0, 1]), keyDocuments: docs([0, 0, 1]), returnWeights: true,
    });
    const isWanted = (shown: number[][]) => shown.flat().every((x, i) => Math.abs(x - want.weights!.data[i]!) < 5e-6);
    await page.fill('#pg-win-left', '1');
    await page.fill('#pg-sink', '0.5');
    await page.fill('#pg-docs', '2, 1');
    await expect.poll(async () => isWanted(await weights()), PLAYGROUND_DRAWN).toBe(true);
    await expect.poll(() => page.url()).toContain('psink=0.5');
    const shown = await weights();
    shown.flat().forEach((x, i) => expect(x).toBeCloseTo(want.weights!.data[i]!, 5));
    shown.forEach((r) => expect(r.reduce((a, b) => a + b, 0)).toBeLessThan(1));
    await playgroundDrawn();
    expect(await page.textContent('#pg-pytorch')).toContain('torch.cat([masked, torch.full(');
    for (const field of ['#pg-win-left', '#pg-win-right', '#pg-sink', '#pg-docs']) await page.fill(field, '');
    await expect.poll(() => page.url()).not.toContain('psink');
    expect(await page.textContent('#pg-error')).toBe('');
  });

  it('scaling lab finishes and plots', async () => {
    const page = s.page;
    await page.click('#lab-run');
    await page.waitForSelector('#scaling[data-done="true"]', { timeout: 120_000 });
    expect(await page.locator('[data-testid="lab-std"] svg').count()).toBeGreaterThan(0);
    expect(await page.locator('[data-testid="lab-hist"] svg').count()).toBe(2);
    expect(await page.textContent('#lab-progress-text')).toMatch(/^Done/);
    // The temperature slider acts on the attention weights.
    const before = await page.textContent('#lab-temp-stats');
    await page.locator('#lab-temp').fill('-1');
    await expect.poll(() => page.textContent('#lab-temp-stats')).not.toBe(before);
    // A 1000 × 1000 run works in chunks: the progress bar moves within a d_k and the page stays
    // responsive (its longest main-thread task is printed, not asserted: timings are not tests).
    await page.evaluate(() => {
      const w = window as unknown as { longestTask: number };
      w.longestTask = 0;
      new PerformanceObserver((list) => list.getEntries().forEach((e) => (w.longestTask = Math.max(w.longestTask, e.duration)))).observe({ type: 'longtask' });
    });
    await page.selectOption('#lab-samples', '1000');
    expect(new URL(page.url()).searchParams.get('ls')).toBe('1000');
    await page.click('#lab-run');
    await expect.poll(() => page.evaluate(() => (document.getElementById('lab-progress') as HTMLProgressElement).value % 1), { timeout: 60_000 }).toBeGreaterThan(0);
    await page.waitForSelector('#scaling[data-done="true"]', { timeout: 180_000 });
    console.log(`scaling lab, 1000 samples: ${await page.textContent('#lab-progress-text')} Longest main-thread task: ${Math.round(await page.evaluate(() => (window as unknown as { longestTask: number }).longestTask))} ms`);
    await page.selectOption('#lab-samples', '64');
    expect(new URL(page.url()).searchParams.get('ls')).toBeNull();
    await shot('scaling');
    expect(s.problems).toEqual([]);
  });

  it('multi-head view, cost calculator and benchmark, and the PyTorch snippet render', async () => {
    const page = s.page;
    expect(await page.locator('#multihead [data-testid="head-view"] [data-head]').count()).toBe(4);
    expect(await page.locator('#mh-causal-overlay [data-align]').count()).toBe(2);
    // Eight heads are a grid of small maps (4 to a row at 1280 px), one of them shown in full below.
    const version = Number(await page.getAttribute('#multihead', 'data-version'));
    await page.selectOption('#mh-heads', '8');
    await expect.poll(async () => Number(await page.getAttribute('#multihead', 'data-version'))).toBeGreaterThan(version);
    const cards = page.locator('#multihead [data-testid="head-view"] [data-head]');
    expect(await cards.count()).toBe(8);
    const tops = new Set(await cards.evaluateAll((cs) => cs.map((c) => Math.round(c.getBoundingClientRect().top))));
    expect(tops.size).toBe(2);
    await cards.nth(2).click();
    expect(await page.getAttribute('#mh-detail [data-detail-head]', 'data-detail-head')).toBe('3');
    expect(new URL(page.url()).searchParams.get('mhsel')).toBe('3');
    expect(new URL(page.url()).searchParams.get('mhh')).toBe('8');
    await shot('multihead');
    await page.selectOption('#mh-heads', '4');
    await expect.poll(() => cards.count()).toBe(4);
    await cards.nth(0).click();
    expect(new URL(page.url()).searchParams.get('mhsel')).toBeNull();
    expect(await page.textContent('#cost-result')).toContain('144 MiB (151.0 MB)');
    await page.selectOption('#bench-max', '256');
    await page.click('#bench-run');
    await page.waitForSelector('#cost[data-bench-done="true"]', { timeout: 120_000 });
    expect(await page.locator('[data-testid="bench-plot"] svg').count()).toBeGreaterThan(0);
    // WebGPU is measured too, labelled as the CPU emulation it is here.
    expect(await page.textContent('#bench-table')).toContain('webgpu — SwiftShader (CPU emulation)');
    await shot('cost');
    await page.selectOption('#example-select', 'ex-dog-bites-man');
    await page.waitForSelector('#stage-panel[data-ready="ex-dog-bites-man"]');
    expect(await page.textContent('#pytorch code')).toContain('torch.softmax');
    await shot('pytorch');
    await page.emulateMedia({ colorScheme: 'dark' });
    await shot('formula-dark');
    await page.emulateMedia({ colorScheme: 'light' });
    expect(s.problems).toEqual([]);
  });

  it('fits a phone-width screen: nothing widens the page (wide formulas, tables and code scroll in place)', async () => {
    const page = s.page;
    await page.setViewportSize({ width: 390, height: 844 });
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]', { timeout: 60_000 });
    await openAllSections(page);
    await page.waitForSelector('.catalogue[data-ready="true"]', { timeout: 120_000 });
    await expect.poll(() => page.getAttribute('#pg-results', 'data-version')).not.toBe('0');
    const widths = await page.evaluate(() => ({ page: document.documentElement.scrollWidth, viewport: window.innerWidth }));
    expect(widths.page).toBeLessThanOrEqual(widths.viewport);
    await page.screenshot({ path: join(OUT, 'narrow-top.png') });
    await page.setViewportSize({ width: 1280, height: 900 });
    expect(s.problems).toEqual([]);
  });
});

describe('demo page layout, URL state and themes (1280 px and 390 px)', () => {
  const ready = async () => {
    const page = s.page;
    await page.waitForSelector('body[data-ready="true"]', { timeout: 60_000 });
    await openAllSections(page);
    await page.waitForSelector('.catalogue[data-ready="true"]', { timeout: 120_000 });
    await expect.poll(() => page.getAttribute('#pg-results', 'data-version')).not.toBe('0');
  };
  const open = async (query = '') => {
    await s.page.goto(`${s.url}${query}`);
    await ready();
  };
  /** Boxes of the core content that reach outside the viewport (a box may scroll inside, never stick out). */
  const outside = () =>
    s.page.evaluate(() => {
      const vw = window.innerWidth;
      const core = 'main > section, #intro-figure, .formula-box, #stepper, .steps-row, #stage-panel .view, #example-detail, .catalogue, table.compare tr, #playground .controls, .matrix-inputs, #pg-results .view, .snippet, header.top nav';
      return [...document.querySelectorAll(core)]
        .filter((e) => (e as HTMLElement).offsetParent !== null)
        .map((e) => ({ what: `${e.tagName.toLowerCase()}${e.id ? `#${e.id}` : ''}.${(e as HTMLElement).className}`, r: e.getBoundingClientRect() }))
        .filter(({ r }) => r.left < -0.5 || r.right > vw + 0.5)
        .map(({ what, r }) => `${what}: ${Math.round(r.left)}…${Math.round(r.right)} of ${vw}`);
    });
  /** Whether each display formula in `selector` lies inside its box (fitted, not cut or scrolled). */
  const formulaFits = (selector: string) =>
    s.page.$$eval(selector, (boxes) =>
      boxes.map((b) => {
        const box = b.getBoundingClientRect();
        const k = b.querySelector('.katex-display > .katex')!.getBoundingClientRect();
        const d = b.querySelector('.katex-display') as HTMLElement;
        return { inside: k.left >= box.left - 0.5 && k.right <= box.right + 0.5, scrolls: d.scrollWidth > d.clientWidth + 1 };
      }),
    );

  for (const width of [1280, 390]) {
    it(`${width} px: a fresh load leaves the URL alone, nothing sticks out sideways, the formula fits, ·V shows A, V and O`, async () => {
      const page = s.page;
      await page.setViewportSize({ width, height: width > 600 ? 900 : 844 });
      await open();
      expect(page.url(), 'defaults are not written into the URL').toBe(s.url);
      expect(await page.evaluate(() => document.scrollingElement!.scrollWidth - window.innerWidth)).toBeLessThanOrEqual(0);
      expect(await outside()).toEqual([]);
      expect(await formulaFits('.formula-box')).toEqual([{ inside: true, scrolls: false }]);
      expect(await formulaFits('#pg-results .math.display')).toEqual([{ inside: true, scrolls: false }]);
      // The introduction's picture is the library's softmax of the “dog bites man” scores.
      const dog = workedExamples.find((e) => e.id === 'ex-dog-bites-man')!;
      const introWeights = attn.softmax({ data: Float32Array.from(dog.inputs.scores!.data as number[]), shape: [3, 3] });
      const introCells = await page.$$eval('#intro-figure td[data-v]', (tds) => tds.map((td) => ({ v: Number((td as HTMLElement).dataset.v), text: td.textContent ?? '' })));
      expect(introCells.map((c) => c.v)).toEqual(Array.from(introWeights.data));
      introCells.forEach((c, i) => expect(shownMatches(c.text, introWeights.data[i])).toBe(true));
      // Once the library has loaded in the browser, it computes the same weights again and says so.
      expect(await page.getAttribute('#intro-figure', 'data-checked')).toBe('same');
      // The page opens on a gentle example; its ·V stage shows the weights, the values and the output.
      expect(await page.inputValue('#example-select')).toBe('ex-abc-geometry');
      await page.locator('#stepper .steps button[data-stage="output"]').click();
      await page.waitForSelector('#stage-panel [data-stage="output"]');
      expect(await page.$$eval('#stage-panel figure[data-testid="heatmap"]', (fs) => fs.map((f) => (f as HTMLElement).dataset.name))).toEqual(['weights A', 'values V', 'output O']);
      expect(await formulaFits('#stage-panel .math.display')).toEqual([{ inside: true, scrolls: false }]);
      await page.locator('#stepper').screenshot({ path: join(OUT, `page-${width}-light-stage-output.png`) });
      expect(await outside()).toEqual([]);
      // The stage's formula reads with the number: S/√2, not “/√2” alone.
      await page.locator('#stepper .steps button[data-stage="scaled"]').click();
      expect(await page.textContent('#stage-panel .katex-mathml annotation')).toContain('S/\\sqrt{2}');
      // Previous/Next stay next to the stage: in view while the stage is scrolled through.
      await page.locator('#stage-panel .view').last().scrollIntoViewIfNeeded();
      const nav = await page.locator('#stepper .steps-row').boundingBox();
      expect(nav!.y).toBeGreaterThanOrEqual(-1);
      expect(nav!.y + nav!.height).toBeLessThanOrEqual((await page.evaluate(() => window.innerHeight)) + 1);
      // The printed-vs-computed rows: on a phone each row is a card, its verdict as wide as the card.
      await page.selectOption('#example-select', 'ex-full-pipeline-3x4');
      await page.waitForSelector('#stage-panel[data-ready="ex-full-pipeline-3x4"]');
      const verdict = await page.locator('#example-detail tr[data-target="output"] td.verdict').boundingBox();
      expect(verdict!.width).toBeGreaterThan(width > 600 ? 150 : 300);
      await page.locator('#example-detail').screenshot({ path: join(OUT, `page-${width}-light-compare.png`) });
      expect(await outside()).toEqual([]);
      expect(await page.evaluate(() => document.scrollingElement!.scrollWidth - window.innerWidth)).toBeLessThanOrEqual(0);
      // Big numbers stay inside their heatmap cells (compact format), e.g. scores in the millions.
      const v = Number(await page.getAttribute('#pg-results', 'data-version'));
      await page.fill('#pg-q', '1000 -2000 3000\n-0.001 12345 -0.5\n150 -75.25 9.5');
      await expect.poll(async () => Number(await page.getAttribute('#pg-results', 'data-version')), PLAYGROUND_DRAWN).toBeGreaterThan(v);
      await page.waitForSelector('#pg-masked figure.heatmap svg');
      const overfull = await page.$$eval('#pg-results figure.heatmap svg', (svgs) =>
        svgs.flatMap((svg) => {
          const cell = svg.querySelector('g[aria-label="cell"] rect') as SVGGraphicsElement | null;
          if (!cell) return [];
          const w = cell.getBoundingClientRect().width;
          return [...svg.querySelectorAll('g[aria-label="text"] text')].filter((t) => t.getBoundingClientRect().width > w - 2).map((t) => `${t.textContent} (${Math.round(t.getBoundingClientRect().width)} px in ${Math.round(w)} px)`);
        }),
      );
      expect(overfull).toEqual([]);
      expect(await page.locator('#pg-results g[aria-label="text"] text').count()).toBeGreaterThan(0);
      expect(s.problems.join('\n')).toBe('');
    });
  }

  it('restores the stepper step and example from the URL, and writes a reader’s step', async () => {
    const page = s.page;
    await page.setViewportSize({ width: 1280, height: 900 });
    await open('?ex=ex-exercise-4&step=3');
    await page.waitForSelector('#stage-panel[data-ready="ex-exercise-4"]');
    expect(await page.locator('#stepper .steps button[aria-selected="true"]').getAttribute('data-stage')).toBe('masked');
    expect(page.url()).toBe(`${s.url}?ex=ex-exercise-4&step=3`);
    // The default example takes the step without an ex parameter.
    await open('?step=2');
    expect(await page.inputValue('#example-select')).toBe('ex-abc-geometry');
    expect(await page.getAttribute('#stage-panel', 'data-shown')).toBe('ex-abc-geometry:2');
    await page.locator('#stepper .steps button').nth(4).click();
    expect(new URL(page.url()).searchParams.get('step')).toBe('4');
    await page.locator('#stepper .steps button').nth(0).click();
    expect(new URL(page.url()).searchParams.get('step')).toBeNull();
    // Random inputs go into the URL as a seed and shapes, and come back from them.
    await page.selectOption('#pg-mode', 'qkv');
    for (const [field, n] of [['#pg-lq', '16'], ['#pg-lk', '16'], ['#pg-dk', '64'], ['#pg-dv', '64']]) await page.fill(field, n);
    await page.click('#pg-random');
    await expect.poll(() => new URL(page.url()).searchParams.get('prnd')).toMatch(/^\d+:16,16,64,64$/);
    expect(new URL(page.url()).searchParams.get('pq')).toBeNull();
    expect(page.url().length).toBeLessThan(300);
    const q = await page.inputValue('#pg-q');
    await page.goto(page.url());
    await ready();
    expect(await page.inputValue('#pg-q')).toBe(q);
    expect(s.problems.join('\n')).toBe('');
  });

  it('labels: stage tabs read as words, the custom mask names its queries and keys, the cost fields reject 0 and empty; every view in the URL', async () => {
    const page = s.page;
    await page.setViewportSize({ width: 1280, height: 900 });
    await open('?ex=ex-masks&var=1');
    await page.waitForSelector('#stage-panel[data-ready="ex-masks"]');
    expect(await page.inputValue('#variant-select')).toBe('1');
    // A screen reader hears each stage tab's label, never TeX source.
    const tabs = await page.locator('#stepper .steps').ariaSnapshot();
    expect(tabs).toContain('tab "Step 1:');
    expect(tabs).not.toMatch(/\\|\^\{|_\{/);
    // The custom-mask grid: key labels above the cells, query labels beside them.
    await page.selectOption('#pg-mode', 'qkv');
    await page.fill('#pg-tokq', 'the, cat');
    await page.fill('#pg-q', '1 0\n0 1');
    await page.fill('#pg-k', '1 0\n0 1\n1 1');
    await page.fill('#pg-v', '1\n2\n3');
    await page.fill('#pg-tokk', 'a, b, c');
    await page.selectOption('#pg-mask', 'custom');
    await expect.poll(() => page.$$eval('.mask-grid .mask-key', (ks) => ks.map((k) => k.textContent))).toEqual(['a', 'b', 'c']);
    expect(await page.$$eval('.mask-grid .mask-query', (qs) => qs.map((q) => q.textContent))).toEqual(['the', 'cat']);
    expect(await page.getAttribute('.mask-grid [data-cell="1,2"]', 'aria-label')).toBe('query cat → key c: may attend');
    // Cost: 0 and empty are refused with a message naming the field; a valid value goes into the URL.
    await page.fill('#cost-n', '0');
    expect(await page.textContent('#cost-error')).toContain('sequence length n: 0 is too small (min 1); a whole number from 1 to 16,777,216, please.');
    expect(await page.getAttribute('#cost-n', 'aria-invalid')).toBe('true');
    await page.fill('#cost-heads', '');
    expect(await page.textContent('#cost-error')).toContain('heads: empty; a whole number from 1 to 4,096, please.');
    await page.fill('#cost-n', '1024');
    await page.fill('#cost-heads', '12');
    expect(await page.textContent('#cost-error')).toBe('');
    expect(await page.getAttribute('#cost-n', 'aria-invalid')).toBeNull();
    expect(new URL(page.url()).searchParams.get('cn')).toBe('1024');
    expect(new URL(page.url()).searchParams.get('ch')).toBeNull();
    // The whole view comes back from the URL.
    const url = page.url();
    await page.goto(url);
    await ready();
    expect(await page.inputValue('#cost-n')).toBe('1024');
    expect(await page.inputValue('#pg-mask')).toBe('custom');
    expect(await page.inputValue('#variant-select')).toBe('1');
    expect(s.problems.join('\n')).toBe('');
  });

  it('shows gradients that agree with their finite differences to every digit shown', async () => {
    const page = s.page;
    await open('?ex=ex-gradients');
    await page.waitForSelector('#stage-panel[data-ready="ex-gradients"]');
    const rows = await page.$$eval('#example-detail figure.extra table tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? '')));
    expect(rows.map((r) => r[0])).toEqual(['∂L/∂Q', '∂L/∂K', '∂L/∂V']);
    for (const r of rows) expect(r[2], r[0]).toBe(r[1]);
  });

  it(`toggles dark mode (remembered across a reload)${GALLERY ? '; screenshots of every section in both themes at both widths' : ''}`, async () => {
    const page = s.page;
    const bg = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    await page.emulateMedia({ colorScheme: 'light' });
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: width > 600 ? 900 : 844 });
      await open();
      for (const theme of ['light', 'dark'] as const) {
        if ((await page.evaluate(() => document.documentElement.dataset.theme ?? 'light')) !== theme) {
          const before = await bg();
          await page.click('#theme-toggle');
          expect(await page.evaluate(() => document.documentElement.dataset.theme)).toBe(theme);
          expect(await bg()).not.toBe(before);
        }
        await page.screenshot({ path: join(OUT, `page-${width}-${theme}-top.png`) });
        if (GALLERY) {
          const sections = await page.evaluate(() => [...document.querySelectorAll('main > section[id]')].map((e) => e.id));
          for (const id of [...sections, 'stepper', 'example-detail']) await page.locator(`#${id}`).screenshot({ path: join(OUT, `page-${width}-${theme}-${id}.png`) });
        }
      }
      // The choice is remembered: a reload stays dark.
      await page.reload();
      await ready();
      expect(await page.evaluate(() => document.documentElement.dataset.theme)).toBe('dark');
      expect(await page.getAttribute('#theme-toggle', 'aria-pressed')).toBe('true');
      await page.click('#theme-toggle');
      expect(await page.evaluate(() => localStorage.getItem('sdpa-theme'))).toBe('light');
    }
    // With no choice stored the system setting decides.
    await page.evaluate(() => localStorage.removeItem('sdpa-theme'));
    await page.emulateMedia({ colorScheme: 'dark' });
    await open();
    expect(await page.getAttribute('#theme-toggle', 'aria-pressed')).toBe('true');
    await page.emulateMedia({ colorScheme: 'light' });
    await page.setViewportSize({ width: 1280, height: 900 });
    expect(s.problems.join('\n')).toBe('');
  });
});
