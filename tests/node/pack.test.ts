// Packaging test: `npm pack` (prepack builds wasm + dist), install the tarball
// into an empty folder and use it from a separate Node ESM process, the way a
// user would.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { npm, npmPack } from '../support/pack.js';

describe('npm pack', () => {
  let work: string;
  let tarball: string;
  let files: string[];
  let consumer: string;

  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), 'sdpa-web-pack-'));
    ({ tarball, files } = npmPack(work));

    consumer = join(work, 'consumer');
    mkdirSync(consumer);
    writeFileSync(
      join(consumer, 'package.json'),
      JSON.stringify({ name: 'consumer', private: true, type: 'module' }),
    );
    execFileSync(npm, ['install', '--no-audit', '--no-fund', tarball], {
      cwd: consumer,
      stdio: ['ignore', 'inherit', 'inherit'],
    });
  }, 600_000);

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('contains the built library and nothing else', () => {
    expect(files).toContain('package.json');
    expect(files).toContain('dist/index.js');
    expect(files).toContain('dist/index.d.ts');
    expect(files).toContain('dist/wasm/sdpa_core.mjs');
    expect(files).toContain('dist/wasm/sdpa_core.wasm');
    // the threads module, its pthread worker (CommonJS, hence the nested package.json)
    expect(files).toContain('dist/wasm/sdpa_core_mt.mjs');
    expect(files).toContain('dist/wasm/sdpa_core_mt.wasm');
    expect(files).toContain('dist/wasm/sdpa_core_mt.worker.js');
    expect(files).toContain('dist/wasm/package.json');
    for (const f of files) {
      expect(f).not.toMatch(/^(cpp|tests|web|scripts|build|node_modules|\.ci)\//);
    }
  });

  it('imports by name from a separate Node ESM process and runs attention', () => {
    // Q = [[1,0]], K = V = [[1,0],[0,1]], d = 2:
    // weights = softmax([1/sqrt2, 0]), output = weights (V is the identity).
    const script = `
      import('sdpa-web').then(async (lib) => {
        const attn = await lib.createAttention({ backend: 'simd' });
        const q = { data: new Float32Array([1, 0]), shape: [1, 2] };
        const kv = { data: new Float32Array([1, 0, 0, 1]), shape: [2, 2] };
        const { output, weights } = await attn.scaledDotProductAttention(q, kv, kv, { returnWeights: true });
        const one = await lib.createAttention({ backend: 'simd', threads: 1 });
        const single = one.scaledDotProductAttentionSync(q, kv, kv).output.data;
        attn.dispose();
        one.dispose();
        console.log(JSON.stringify({
          exports: Object.keys(lib).sort(),
          threads: attn.threads,
          single: Array.from(single),
          output: { data: Array.from(output.data), shape: output.shape },
          weights: weights && { data: Array.from(weights.data), shape: weights.shape },
        }));
      }).catch((e) => { console.error(e); process.exit(1); });
    `;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
      cwd: consumer,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const r = JSON.parse(out.trim().split('\n').pop()!);
    expect(r.exports).toContain('createAttention');
    // default: every core (the threads module where this machine has more than one), and the
    // process exits by itself with the worker pool alive (execFileSync returned)
    expect(r.threads).toBeGreaterThanOrEqual(1);
    expect(r.single[0]).toBeCloseTo(r.output.data[0], 6);
    const w0 = Math.exp(Math.SQRT1_2) / (Math.exp(Math.SQRT1_2) + 1);
    expect(r.output.shape).toEqual([1, 2]);
    expect(r.output.data[0]).toBeCloseTo(w0, 5);
    expect(r.output.data[1]).toBeCloseTo(1 - w0, 5);
    expect(r.weights.shape).toEqual([1, 2]);
    expect(r.weights.data[0]).toBeCloseTo(w0, 5);
    expect(r.weights.data[1]).toBeCloseTo(1 - w0, 5);
  });
});
