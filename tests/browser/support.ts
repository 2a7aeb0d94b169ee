// Shared set-up for the browser tests: build the demo, serve it with `vite preview`, and start
// Debian's Chromium headless through playwright-core.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { preview, type PreviewServer } from 'vite';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const OUT = join(ROOT, 'test-output');
const CONFIG = join(ROOT, 'web/demo/vite.config.ts');
export const CHROMIUM = process.env.SDPA_CHROMIUM ?? '/usr/bin/chromium';

/** Chromium flags for a headless run as root on a machine with no network. */
export const CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--enable-unsafe-webgpu'];

export interface Session {
  url: string;
  context: BrowserContext;
  page: Page;
  /** Console errors, page errors and failed requests seen so far. */
  problems: string[];
  close(): Promise<void>;
}

/** Build the demo with the library's wasm already built (skipped if SDPA_DEMO_PREBUILT=1 and it exists); the browser config's global set-up calls it once per run. */
export function buildDemo(): void {
  if (!existsSync(join(ROOT, 'web/src/wasm/sdpa_core.wasm'))) throw new Error('web/src/wasm/sdpa_core.wasm is missing: run `bash scripts/build.sh wasm` first');
  if (process.env.SDPA_DEMO_PREBUILT === '1' && existsSync(join(ROOT, 'web/demo/dist/index.html'))) return;
  execFileSync(join(ROOT, 'node_modules/.bin/vite'), ['build', '--config', CONFIG, '--logLevel', 'warn'], { cwd: ROOT, stdio: 'inherit' });
}

/** Console errors and warnings, page errors and HTTP errors of `page`, as they happen. */
export function collectProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') problems.push(`console.${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`);
  });
  return problems;
}

export async function start(): Promise<Session> {
  mkdirSync(OUT, { recursive: true });
  const server: PreviewServer = await preview({ configFile: CONFIG, logLevel: 'warn', preview: { port: 0, host: '127.0.0.1', strictPort: false } });
  const url = server.resolvedUrls?.local[0];
  if (!url) throw new Error('vite preview did not report a URL');
  const profile = mkdtempSync(join(tmpdir(), 'sdpa-chromium-'));
  const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_FLAGS, viewport: { width: 1280, height: 900 } });
  const page = context.pages()[0] ?? (await context.newPage());
  const problems = collectProblems(page);
  // A navigation cancels the previous page's requests still in flight (net::ERR_ABORTED): not a fault of the page.
  page.on('requestfailed', (r) => {
    if (r.failure()?.errorText !== 'net::ERR_ABORTED') problems.push(`requestfailed: ${r.url()} ${r.failure()?.errorText}`);
  });
  return {
    url,
    context,
    page,
    problems,
    async close() {
      await context.close();
      await server.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * Scroll each lazily loaded section of the demo into view, as a reader would, and wait until its code
 * (and sdpa-web) has loaded and mounted it.
 */
export async function openAllSections(page: Page): Promise<void> {
  const ids = await page.$$eval('main > section', (ss) => ss.filter((s) => s.matches('[data-lazy], :has([data-lazy])') || s.dataset.mounted).map((s) => s.id));
  for (const id of ids) {
    // Scrolled to (in one step: the section may mount, and its placeholder go, while the test looks
    // for it), again until it mounts: a section above may grow and push it out of view meanwhile.
    const deadline = Date.now() + 60_000;
    while ((await page.getAttribute(`#${id}`, 'data-mounted')) !== 'true') {
      if (Date.now() > deadline) throw new Error(`section #${id} did not load within 60 s of being scrolled to`);
      await page.evaluate((id) => document.querySelector(`#${id} [data-lazy], #${id}[data-lazy]`)?.scrollIntoView({ block: 'center' }), id);
      await page.waitForSelector(`#${id}[data-mounted="true"]`, { timeout: 1000, state: 'attached' }).catch(() => undefined);
    }
  }
  await page.waitForSelector('body[data-library="ready"]');
}
