// The bench CLI runs in each mode on a tiny case, and every engine passes its accuracy check
// (timings are not asserted). It imports the built package (dist/), as `npm run bench` does.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));

function bench(...args: string[]): string {
  return execFileSync(process.execPath, ['scripts/bench/cli.mjs', '--json', '/dev/null', ...args], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

describe('npm run bench', () => {
  it('forward: sdpa-web and its peers, checked against the float64 reference', () => {
    const out = bench('--cases', '2x2x40x24x16x8', '--reps', '3', '--engines', 'sdpa-simd-1t,sdpa-simd-mt,sdpa-scalar,ort-1t,ort-2t,tfjs-wasm');
    expect(out).not.toMatch(/wrong result|error/i);
    for (const engine of ['sdpa-simd-1t', 'sdpa-simd-mt', 'sdpa-scalar', 'ort-1t', 'tfjs-wasm', 'ort-2t (ort-2t process)']) expect(out).toContain(engine);
  }, 120_000);

  it('backward and diagnose', () => {
    expect(bench('--mode', 'backward', '--cases', '1x2x40x16', '--reps', '3')).not.toMatch(/wrong result|error/i);
    expect(bench('--mode', 'diagnose', '--cases', '1x64x16', '--probes', 'breakdown,peak')).toMatch(/call breakdown/);
    const variants = bench('--mode', 'variants', '--cases', '1x1100x16', '--reps', '1');
    for (const row of ['causal, window left 512', 'causal, 3 documents of 512', 'kernel/ideal']) expect(variants).toContain(row);
  }, 120_000);

  it('decode: sdpa-web on its KV cache and onnxruntime-web GroupQueryAttention, checked against the float64 reference', () => {
    const out = bench('--mode', 'decode', '--cases', '64,ragged:64', '--reps', '3');
    expect(out).not.toMatch(/wrong result|error:/i);
    for (const engine of ['sdpa-simd-1t', 'sdpa-simd-mt', 'ort-gqa-1t', 'ort-gqa-2t', 'probe']) expect(out).toContain(engine);
    expect(out).not.toMatch(/ NO$/m);
  }, 120_000);

  it('rejects an unknown option in one line', () => {
    expect(() => bench('--mdoe', 'forward')).toThrow(/mdoe/);
  });
});
