// The hardening checklist (support/hardening-suite.ts) on the 'simd' backend.
import { defineHardeningSuite } from './support/hardening-suite.js';

defineHardeningSuite('simd', { factor: 2 });
