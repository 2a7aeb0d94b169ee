// The bench CLI runs in each mode on a tiny case, and every engine passes its accuracy check
// (timings are not asserted), and --results writes a well-formed Markdown file. It imports the
// built package (dist/), as `npm run bench` does.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { testDawnFlags } from './support/dawn-flags.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

function bench(...args: string[]): string {
  const env = { ...process.env, SDPA_DAWN_FLAGS: testDawnFlags().join(',') };
  return execFileSync(process.execPath, ['scripts/bench/cli.mjs', '--json', '/dev/null', ...args], { cwd: root, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
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

  it('decode: sdpa-web on its KV caches (float32, float16, int8, int4) and onnxruntime-web GroupQueryAttention, checked against the float64 reference', () => {
    const out = bench('--mode', 'decode', '--cases', '64,ragged:64', '--reps', '3');
    expect(out).not.toMatch(/wrong result|error:/i);
    for (const engine of ['sdpa-simd-1t', 'sdpa-simd-mt', 'sdpa-simd-1t-f16', 'sdpa-simd-1t-int8', 'sdpa-simd-mt-int8', 'sdpa-simd-1t-int4', 'sdpa-simd-mt-int4', 'ort-gqa-1t', 'ort-gqa-2t', 'probe']) expect(out).toContain(engine);
    expect(out).toMatch(/int8 cache \d+\.\d\d× float32 on 1 thread/);
    expect(out).not.toMatch(/ NO$/m);
  }, 120_000);

  it('--results writes the run as Markdown: command, date, machine, build, notes and the table', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sdpa-bench-results-'));
    try {
      const args = ['--cases', '1x2x40x16', '--reps', '3', '--engines', 'sdpa-simd-1t,sdpa-scalar', '--results', dir];
      bench(...args, '--note', "a busy machine's run");
      const page = readFileSync(join(dir, 'forward.md'), 'utf8');
      expect(page.split('\n')[0]).toBe('# Bench results: forward');
      expect(page).toContain(`- **Command:** \`npm run bench -- --json /dev/null ${args.join(' ')}\``);
      expect(page).toMatch(/^- \*\*Date:\*\* \d{4}-\d\d-\d\d \d\d:\d\d UTC \(\d+ s wall\)$/m);
      expect(page).toMatch(new RegExp(`^- \\*\\*Machine:\\*\\* .+, \\d+ cores, Node ${process.version}; load average \\d+\\.\\d\\d at the start, \\d+\\.\\d\\d at the end$`, 'm'));
      expect(page).toMatch(/^- \*\*Build:\*\* (relaxed SIMD|SIMD128)/m);
      expect(page).toContain("## Notes\n\n- a busy machine's run\n");
      const table = /## Output\n\n```text\n([^]*?)\n```\n$/.exec(page)?.[1] ?? '';
      for (const engine of ['sdpa-simd-1t', 'sdpa-scalar']) expect(table).toMatch(new RegExp(`^2x40x16 +${engine} +\\d+\\.\\d{3} `, 'm'));
      expect(table).not.toMatch(/wrong result|error/i);

      bench('--mode', 'decode', '--cases', '64', '--reps', '3', '--engines', 'sdpa-simd-1t', '--results', join(dir, 'decode-short.md'));
      expect(readFileSync(join(dir, 'decode-short.md'), 'utf8')).toMatch(/^# Bench results: decode\n[^]*\nL=64 +sdpa-simd-1t /);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('webgpu --baseline: the GPU-resident engines of another build on the same device, in the same rounds, and time new/old', () => {
    // This build's dist/ stands in for another one: the rows and the ratios are what is checked.
    // Prefill only (decode steps take the same path, at E = 128 too slow for SwiftShader here).
    const out = bench('--mode', 'webgpu', '--cases', '1x64x16', '--engines', 'sdpa-webgpu', '--decode-cases', '', '--reps', '1', '--budget-ms', '300', '--baseline', 'dist');
    expect(out).not.toMatch(/wrong result|error:/i);
    for (const engine of ['sdpa-webgpu (GPU tensors float32)', 'sdpa-webgpu (GPU tensors float16)']) {
      expect(out).toMatch(new RegExp(`${engine.replace(/[()]/g, '\\$&')} @baseline +\\d+\\.\\d{3} `));
    }
    const ratios = out.slice(out.indexOf('time new/old'));
    expect(ratios).toMatch(/^ +prefill +1x64x16 +sdpa-webgpu \(GPU tensors float32\) +\d+\.\d{3} /m);
    expect(ratios).toMatch(/^ +prefill causal +1x64x16 +sdpa-webgpu \(GPU tensors float16\) +\d+\.\d{3} /m);
    expect(() => bench('--mode', 'webgpu', '--baseline', '/nonexistent')).toThrow(/--baseline \/nonexistent: want another build's dist\//);
  }, 300_000);

  it('rejects an unknown option in one line', () => {
    expect(() => bench('--mdoe', 'forward')).toThrow(/mdoe/);
    expect(() => bench('--note', 'no file for it')).toThrow(/--note goes into the file of --results/);
  });
});
