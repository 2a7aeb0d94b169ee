// The shared attention test body (support/attention-suite.ts) on the 'scalar' backend.
import { defineAttentionSuite } from './support/attention-suite.js';

defineAttentionSuite('scalar', { factor: 2 });
