// The page's entry: the first view (theme toggle, the introduction and the formula, both written into
// index.html when the page is built) and the loader of everything else. Each section's code, the
// library (sdpa-web and its WebAssembly), KaTeX and the plot library load when a section that needs
// them is scrolled to; the library starts loading as soon as the reader scrolls.
import 'katex/dist/katex.min.css';
import './style.css';
import type { App } from './lib/app';
import { fitMath } from './lib/fit';
import { mountTheme } from './lib/theme';

mountTheme(document.getElementById('theme-toggle') as HTMLButtonElement);
fitMath(document.getElementById('formula-box')!);

const status = document.getElementById('backend-status')!;

function showError(where: string, e: unknown): void {
  const msg = e instanceof Error ? e.message : String(e);
  const box = document.getElementById('errors') ?? document.body.insertBefore(Object.assign(document.createElement('div'), { id: 'errors', className: 'errors', role: 'alert' }), document.querySelector('main'));
  box.append(Object.assign(document.createElement('p'), { textContent: `${where}: ${msg}` }));
}

let library: Promise<App> | undefined;

/** sdpa-web, loaded once: the page-wide instance (backend 'auto') and the engine line in the footer. */
function loadLibrary(): Promise<App> {
  library ??= (async () => {
    const { createAttention } = await import('sdpa-web');
    const attn = await createAttention({ backend: 'auto' });
    const backends = attn.availableBackends;
    // The library's own words: why 'auto' passed over a backend, and why others cannot run here.
    const why = attn.fallbackReason;
    const unavailable = backends.filter((b) => !b.available && !(why && b.reason && why.includes(b.reason)));
    const build = attn.backend === 'webgpu' ? '' : `; ${attn.relaxedSimd ? 'relaxed SIMD, fused multiply-add' : 'SIMD128'}, ${attn.threads} thread${attn.threads > 1 ? 's' : ''}`;
    status.textContent = `Backend: ${attn.backend} (auto${build}).${why ? ` Fell back: ${why}.` : ''}${unavailable.length ? ` Unavailable: ${unavailable.map((b) => `${b.name} — ${b.reason}`).join('; ')}.` : ''}`;
    status.dataset.backend = attn.backend;
    // The engine line is a quiet detail at the foot of the page; its summary names the backend only.
    document.getElementById('engine-name')!.textContent = `${attn.backend}${attn.backend === 'webgpu' ? '' : ' (WebAssembly)'}`;
    document.body.dataset.library = 'ready';
    const app: App = { attn, create: (backend) => createAttention({ backend }), createWith: (options) => createAttention(options), error: showError, backends, open: openSection };
    // The introduction's build-time weights, computed again here.
    void import('./sections/intro').then((m) => m.checkIntro(app)).catch((e: unknown) => showError('introduction', e));
    return app;
  })();
  library.catch((e: unknown) => {
    status.textContent = 'sdpa-web failed to load.';
    showError('sdpa-web', e);
  });
  return library;
}

/** Each section module's loader; a module may fill several sections (data-lazy names the module). */
const MODULES: Record<string, () => Promise<(app: App) => unknown>> = {
  examples: () => import('./sections/examples').then((m) => m.mountExamples),
  playground: () => import('./sections/playground').then((m) => m.mountPlayground),
  scaling: () => import('./sections/scaling-lab').then((m) => m.mountScalingLab),
  variance: () => import('./sections/variance-lab').then((m) => m.mountVarianceLab),
  online: () => import('./sections/online-softmax').then((m) => m.mountOnlineSoftmax),
  kvcache: () => import('./sections/kv-cache').then((m) => m.mountKvCache),
  gradients: () => import('./sections/gradients').then((m) => m.mountGradients),
  precision: () => import('./sections/precision-lab').then((m) => m.mountPrecisionLab),
  multihead: () => import('./sections/multihead').then((m) => m.mountMultihead),
  training: () => import('./sections/training-lab').then((m) => m.mountTrainingLab),
  cost: () => import('./sections/cost').then((m) => m.mountCost),
  limits: () => import('./sections/limits').then((m) => m.mountLimits),
};

const mounted = new Map<string, Promise<void>>();

/** Load and mount the module of a section (once); its sections get data-mounted="true". */
function openModule(name: string): Promise<void> {
  let done = mounted.get(name);
  if (!done) {
    const sections = [...document.querySelectorAll<HTMLElement>(`[data-lazy="${name}"]`)].map((e) => e.closest('section')!);
    done = Promise.all([MODULES[name](), loadLibrary()])
      .then(([mount, app]) => {
        mount(app);
        for (const s of sections) s.dataset.mounted = 'true';
      })
      .catch((e: unknown) => showError(name, e));
    mounted.set(name, done);
  }
  return done;
}

/** Open a section by its id (another section hands it work, e.g. "Edit in the playground"). */
function openSection(id: string): Promise<void> {
  const name = document.getElementById(id)?.querySelector<HTMLElement>('[data-lazy]')?.dataset.lazy ?? document.getElementById(id)?.dataset.lazy;
  if (!name) return Promise.reject(new Error(`no section ${id}`));
  return openModule(name);
}

const seen = new IntersectionObserver((entries) => {
  for (const e of entries) {
    if (!e.isIntersecting) continue;
    seen.unobserve(e.target);
    void openModule((e.target as HTMLElement).dataset.lazy!);
  }
});
for (const e of document.querySelectorAll('[data-lazy]')) seen.observe(e);

// A section link (the nav, or /#id in the address) keeps its section's heading at the top of the
// screen while the sections it passes load and grow, until the reader scrolls, clicks or types.
let anchored: HTMLElement | undefined;
const reanchor = () => anchored?.scrollIntoView({ block: 'start' });
function anchorTo(hash: string): void {
  const target = hash.length > 1 ? document.getElementById(decodeURIComponent(hash.slice(1))) : null;
  if (!target?.matches('main > section')) return;
  anchored = target;
  reanchor();
}
for (const type of ['wheel', 'touchstart', 'keydown', 'mousedown']) addEventListener(type, () => (anchored = undefined), { capture: true, passive: true });
new ResizeObserver(reanchor).observe(document.querySelector('main')!);
document.addEventListener('click', (e) => {
  const link = (e.target as Element).closest<HTMLAnchorElement>('a[href^="#"]');
  if (link) anchorTo(link.hash);
});
addEventListener('hashchange', () => anchorTo(location.hash));
anchorTo(location.hash);
// The reader is moving on: fetch the library (and its WebAssembly) before the first section needs it.
addEventListener('scroll', () => void loadLibrary(), { once: true, passive: true });
document.body.dataset.ready = 'true';
