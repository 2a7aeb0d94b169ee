import { fileURLToPath } from 'node:url';
import { playwright } from '@vitest/browser-playwright';
import { defineConfig } from 'vitest/config';

// The WebGPU backend in headless Debian Chromium (SwiftShader adapter): tests/browser/webgpu-*.test.ts.
// Its own config, so the page tests of tests/browser/ keep theirs. Step `browser_webgpu` of
// scripts/test.sh runs it; no browser is downloaded (Debian's /usr/bin/chromium is driven).
export default defineConfig({
  resolve: {
    alias: { 'sdpa-web': fileURLToPath(new URL('./web/src/index.ts', import.meta.url)) },
  },
  test: {
    include: ['tests/browser/webgpu-*.test.ts'],
    testTimeout: 300_000,
    hookTimeout: 300_000,
    reporters: process.env.CI ? ['verbose'] : ['default'],
    browser: {
      enabled: true,
      headless: true,
      screenshotFailures: false,
      provider: playwright({
        launchOptions: {
          executablePath: process.env.SDPA_CHROMIUM ?? '/usr/bin/chromium',
          args: [
            '--no-sandbox',
            '--enable-unsafe-webgpu',
            '--no-first-run',
            '--disable-background-networking',
            '--disable-component-update',
            '--disable-sync',
          ],
        },
      }),
      instances: [{ browser: 'chromium' }],
    },
  },
});
