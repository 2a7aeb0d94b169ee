// The demo's KV-cache explainer: the generation example's tiny decoder, stepped through on the page.
// Its tokens, each step's new query row, weights row and output row are checked against the same run
// of sdpa-web in Node, and the output row against the float64 reference over the keys and values the
// cache holds; the step controls and the URL state work; nothing widens the page at 390 px.
import { join } from 'node:path';
import { createAttention, type Attention } from 'sdpa-web';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cachedRows, headRow, kvCacheRun, type KvRun } from '../../web/demo/src/lib/kv-explainer';
import { OUT, start, type Session } from './support';

let s: Session;
let attn: Attention;
let run: KvRun;

beforeAll(async () => {
  attn = await createAttention({ backend: 'auto' });
  run = await kvCacheRun(attn);
  s = await start();
});

afterAll(async () => {
  attn?.dispose();
  await s?.close();
});

const relClose = (a: number, b: number, rel: number) => Math.abs(a - b) <= rel * Math.max(1, Math.abs(b));
const dataV = async (testid: string) => JSON.parse((await s.page.getAttribute(`[data-testid="${testid}"]`, 'data-v'))!) as number[];

async function openSection(query: string, shown: string): Promise<void> {
  const page = s.page;
  await page.goto(`${s.url}${query}`);
  await page.waitForSelector('body[data-ready="true"]');
  const deadline = Date.now() + 60_000;
  while ((await page.getAttribute('#kvcache', 'data-shown')) === null) {
    if (Date.now() > deadline) throw new Error('the KV-cache section did not show within 60 s');
    await page.evaluate(() => document.querySelector('#kvcache')!.scrollIntoView({ block: 'start' }));
    await page.waitForSelector('#kvcache[data-shown]', { timeout: 1000 }).catch(() => undefined);
  }
  await page.waitForSelector(`#kvcache[data-shown="${shown}"]`);
}

describe('demo: KV-cache explainer', () => {
  for (const width of [1280, 390]) {
    it(`${width} px: the last step's query, weights and output rows are the library's; the controls step and the view is in the URL`, async () => {
      const page = s.page;
      await page.setViewportSize({ width, height: width > 600 ? 900 : 844 });
      const last = run.steps.length - 1;
      await openSection(`?kvs=${last}&kvl=2&kvh=3`, `${last}:1:2`);
      expect(await dataV('kv-tokens')).toEqual(run.tokens);
      const step = run.steps[last]!;
      const ev = step.layers[1]!;
      expect(Number(await page.getAttribute('[data-testid="kv-length"]', 'data-v'))).toBe(step.cacheLength);
      expect(step.cacheLength).toBe(run.prompt.length + run.tokens.length - 1);
      for (const [testid, want] of [['kv-query', headRow(ev.query, 2, 0)], ['kv-weights', headRow(ev.weights!, 2, 0)], ['kv-output', headRow(ev.output, 2, 0)]] as const) {
        const got = await dataV(testid);
        expect(got.length, testid).toBe(want.length);
        got.forEach((x, j) => expect(relClose(x, want[j]!, 1e-5), `${testid}[${j}]: page ${x}, library ${want[j]}`).toBe(true));
      }
      // The shown output row against the float64 reference over what the cache holds (KV head 2 of query head 3).
      const dense = (rows: number[][]) => ({ data: Float32Array.from(rows.flat()), shape: [1, 1, rows.length, rows[0]!.length] });
      const ref = attn.referenceAttention({ data: Float32Array.from(headRow(ev.query, 2, 0)), shape: [1, 1, 1, 8] }, dense(cachedRows(run, 1, 1, last, 'key')), dense(cachedRows(run, 1, 1, last, 'value')), { isCausal: 'bottom-right' });
      (await dataV('kv-output')).forEach((x, j) => expect(Math.abs(x - ref.output.data[j]!)).toBeLessThan(1e-5));
      // No sideways overflow; the figure fits its box.
      expect(await page.evaluate(() => document.scrollingElement!.scrollWidth - window.innerWidth)).toBeLessThanOrEqual(0);
      const figure = await page.$eval('[data-testid="kv-matrix"]', (f) => {
        const box = f.getBoundingClientRect(), svg = f.querySelector('svg')!.getBoundingClientRect();
        return svg.left >= box.left - 0.5 && svg.right <= box.right + 0.5;
      });
      expect(figure).toBe(true);
      await page.locator('#kvcache').screenshot({ path: join(OUT, `kvcache-${width}-light.png`) });
      await page.emulateMedia({ colorScheme: 'dark' });
      await page.locator('#kvcache').screenshot({ path: join(OUT, `kvcache-${width}-dark.png`) });
      await page.emulateMedia({ colorScheme: 'light' });
      // Back to the prefill: the defaults leave the URL; a step forward writes it.
      await page.click('#kv-first');
      await page.waitForSelector('#kvcache[data-shown="0:1:2"]');
      expect(new URL(page.url()).searchParams.get('kvs')).toBeNull();
      expect(new URL(page.url()).searchParams.get('kvl')).toBe('2');
      const prefill = run.steps[0]!.layers[1]!;
      (await dataV('kv-weights')).forEach((x, j) => expect(relClose(x, headRow(prefill.weights!, 2, run.prompt.length - 1)[j]!, 1e-5)).toBe(true));
      await page.screenshot({ path: join(OUT, `kvcache-${width}-prefill-viewport.png`) });
      await page.click('#kv-next');
      await page.waitForSelector('#kvcache[data-shown="1:1:2"]');
      expect(new URL(page.url()).searchParams.get('kvs')).toBe('1');
      expect(await page.locator('[data-testid="kv-weights"] td').count()).toBe(run.prompt.length + 1);
      // Play runs to the last step by itself.
      await page.click('#kv-play');
      await page.waitForSelector(`#kvcache[data-shown="${last}:1:2"]`, { timeout: 60_000 });
      expect(await page.getAttribute('#kv-play', 'aria-pressed')).toBe('false');
      expect(s.problems.join('\n')).toBe('');
    });
  }
});
