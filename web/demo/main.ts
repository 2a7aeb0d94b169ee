// PLACEHOLDER (infra): replaced by the demo
import { createAttention } from 'sdpa-web'; // alias for ../src/index.ts (vite.config.ts)

const versionEl = document.getElementById('version')!;
document.getElementById('coi')!.textContent = String(globalThis.crossOriginIsolated);
try {
  const attn = await createAttention({ backend: 'auto' });
  versionEl.textContent = attn.version;
  versionEl.setAttribute('data-ready', 'true');
  attn.dispose();
} catch (err) {
  versionEl.textContent = `error: ${String(err)}`;
  versionEl.setAttribute('data-ready', 'error');
  throw err;
}
