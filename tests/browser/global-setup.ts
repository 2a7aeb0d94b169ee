// Builds the demo once for the whole run, before any test file starts: the files run two at a time
// and all serve the same web/demo/dist.
import { buildDemo } from './support';

export default function setup(): void {
  buildDemo();
}
