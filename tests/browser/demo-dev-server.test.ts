// The demo page as `npm start` serves it: Vite's dev server (web/demo/vite.config.ts, COOP/COEP
// headers on) in headless Debian Chromium. The first heatmap (the stepper's, once it is scrolled to)
// comes soon after the server is ready, computed on every core, with no console error.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { createServer } from 'vite';
import { describe, expect, it } from 'vitest';
import { CHROMIUM, CHROMIUM_FLAGS, collectProblems, ROOT } from './support';

/** Upper bound on the time from the server being ready to the first heatmap (a failed worker pool used to cost 20 s). */
const FIRST_HEATMAP_MS = Number(process.env.SDPA_FIRST_RESULT_MS ?? 5000);

describe('npm start (the Vite dev server of web/demo)', () => {
  it('shows the first heatmap soon after the server is ready, on every core, with no console error', async () => {
    // The browser is up before the server, as a user's is: the time counts the page alone.
    const profile = mkdtempSync(join(tmpdir(), 'sdpa-chromium-'));
    const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_FLAGS });
    const server = await createServer({ configFile: join(ROOT, 'web/demo/vite.config.ts'), logLevel: 'warn', server: { port: 0, host: '127.0.0.1' } });
    try {
      await server.listen();
      const ready = performance.now();
      const page = context.pages()[0] ?? (await context.newPage());
      const problems = collectProblems(page);
      await page.goto(server.resolvedUrls!.local[0]!);
      await page.locator('#stepper-slot').scrollIntoViewIfNeeded();
      await page.waitForSelector('figure[data-testid="heatmap"]', { timeout: 60_000 });
      const ms = performance.now() - ready;
      const status = (await page.textContent('#backend-status')) ?? '';
      const cores = await page.evaluate(() => navigator.hardwareConcurrency);
      console.log(`npm start: first heatmap ${Math.round(ms)} ms after the dev server was ready; ${status}`);
      const threads = Number(/(\d+) threads?\)/.exec(status)?.[1]);
      expect(threads, status).toBe(Math.min(16, cores));
      expect(ms).toBeLessThan(FIRST_HEATMAP_MS);
      await page.waitForSelector('body[data-ready="true"]', { timeout: 60_000 });
      expect(problems).toEqual([]);
    } finally {
      await context.close();
      await server.close();
      rmSync(profile, { recursive: true, force: true });
    }
  });
});
