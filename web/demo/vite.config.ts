import { fileURLToPath } from 'node:url';
import { defineConfig, runnerImport, type Plugin } from 'vite';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

// Cross-origin isolation (SharedArrayBuffer), which the library's threads need in browsers.
const isolationHeaders = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};

/**
 * Fills index.html's `<!--first-view:NAME-->` markers with the first view (the introduction's weights
 * computed by sdpa-web, the formula typeset by KaTeX), computed in Node when the page is built or
 * served: the first view then loads no WebAssembly and no KaTeX or plot JavaScript.
 */
function firstView(): Plugin {
  return {
    name: 'sdpa-first-view',
    async transformIndexHtml(html) {
      const entry = fileURLToPath(new URL('./src/prerender/first-view.ts', import.meta.url));
      const { module } = await runnerImport<typeof import('./src/prerender/first-view')>(entry, { configFile: false, logLevel: 'warn' });
      const parts = await module.firstViewHtml();
      return html.replace(/<!--first-view:(\w+)-->/g, (marker, name: string) => {
        if (!(name in parts)) throw new Error(`index.html: unknown first-view marker ${marker}`);
        return parts[name];
      });
    },
  };
}

// The demo page. `sdpa-web` resolves to the library's TypeScript source, so the page always runs the
// library in this checkout (and its WebAssembly, emitted as a hashed asset by `vite build`).
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  plugins: [firstView()],
  base: './',
  resolve: {
    alias: { 'sdpa-web': fileURLToPath(new URL('../src/index.ts', import.meta.url)) },
  },
  server: {
    headers: isolationHeaders,
    fs: { allow: [repoRoot] },
  },
  preview: {
    headers: isolationHeaders,
  },
  // The workers (the heavy-work one, the training lab's) import sdpa-web, which loads its builds
  // with dynamic imports: ES module workers.
  worker: { format: 'es' },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // Observable Plot (with d3) is one ~700 kB chunk, loaded when the first plot is scrolled to.
    chunkSizeWarningLimit: 1000,
  },
});
