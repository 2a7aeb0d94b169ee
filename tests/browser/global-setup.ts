// Builds the demo once for the whole run, before any test file starts: every file serves the
// same web/demo/dist. The demo projects each name this set-up (so that any one of them runs alone);
// they run in one Vitest process, where the first build marks the demo as prebuilt for the others.
import { buildDemo } from './support';

export default function setup(): void {
  buildDemo();
  process.env.SDPA_DEMO_PREBUILT = '1';
}
