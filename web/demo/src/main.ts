import { createAttention } from 'sdpa-web';
import './style.css';
import type { App } from './lib/app';
import { mountExamples } from './sections/examples';
import { mountPlayground } from './sections/playground';
import { mountScalingLab } from './sections/scaling-lab';
import { mountMultihead } from './sections/multihead';
import { mountCost } from './sections/cost';
import { mountIntro } from './sections/intro';
import { mountTheme } from './lib/theme';

mountTheme(document.getElementById('theme-toggle') as HTMLButtonElement);

const status = document.getElementById('backend-status')!;

function showError(where: string, e: unknown): void {
  const msg = e instanceof Error ? e.message : String(e);
  const box = document.getElementById('errors') ?? document.body.insertBefore(Object.assign(document.createElement('div'), { id: 'errors', className: 'errors', role: 'alert' }), document.querySelector('main'));
  box.append(Object.assign(document.createElement('p'), { textContent: `${where}: ${msg}` }));
}

async function main(): Promise<void> {
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
  const app: App = {
    attn,
    create: (backend) => createAttention({ backend }),
    error: showError,
    backends,
  };
  mountIntro(app);
  mountExamples(app);
  mountPlayground(app);
  mountScalingLab(app);
  mountMultihead(app);
  mountCost(app);
  document.body.dataset.ready = 'true';
}

main().catch((e) => {
  status.textContent = 'sdpa-web failed to load.';
  showError('sdpa-web', e);
});
