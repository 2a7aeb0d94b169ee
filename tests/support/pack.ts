// `npm pack` of the package into a folder, as a user's install gets it (prepack builds the wasm
// and dist/ first).
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

export interface Packed {
  /** The tarball's path. */
  tarball: string;
  /** The paths inside it. */
  files: string[];
}

export function npmPack(destination: string): Packed {
  const out = execFileSync(npm, ['pack', '--json', '--pack-destination', destination], {
    cwd: repoRoot,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, npm_config_loglevel: 'warn' },
  });
  // prepack's build output goes to stdout too; the JSON is the last array.
  const [result] = JSON.parse(out.slice(out.lastIndexOf('\n[') + 1)) as { filename: string; files: { path: string }[] }[];
  return { tarball: join(destination, result!.filename), files: result!.files.map((f) => f.path) };
}
