// The shared attention test body (support/attention-suite.ts) on the 'simd' backend.
import { defineAttentionSuite } from './support/attention-suite.js';

defineAttentionSuite('simd', { factor: 2 });
