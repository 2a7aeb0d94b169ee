// The demo page's first view is light: what a fresh load transfers before the reader scrolls (the
// HTML's scripts, at 1280 px and at a phone's 390 px) is measured, printed and held to a byte budget;
// the library's WebAssembly, KaTeX's and the plot library's JavaScript load only when a section that
// needs them is scrolled to. Sizes are gzip's (level 6) of each JS and wasm response body, as a
// server compressing its responses would send them.
import { gzipSync } from 'node:zlib';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openAllSections, start, type Session } from './support';

/** The first view's budget: JS and wasm, gzipped. */
const FIRST_VIEW_BYTES = 150 * 1024;

interface Transfer {
  file: string;
  gzipped: number;
}

/** Record each JS and wasm response of `page` (its name without the build hash, and its gzipped size). */
function record(page: Page): Transfer[] {
  const seen: Transfer[] = [];
  page.on('response', async (r) => {
    const path = new URL(r.url()).pathname;
    if (!/\.(m?js|wasm)$/.test(path)) return;
    const body = await r.body().catch(() => undefined);
    if (body) seen.push({ file: path.split('/').pop()!, gzipped: gzipSync(body).length });
  });
  return seen;
}

const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;
const total = (t: Transfer[]) => t.reduce((a, x) => a + x.gzipped, 0);

let s: Session;

beforeAll(async () => {
  s = await start();
});

afterAll(async () => {
  await s?.close();
});

describe('demo page: the first view', () => {
  for (const width of [1280, 390]) {
    it(`${width} px: a fresh load transfers at most ${kb(FIRST_VIEW_BYTES)} of JS and wasm (gzipped) before the reader scrolls`, async () => {
      const page = await s.context.newPage();
      try {
        await page.setViewportSize({ width, height: width > 600 ? 900 : 844 });
        const client = await s.context.newCDPSession(page);
        await client.send('Network.setCacheDisabled', { cacheDisabled: true });
        const seen = record(page);
        await page.goto(s.url);
        await page.waitForSelector('body[data-ready="true"]');
        await page.waitForLoadState('networkidle');
        const first = [...seen];
        console.log(`first view at ${width} px: ${kb(total(first))} of JS and wasm gzipped (${first.map((t) => `${t.file} ${kb(t.gzipped)}`).join(', ')})`);
        expect(total(first)).toBeLessThanOrEqual(FIRST_VIEW_BYTES);
        expect(first.filter((t) => t.file.endsWith('.wasm'))).toEqual([]);
        // The first view is complete without them: the introduction's computed weights and the formula.
        expect(await page.locator('#intro-figure td[data-v]').count()).toBe(9);
        expect(await page.locator('#formula-box .katex').count()).toBe(1);
        // Scrolled through, every section loads what it needs.
        await openAllSections(page);
        await page.waitForLoadState('networkidle');
        console.log(`whole page at ${width} px after scrolling through it: ${kb(total(seen))} of JS and wasm gzipped (${seen.length} files)`);
        expect(seen.some((t) => t.file.endsWith('.wasm'))).toBe(true);
      } finally {
        await page.close();
      }
    });
  }
});
