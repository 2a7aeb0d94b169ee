// The forward option audit (support/option-audit-suite.ts) on the 'scalar' backend.
import { defineOptionAuditSuite } from './support/option-audit-suite.js';

defineOptionAuditSuite({ backend: 'scalar', factor: 2 });
