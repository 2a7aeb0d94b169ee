import { createAttention } from 'sdpa-web';
import './style.css';
import { backendList, type App } from './lib/app';
import type { AttentionLike } from './lib/compute';
import { mountExamples } from './sections/examples';
import { mountPlayground } from './sections/playground';
import { mountScalingLab } from './sections/scaling-lab';
import { mountMultihead } from './sections/multihead';
import { mountCost } from './sections/cost';

const status = document.getElementById('backend-status')!;

function showError(where: string, e: unknown): void {
  const msg = e instanceof Error ? e.message : String(e);
  const box = document.getElementById('errors') ?? document.body.insertBefore(Object.assign(document.createElement('div'), { id: 'errors', className: 'errors', role: 'alert' }), document.querySelector('main'));
  box.append(Object.assign(document.createElement('p'), { textContent: `${where}: ${msg}` }));
}

async function main(): Promise<void> {
  const attn = (await createAttention({ backend: 'auto' })) as unknown as App['attn'];
  const backends = backendList(attn.availableBackends, attn.backend);
  const unavailable = backends.filter((b) => !b.available);
  status.textContent = `Backend: ${attn.backend} (auto)${attn.fallbackReason ? `, fell back: ${attn.fallbackReason}` : ''}.${unavailable.length ? ` Unavailable: ${unavailable.map((b) => `${b.name} — ${b.reason}`).join('; ')}.` : ''}`;
  status.dataset.backend = attn.backend;
  const app: App = {
    attn,
    create: async (backend) => (await createAttention({ backend: backend as 'auto' })) as unknown as AttentionLike,
    error: showError,
    backends,
  };
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
