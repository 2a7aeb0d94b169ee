// Builds the demo once for the whole run, before any test file starts: every file serves the
// same web/demo/dist.
import { buildDemo } from './support';

export default function setup(): void {
  buildDemo();
}
