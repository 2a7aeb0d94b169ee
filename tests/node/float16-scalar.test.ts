// The float16 test body (support/float16-suite.ts) on the 'scalar' backend.
import { createAttention } from 'sdpa-web';
import { defineFloat16Suite } from './support/float16-suite.js';

defineFloat16Suite("'scalar'", { factor: 2, create: () => createAttention({ backend: 'scalar' }) });
