#!/usr/bin/env node
// npm run gpu-pack -- DIR: what `npm run gpu-check` needs on a Linux x86-64 machine with a GPU but
// without node, npm or a network, packed into DIR (about 50 MB) to copy there beside a checkout
// with its built dist/ and web/src/wasm/:
//   DIR/node.tar.xz          this node binary (bin/node)
//   DIR/node_modules.tar.xz  the packages gpu-check's suites and benches import (vitest, webgpu's
//                            linux-x64 build, onnxruntime-web's WebGPU bundle) and what they need
//   DIR/debs/                the Vulkan loader and the glvnd libraries that NVIDIA's Vulkan ICD
//                            links against (Debian/Ubuntu amd64 packages; apt-get download)
//   DIR/unpack.sh            run it there from the checkout's root: node_modules/ in the
//                            checkout, node in DIR/bin, the libraries unpacked into / (as root)
// Then: PATH=DIR/bin:$PATH node scripts/gpu-check.mjs OUT (docs/webgpu.md).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ROOTS = ['vitest', 'webgpu', 'onnxruntime-web'];
// Packages a root names but gpu-check never loads (browser mode, type-only, optional tooling).
const SKIP = /^(playwright|playwright-core|@vitest\/browser.*|@vitest\/ui|@vitest\/coverage-.*|@types\/.*|typescript|jsdom|happy-dom|@edge-runtime\/.*|lightningcss.*|jiti|sass.*|less|stylus|sugarss|terser|tsx|yaml)$/;
// Of the large packages, only what Linux x86-64 and onnxruntime-web's WebGPU EP load.
const ONLY = {
  webgpu: ['package.json', 'index.js', 'types.d.ts', 'dist/linux-x64'],
  'onnxruntime-web': ['package.json', 'types.d.ts', 'lib', 'dist/ort.webgpu.bundle.min.mjs', 'dist/ort-wasm-simd-threaded.asyncify.mjs', 'dist/ort-wasm-simd-threaded.asyncify.wasm', 'dist/ort.node.min.mjs'],
};
const DEBS = ['libvulkan1', 'libglvnd0', 'libgl1', 'libglx0', 'libegl1', 'libgles2', 'libopengl0'];

/** The directory of package `name` as node resolves it from `from`. */
function packageDir(name, from) {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return candidate;
    if (dirname(dir) === dir) return undefined;
  }
}

/** Every package directory the roots need, by their dependencies, optional and peer ones. */
function closure() {
  const seen = new Set();
  const visit = (dir) => {
    if (seen.has(dir)) return;
    seen.add(dir);
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    for (const name of Object.keys({ ...pkg.dependencies, ...pkg.optionalDependencies, ...pkg.peerDependencies })) {
      const found = !SKIP.test(name) && packageDir(name, dir);
      if (found) visit(found);
    }
  };
  for (const name of ROOTS) {
    const dir = packageDir(name, ROOT);
    if (!dir) throw new Error(`node_modules/${name} is missing: run npm install (or bash scripts/setup.sh) first`);
    visit(dir);
  }
  return [...seen].map((dir) => relative(ROOT, dir));
}

function main() {
  const args = process.argv.slice(2);
  const usage = 'usage: npm run gpu-pack -- DIR  (packs node, the node_modules gpu-check loads and the Vulkan libraries into DIR)';
  if (args[0] === '--help' || args[0] === '-h') {
    console.log(usage);
    return;
  }
  if (args.length !== 1 || args[0].startsWith('-')) {
    console.error(`gpu-pack: ${args.length ? `unexpected ${args.join(' ')}` : 'no DIR given'}\n${usage}`);
    process.exitCode = 2;
    return;
  }
  const [target] = args;
  const out = resolve(target);
  mkdirSync(join(out, 'debs'), { recursive: true });
  const paths = closure().flatMap((dir) => {
    const only = ONLY[dir.replace(/^node_modules\//, '')];
    return only ? only.map((p) => join(dir, p)).filter((p) => existsSync(join(ROOT, p))) : [dir];
  });
  paths.push('node_modules/.bin/vitest');
  execFileSync('tar', ['-cJf', join(out, 'node_modules.tar.xz'), '-C', ROOT, ...paths], { env: { ...process.env, XZ_OPT: '-6 -T0' } });
  execFileSync('tar', ['-cJf', join(out, 'node.tar.xz'), '-C', dirname(process.execPath), '--transform', 's,^,bin/,', 'node'], { env: { ...process.env, XZ_OPT: '-6 -T0' } });
  try {
    execFileSync('apt-get', ['download', ...DEBS], { cwd: join(out, 'debs'), stdio: 'ignore' });
  } catch {
    console.warn('gpu-pack: apt-get download failed: DIR/debs is empty (the GPU machine then needs its own Vulkan loader and glvnd libraries)');
  }
  writeFileSync(join(out, 'unpack.sh'), `#!/bin/sh
# From the checkout's root, as root: node into ${'$'}(dirname $0)/bin, node_modules/ into the checkout,
# the Vulkan loader and glvnd libraries into /.
pack=$(cd "$(dirname "$0")" && pwd)
tar -xJf "$pack/node.tar.xz" -C "$pack" && tar -xJf "$pack/node_modules.tar.xz" || exit 1
for deb in "$pack"/debs/*.deb; do [ -e "$deb" ] && dpkg -x "$deb" /; done
ldconfig 2>/dev/null
echo "now: PATH=$pack/bin:\\$PATH node scripts/gpu-check.mjs OUT"
`, { mode: 0o755 });
  const size = readdirSync(out).filter((f) => f.endsWith('.xz')).map((f) => `${f} ${(Number(execFileSync('stat', ['-c', '%s', join(out, f)])) / 2 ** 20).toFixed(1)} MiB`);
  console.log(`gpu-pack: ${out}: ${size.join(', ')}, debs/ ${readdirSync(join(out, 'debs')).length} packages, unpack.sh`);
}

try {
  main();
} catch (e) {
  console.error(`gpu-pack: ${e.message}`);
  process.exit(1);
}
