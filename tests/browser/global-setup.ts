// Builds the demo once for the whole run, before any test file starts: every file serves the
// same web/demo/dist. The demo projects each name this set-up (so that any one of them runs alone);
// they run in one Vitest process, where the first build marks the run's demo as built.
import { buildDemo } from './support';

const BUILT = 'SDPA_DEMO_BUILT_THIS_RUN';

export default function setup(): void {
  if (process.env[BUILT] === '1') return;
  buildDemo();
  process.env[BUILT] = '1';
}
