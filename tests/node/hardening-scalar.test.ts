// The hardening checklist (support/hardening-suite.ts) on the 'scalar' backend.
import { defineHardeningSuite } from './support/hardening-suite.js';

defineHardeningSuite('scalar', { factor: 2 });
