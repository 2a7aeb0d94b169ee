// The package as users get it: `npm pack` (prepack builds it), installed offline into two fresh
// apps with the same src/main.ts (main.ts here): a Vite app (vite-app: index.html and a
// vite.config.js that only sets the COOP/COEP headers) run under `vite` dev and `vite build` +
// `vite preview`, and an esbuild app (esbuild-app) bundled as docs/bundlers.md says; each in
// headless Chromium, with and without cross-origin isolation.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { extname, join, relative } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { createLogger, createServer, preview, type Logger } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { npm, npmPack } from '../../support/pack';
import { CHROMIUM, CHROMIUM_FLAGS, collectProblems, ROOT } from '../support';

const APPS = join(ROOT, 'tests/browser/apps');
/** Upper bound on the time from the server being ready to the first result (a failed worker pool used to cost 20 s). */
const FIRST_RESULT_MS = Number(process.env.SDPA_FIRST_RESULT_MS ?? 5000);
const W0 = Math.exp(Math.SQRT1_2) / (Math.exp(Math.SQRT1_2) + 1);

interface PageResult {
  output: number[];
  /** The same call on float16 inputs, and one query row over a KV cache of the two keys. */
  float16: number[];
  cached: number[];
  /** max |output − float64 reference| of a call on 2 MiB of inputs (streamed in on threads). */
  streamedError: number;
  threads: number;
  cores: number;
  fallbackReason: string | null;
}

interface Visit {
  result?: PageResult;
  error?: string;
  /** From the server being ready (or the navigation, for static files) to the result on the page. */
  ms: number;
  problems: string[];
}

let work: string;
/** The Vite app and the esbuild app. */
let app: string;
let esbuildApp: string;
let browser: Browser;

/** Loads `url` in a fresh browser context; waits for the app's result or error. */
async function visit(url: string, since = performance.now()): Promise<Visit> {
  const context = await browser.newContext();
  const page = await context.newPage();
  const problems = collectProblems(page);
  try {
    await page.goto(url);
    await page.waitForFunction(() => document.body.dataset.result ?? document.body.dataset.error, null, { timeout: 60_000 });
    const ms = performance.now() - since;
    const { result, error } = await page.evaluate(() => ({ result: document.body.dataset.result, error: document.body.dataset.error }));
    return { result: result ? (JSON.parse(result) as PageResult) : undefined, error, ms, problems };
  } finally {
    await context.close();
  }
}

/** The app computed the right numbers on the expected number of threads. */
function expectWorks(v: Visit, isolated: boolean): void {
  expect(v.error).toBeUndefined();
  const r = v.result!;
  expect(r.output[0]).toBeCloseTo(W0, 5);
  expect(r.output[1]).toBeCloseTo(1 - W0, 5);
  expect(r.float16[0]).toBeCloseTo(W0, 3); // within half a float16 ulp (2.4e-4 at 0.67)
  expect(r.float16[1]).toBeCloseTo(1 - W0, 3);
  expect(r.cached).toEqual(r.output);
  expect(r.streamedError).toBeLessThan(1e-5);
  if (isolated) {
    expect(r.threads).toBe(Math.min(16, r.cores));
    expect(r.fallbackReason).toBeNull();
  } else {
    expect(r.threads).toBe(1);
    expect(r.fallbackReason).toMatch(/running on 1 thread: .*Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp/);
  }
  expect(v.ms).toBeLessThan(FIRST_RESULT_MS);
  expect(v.problems).toEqual([]);
}

/** A Vite logger that records warnings and errors (and prints nothing). */
function recordingLogger(into: string[]): Logger {
  const logger = createLogger('warn', { allowClearScreen: false });
  logger.warn = (msg) => void into.push(`warn: ${msg}`);
  logger.warnOnce = (msg) => void into.push(`warn: ${msg}`);
  logger.error = (msg) => void into.push(`error: ${msg}`);
  return logger;
}

/** Vite's config for the app: its vite.config.js (the COOP/COEP headers), or none at all. */
const viteConfig = (isolated: boolean, logs: string[]) => ({
  root: app,
  configFile: isolated ? join(app, 'vite.config.js') : (false as const),
  customLogger: recordingLogger(logs),
});

const TYPES: Record<string, string> = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm' };

/** A plain static file server for the esbuild output, with or without the COOP/COEP headers. */
async function serveStatic(dir: string, isolated: boolean): Promise<{ url: string; server: Server }> {
  const server = createHttpServer((req, res) => {
    const path = join(dir, decodeURIComponent(new URL(req.url ?? '/', 'http://localhost').pathname));
    const file = path.endsWith('/') ? join(path, 'index.html') : path;
    let body: Buffer;
    try {
      body = readFileSync(file);
    } catch {
      res.writeHead(404).end();
      return;
    }
    const headers: Record<string, string> = { 'Content-Type': TYPES[extname(file)] ?? 'application/octet-stream' };
    if (isolated) Object.assign(headers, { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' });
    res.writeHead(200, headers).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, server };
}

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'sdpa-web-apps-'));
  const { tarball } = npmPack(work);
  [app, esbuildApp] = ['vite-app', 'esbuild-app'].map((name) => {
    const dir = join(work, name);
    cpSync(join(APPS, name), dir, { recursive: true });
    cpSync(join(APPS, 'main.ts'), join(dir, 'src/main.ts'));
    // The tarball has no dependencies: the install needs no registry.
    execFileSync(npm, ['install', '--offline', '--no-audit', '--no-fund', tarball], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
    return dir;
  }) as [string, string];
  browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS });
}, 600_000);

