// The demo's explainers (variance lab, online softmax, gradient view, precision lab) end at exactly the library's
// own output: each number they show is checked against sdpa-web run here in Node on the same inputs.
import { createAttention, type Attention } from 'sdpa-web';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { float16Precision, gradientView, onlineTrace, precisionInputs, varianceAt, worstError } from '../../web/demo/src/lib/explainers';
import { planCall, WEBGPU_DEFAULT_LIMITS } from '../../web/demo/src/lib/planner';
import { pytorchAttention, TORCH_VARIANTS } from '../../web/demo/src/lib/pytorch';
import { openAllSections, start, type Session } from './support';

let s: Session;
let attn: Attention;

beforeAll(async () => {
  attn = await createAttention({ backend: 'auto' });
  s = await start();
});

afterAll(async () => {
  attn?.dispose();
  await s?.close();
});

const relClose = (a: number, b: number, rel: number) => Math.abs(a - b) <= rel * Math.max(1, Math.abs(b));

describe('demo explainers', () => {
  for (const width of [1280, 390]) {
    it(`${width} px: the variance lab's variances and weights are the library's; the d_k is in the URL`, async () => {
      const page = s.page;
      await page.setViewportSize({ width, height: width > 600 ? 900 : 844 });
      await page.goto(`${s.url}?vdk=256`);
      await page.waitForSelector('body[data-ready="true"]');
      await openAllSections(page);
      await page.waitForSelector('#variance[data-shown="256"]');
      const want = await varianceAt(attn, 256);
      expect(relClose(Number(await page.getAttribute('[data-testid="var-unscaled"]', 'data-v')), want.varUnscaled, 1e-9)).toBe(true);
      expect(relClose(Number(await page.getAttribute('[data-testid="var-scaled"]', 'data-v')), want.varScaled, 1e-9)).toBe(true);
      // Var(q·k) ≈ d_k and ≈ 1 after the scaling (16,384 samples: within 10 %).
      expect(Math.abs(want.varUnscaled / 256 - 1)).toBeLessThan(0.1);
      expect(Math.abs(want.varScaled - 1)).toBeLessThan(0.1);
      const shownWeights = JSON.parse((await page.getAttribute('[data-testid="var-weights-scaled"] [data-weights]', 'data-weights'))!) as number[];
      shownWeights.forEach((w, j) => expect(relClose(w, want.weightsScaled[j], 1e-6), `weight ${j}`).toBe(true));
      // The slider moves d_k; the default is not written.
      await page.locator('#var-dk').fill('6');
      await page.waitForSelector('#variance[data-shown="64"]');
      expect(new URL(page.url()).searchParams.get('vdk')).toBeNull();
      await page.waitForSelector('#variance[data-done="true"]', { timeout: 60_000 });
      expect(await page.locator('[data-testid="var-plot"] svg').count()).toBeGreaterThan(0);
      // Every explainer's formula is whole inside its box (scaled to fit on a phone, never cut).
      const fits = await page.$$eval('#variance .math.display, #gradients .math.display, #precision .math.display', (boxes) =>
        boxes.map((b) => {
          const box = b.getBoundingClientRect();
          const k = b.querySelector('.katex-display > .katex')!.getBoundingClientRect();
          const d = b.querySelector('.katex-display') as HTMLElement;
          return k.left >= box.left - 0.5 && k.right <= box.right + 0.5 && d.scrollWidth <= d.clientWidth + 1;
        }),
      );
      expect(fits).toEqual([true, true, true]);
      expect(await page.evaluate(() => document.scrollingElement!.scrollWidth - window.innerWidth)).toBeLessThanOrEqual(0);
      expect(s.problems.join('\n')).toBe('');
    });
  }

  for (const width of [1280, 390]) {
    it(`${width} px: the online softmax's tiles are the SIMD kernel's trace and end at the library's output row; the view is in the URL`, async () => {
      const page = s.page;
      await page.setViewportSize({ width, height: width > 600 ? 900 : 844 });
      await page.goto(`${s.url}?okeys=256&orow=2&ospike=150`);
      await page.waitForSelector('body[data-ready="true"]');
      await openAllSections(page);
      await page.waitForSelector('#online[data-shown="256:2:150"]');
      const want = await onlineTrace(attn, 256, 2, 150);
      expect(want.steps.map((st) => st.firstKey)).toEqual([0, 64, 128, 192]);
      // The strong key (k151) raises the running max in its tile, the third.
      expect(want.steps.map((st) => st.rescale < 1)).toEqual([false, false, true, false]);
      const rows = await page.$$eval('[data-testid="online-steps"] tbody tr', (trs) => trs.map((tr) => JSON.parse((tr.querySelector('td[data-partial]') as HTMLElement).dataset.partial!) as number[]));
      expect(rows.length).toBe(want.steps.length);
      rows.forEach((partial, n) => partial.forEach((x, c) => expect(relClose(x, want.steps[n].partial[c], 1e-5), `tile ${n + 1} column ${c}`).toBe(true)));
      const final = JSON.parse((await page.getAttribute('[data-testid="online-final"]', 'data-v'))!) as number[];
      const output = JSON.parse((await page.getAttribute('[data-testid="online-output"]', 'data-v'))!) as number[];
      // The last tile's a/ℓ is the output row, in the page and here, and both are the float64 reference's within float32 rounding.
      output.forEach((x, c) => {
        expect(relClose(final[c], x, 1e-6), `a/ℓ column ${c}`).toBe(true);
        expect(relClose(x, want.callOutput[c], 1e-5), `output column ${c}`).toBe(true);
        expect(Math.abs(x - want.reference[c])).toBeLessThan(1e-5);
      });
      want.output.forEach((x, c) => expect(x).toBe(want.callOutput[c]));
      // The update rule is whole inside its box at both widths.
      const fits = await page.$eval('#online .math.display', (b) => {
        const box = b.getBoundingClientRect();
        const k = b.querySelector('.katex-display > .katex')!.getBoundingClientRect();
        const d = b.querySelector('.katex-display') as HTMLElement;
        return k.left >= box.left - 0.5 && k.right <= box.right + 0.5 && d.scrollWidth <= d.clientWidth + 1;
      });
      expect(fits).toBe(true);
      // The same row traced inside the WebGPU kernel (SwiftShader here): its own tiles, the same output row.
      await page.waitForSelector('#online[data-gpu-shown="256:2:150"]', { timeout: 120_000 });
      const gpuFinal = JSON.parse((await page.getAttribute('[data-testid="online-webgpu-final"]', 'data-v'))!) as number[];
      const gpuOutput = JSON.parse((await page.getAttribute('[data-testid="online-webgpu-output"]', 'data-v'))!) as number[];
      gpuOutput.forEach((x, c) => {
        expect(relClose(gpuFinal[c], x, 1e-6), `WebGPU a/ℓ column ${c}`).toBe(true);
        expect(Math.abs(x - want.reference[c])).toBeLessThan(1e-5);
      });
      expect(await page.locator('[data-testid="online-webgpu-steps"] tbody tr').count()).toBeGreaterThan(0);
      // Both tables fit their boxes (on a phone they drop two columns and wrap a/ℓ).
      const overflow = await page.$$eval('#online .trace-steps', (boxes) => boxes.map((b) => b.scrollWidth - b.clientWidth));
      expect(overflow).toEqual([0, 0]);
      expect(await page.evaluate(() => document.scrollingElement!.scrollWidth - window.innerWidth)).toBeLessThanOrEqual(0);
      await page.locator('#online-row').selectOption('0');
      await page.waitForSelector('#online[data-shown="256:0:150"]');
      expect(new URL(page.url()).searchParams.get('orow')).toBeNull();
      expect(s.problems.join('\n')).toBe('');
    });
  }

  it('the gradient view’s Jacobian chain ends at the library’s ∂L/∂Q, and every gradient agrees with finite differences', async () => {
    const page = s.page;
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${s.url}?grow=2`);
    await page.waitForSelector('body[data-ready="true"]');
    await openAllSections(page);
    await page.waitForSelector('#gradients[data-row="1"]');
    const want = await gradientView(attn, 1);
    // #grad-chain: a row per column d_j; its cells are the page's chain, the float64 and the float32 backward.
    const byColumn = await page.$$eval('#grad-chain tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => Number((td as HTMLElement).dataset.v))));
    const chain = [0, 1, 2].map((way) => byColumn.map((cells) => cells[way]!));
    const e = want.dQrowChain.length;
    const lib64 = Array.from(want.reference64.dQuery.data).slice(e, 2 * e);
    const lib32 = Array.from(want.library.dQuery.data).slice(e, 2 * e);
    chain[0].forEach((x, j) => expect(relClose(x, lib64[j], 1e-12), `chain d${j + 1}`).toBe(true));
    chain[1].forEach((x, j) => expect(relClose(x, lib64[j], 1e-12), `float64 d${j + 1}`).toBe(true));
    chain[2].forEach((x, j) => expect(relClose(x, lib32[j], 1e-5), `float32 d${j + 1}`).toBe(true));
    // The page's finite differences agree with the library's float64 backward to every digit shown.
    const tables = await page.$$eval('#gradients table.grad-numbers', (ts) => ts.map((t) => [...t.querySelectorAll('tbody tr')].map((tr) => [...tr.querySelectorAll('td')].map((td) => ({ text: td.textContent ?? '', v: Number((td as HTMLElement).dataset.v) })))));
    expect(tables.length).toBe(3);
    for (const [name, rows] of (['dQuery', 'dKey', 'dValue'] as const).map((n, i) => [n, tables[i]] as const)) {
      // The library's float32 and float64 gradients, and the finite differences, as the page shows them.
      rows[0].forEach((c, j) => expect(relClose(c.v, want.library[name].data[j], 1e-5), `${name} float32 [${j}]`).toBe(true));
      rows[1].forEach((c, j) => expect(relClose(c.v, want.reference64[name].data[j], 1e-12), `${name} float64 [${j}]`).toBe(true));
      rows[2].forEach((c, j) => expect(relClose(c.v, want.finite[name][j], 1e-9), `${name} finite difference [${j}]`).toBe(true));
      // The finite differences agree with the library's float64 backward to every digit shown.
      expect(rows[2].map((c) => c.text)).toEqual(rows[1].map((c) => c.text));
      expect(Math.max(...want.finite[name].map((x, j) => Math.abs(x - want.reference64[name].data[j])))).toBeLessThan(1e-6);
    }
    expect(new URL(page.url()).searchParams.get('grow')).toBe('2');
    expect(s.problems.join('\n')).toBe('');
  });

  it('the precision lab’s errors for scalar and SIMD128 are the library’s; every backend is within the tests’ rule', async () => {
    const page = s.page;
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${s.url}?prl=128&prs=8`);
    await page.waitForSelector('body[data-ready="true"]');
    await openAllSections(page);
    await page.waitForSelector('#precision[data-done="true"]', { timeout: 120_000 });
    const inputs = precisionInputs(attn, 128, 8);
    const o64 = attn.referenceAttention(inputs.q, inputs.k, inputs.v, inputs.options).output.data;
    for (const [engine, options] of [['scalar', { backend: 'scalar' }], ['simd128', { backend: 'simd', relaxedSimd: false }]] as const) {
      const inst = await createAttention(options);
      const want = worstError((await inst.scaledDotProductAttention(inputs.q, inputs.k, inputs.v, inputs.options)).output.data, o64, 64).error;
      inst.dispose();
      const shown = Number(await page.getAttribute(`#prec-table tr[data-engine="${engine}"] td[data-v]`, 'data-v'));
      expect(relClose(shown, want, 1e-6), `${engine}: page ${shown}, library ${want}`).toBe(true);
    }
    // float16 storage on SIMD128 (bit-identical on every engine): the library's numbers, within the float16 rule.
    const simd128 = await createAttention({ backend: 'simd', relaxedSimd: false });
    const half = float16Precision(simd128, attn, inputs);
    simd128.dispose();
    const halfShown = await page.$$eval('#prec-float16 tr[data-engine="float16"] td[data-v]', (tds) => tds.map((td) => Number((td as HTMLElement).dataset.v)));
    expect(halfShown).toEqual([half.storage, half.excess]);
    expect(half.storage).toBeGreaterThan(10 * half.excess); // storage, not arithmetic, is what float16 costs
    expect(await page.getAttribute('#prec-float16 tbody td:last-child', 'class')).toBe('ok');
    // Chromium runs all four here (relaxed SIMD, and WebGPU on its software adapter).
    const verdicts = await page.$$eval('#prec-table tbody tr', (trs) => trs.map((tr) => [(tr as HTMLElement).dataset.engine, tr.querySelector('td.ok, td.slip, td.note')?.className]));
    expect(verdicts).toEqual([['scalar', 'ok'], ['simd128', 'ok'], ['relaxed', 'ok'], ['webgpu', 'ok']]);
    expect(await page.locator('#prec-sweeps svg').count()).toBeGreaterThanOrEqual(2);
    expect(s.problems.join('\n')).toBe('');
  });

  it('Copy as PyTorch names the PyTorch it needs, and gives the FlexAttention form for the variants SDPA has no option for', async () => {
    const q = { data: [1, 0, 0, 1, 1, 1], shape: [3, 2] }, k = { data: [1, 0, 0, 1, 1, 1, 0.5, 0.5], shape: [4, 2] };
    const plain = pytorchAttention(q, k, k, { title: 'plain', options: { isCausal: true } });
    expect(plain).toContain('# Needs PyTorch >= 2.1');
    expect(plain).toContain('F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=scale)');
    expect(plain).not.toContain('flex_attention');
    const variants = pytorchAttention(q, k, k, { title: 'variants', options: { isCausal: { offset: 1 }, softcap: 5, window: { left: 1 }, alibi: true } });
    expect(variants).toContain('the FlexAttention form needs PyTorch >= 2.5');
    expect(variants).toContain('def score_mod(score, b, h, q_idx, kv_idx):');
    expect(variants).toContain('    s = 5 * torch.tanh(s / 5)  # softcap');
    expect(variants).toContain('    return (j <= p) & (j >= p - 1)');
    expect(variants).toContain('p = i_q + 1');
    // The softcap has no SDPA form: only FlexAttention is compared.
    expect(variants).not.toContain('F.scaled_dot_product_attention(');
    // Every variant the generator knows is one entry, and each is an option of the package.
    expect(TORCH_VARIANTS.map((v) => v.name)).toEqual(['softcap', 'ALiBi', 'attn_mask', 'causal', 'sliding window', 'documents', 'key lengths', 'attention sink']);
    const page = s.page;
    await page.goto(s.url);
    await page.waitForSelector('body[data-ready="true"]');
    await page.locator('#pytorch').scrollIntoViewIfNeeded();
    await page.waitForSelector('#stage-panel[data-ready]', { state: 'attached' });
    expect(await page.textContent('#pytorch')).toContain('PyTorch (≥ 2.1');
    expect(await page.textContent('#pytorch code')).toContain('# Needs PyTorch >= 2.1');
  });

  it('the device-limits planner: the library compiles the kernel it predicts, runs the longest call that fits and refuses one key more', async () => {
    const page = s.page;
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${s.url}?dl=small&dn=300`);
    await page.waitForSelector('body[data-ready="true"]');
    await openAllSections(page);
    await page.waitForSelector('#limits[data-checked="true"]', { timeout: 120_000 });
    const small = { ...WEBGPU_DEFAULT_LIMITS, maxStorageBufferBindingSize: 131072, maxBufferSize: 131072 };
    expect(await page.textContent('[data-testid="lim-max-length"]')).toBe('512');
    expect(await page.textContent('#lim-pipeline')).toContain(planCall(small, { batch: 1, heads: 1, length: 256, headDim: 64 }).pipelineKey);
    expect(await page.textContent('#lim-check')).toContain('the kernel and key tile the planner above predicts');
    expect(Number(await page.getAttribute('#lim-fits', 'data-error'))).toBeLessThan(1e-4);
    expect(await page.textContent('#lim-refused')).toMatch(/L = 513: .*RangeError: one head's key\/value \(Lk = 513, E = 64, Ev = 64\) needs 131328 bytes in one buffer/);
    // WebGPU's defaults: 12 heads of 4096 × 64 fit one piece.
    await page.selectOption('#lim-device', 'default');
    await page.fill('#lim-length', '4096');
    await expect.poll(() => page.textContent('[data-testid="lim-split"]')).toContain('1 piece of up to 12 heads, 1 dispatch');
    await page.fill('#lim-length', '65536');
    await expect.poll(() => page.textContent('[data-testid="lim-split"]')).toContain('2 pieces of up to 8 heads');
    await page.fill('#lim-length', '4096');
    expect(new URL(page.url()).searchParams.get('dl')).toBe('default');
    await expect.poll(() => new URL(page.url()).searchParams.get('dn')).toBeNull();
    expect(s.problems.join('\n')).toBe('');
  });
});
