// The generation example's command (web/examples/generate/main.ts), bundled as `npm run
// example:generate` bundles it and run on the built package (dist/) in a child process: --help,
// a bad option answered with the usage and exit status 2 (no stack trace), and a short run with
// --check on 'simd' and on 'webgpu' (dawn.node in Node).
import { spawnSync } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';

// Inside the repository, where `sdpa-web` resolves to the package itself (its exports: dist/).
const bundle = 'build/examples/generate-cli-test.mjs';

function run(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [bundle, ...args], { encoding: 'utf8', timeout: 120_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('npm run example:generate', () => {
  beforeAll(() => {
    const esbuild = spawnSync('node_modules/.bin/esbuild', ['web/examples/generate/main.ts', '--bundle', '--platform=node', '--format=esm',
      '--external:sdpa-web', '--external:webgpu', '--log-level=warning', `--outfile=${bundle}`], { encoding: 'utf8' });
    expect(esbuild.status, esbuild.stderr).toBe(0);
  });

  it('--help prints every option; a bad option or value is its message and the usage, exit status 2', () => {
    const help = run('--help');
    expect(help.status).toBe(0);
    for (const option of ['--backend', '--prompt', '--tokens', '--cache-dtype', '--max-length', '--check', '--help']) expect(help.stdout).toContain(option);
    for (const [args, message] of [[['--bogus'], "Unknown option '--bogus'"], [['--tokens', 'x'], '--tokens must be an integer'],
      [['--backend', 'cuda'], '--backend must be one of'], [['--cache-dtype', 'int2'], '--cache-dtype must be one of']] as const) {
      const bad = run(...args);
      expect(bad.status, args.join(' ')).toBe(2);
      expect(bad.stderr).toContain(message);
      expect(bad.stderr).toContain('Usage: npm run example:generate');
      expect(bad.stderr).not.toMatch(/\n\s+at /);
    }
  });

  it.each(['simd', 'webgpu'])('--backend %s --tokens 4 --check: the cached and the full path give the same tokens', (backend) => {
    const r = run('--backend', backend, '--tokens', '4', '--check');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(`backend ${backend}`);
    expect(r.stdout).toContain('tokens the same');
  });
});