afterAll(async () => {
  await browser?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('a fresh Vite app with the packed tarball', () => {
  for (const isolated of [true, false]) {
    it(`vite dev ${isolated ? 'with' : 'without'} COOP/COEP: the right result, ${isolated ? 'every core' : 'one thread and why'}, no warning`, async () => {
      const logs: string[] = [];
      const server = await createServer({ ...viteConfig(isolated, logs), server: { port: 0, host: '127.0.0.1' } });
      try {
        await server.listen();
        const v = await visit(server.resolvedUrls!.local[0]!);
        console.log(`vite dev, ${isolated ? 'isolated' : 'not isolated'}: first result ${Math.round(v.ms)} ms after the server was ready, ${v.result?.threads} thread(s)`);
        expectWorks(v, isolated);
        expect(logs).toEqual([]);
      } finally {
        await server.close();
      }
    });
  }

  it('vite build: no warnings, and every emitted file is used', () => {
    const output = execFileSync(process.execPath, [join(ROOT, 'node_modules/vite/bin/vite.js'), 'build'], { cwd: app, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    expect(output).not.toMatch(/warn|\(!\)|\[plugin |externalized/i);
    const dist = join(app, 'dist');
    const emitted = files(dist).map((f) => relative(dist, f));
    expect(emitted.filter((f) => f.endsWith('.wasm'))).toHaveLength(4);
    expect(emitted.filter((f) => /worker/i.test(f))).toEqual([]);
    const texts = emitted.filter((f) => /\.(html|js)$/.test(f)).map((f) => readFileSync(join(dist, f), 'utf8'));
    for (const f of emitted.filter((f) => f !== 'index.html')) {
      const name = f.split('/').pop()!;
      expect(texts.some((t) => t.includes(name)), `${f} is referenced by another emitted file`).toBe(true);
    }
  });

  for (const isolated of [true, false]) {
    it(`vite preview ${isolated ? 'with' : 'without'} COOP/COEP: the right result, ${isolated ? 'every core' : 'one thread and why'}`, async () => {
      const logs: string[] = [];
      const server = await preview({ ...viteConfig(isolated, logs), preview: { port: 0, host: '127.0.0.1' } });
      try {
        const v = await visit(server.resolvedUrls!.local[0]!);
        console.log(`vite preview, ${isolated ? 'isolated' : 'not isolated'}: first result ${Math.round(v.ms)} ms after the server was ready, ${v.result?.threads} thread(s)`);
        expectWorks(v, isolated);
        expect(logs).toEqual([]);
      } finally {
        await server.close();
      }
    });
  }
});

describe('esbuild, as docs/bundlers.md says', () => {
  const build = (splitting: boolean) => {
    rmSync(join(esbuildApp, 'build'), { recursive: true, force: true });
    const args = ['src/main.ts', '--bundle', '--format=esm', '--platform=browser', '--outdir=build', ...(splitting ? ['--splitting'] : []), '--log-level=warning'];
    const output = execFileSync(join(ROOT, 'node_modules/.bin/esbuild'), args, { cwd: esbuildApp, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    expect(output).toBe('');
  };
  const copyWasm = () => {
    const from = join(esbuildApp, 'node_modules/sdpa-web/dist/wasm');
    for (const f of readdirSync(from).filter((f) => f.endsWith('.wasm'))) cpSync(join(from, f), join(esbuildApp, 'build', f));
  };
  const load = async (isolated: boolean) => {
    const { url, server } = await serveStatic(esbuildApp, isolated);
    try {
      return await visit(url);
    } finally {
      server.close();
    }
  };

  it('without the .wasm files copied: the error names the missing file and its URL', async () => {
    build(true);
    const v = await load(true);
    expect(v.error).toMatch(/^sdpa-web: its WebAssembly file is missing: http:\/\/127\.0\.0\.1:\d+\/build\/sdpa_core(_relaxed)?\.wasm \(HTTP 404/);
  });

  for (const isolated of [true, false]) {
    it(`--splitting and the .wasm files copied, ${isolated ? 'with' : 'without'} COOP/COEP: the right result, ${isolated ? 'every core' : 'one thread and why'}`, async () => {
      build(true);
      copyWasm();
      const v = await load(isolated);
      console.log(`esbuild, ${isolated ? 'isolated' : 'not isolated'}: first result ${Math.round(v.ms)} ms after navigation, ${v.result?.threads} thread(s)`);
      expectWorks(v, isolated);
    });
  }

  it('without --splitting the workers cannot import the module on its own: reported at once, one thread and why', async () => {
    build(false);
    copyWasm();
    const v = await load(true);
    expect(v.error).toBeUndefined();
    expect(v.result!.threads).toBe(1);
    expect(v.result!.fallbackReason).toMatch(/a web worker of the threads module failed to start: .*each worker imports http:\/\/127\.0\.0\.1:\d+\/build\/main\.js.*esbuild --splitting/);
    expect(v.ms).toBeLessThan(FIRST_RESULT_MS);
  });
});
