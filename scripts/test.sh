#!/usr/bin/env bash
# Full test run: set-up, build, native tests, Node tests.
# Every step is a function in STEPS; later ones (e.g. browser tests in
# tests/browser/ driving /usr/bin/chromium) are added as another function +
# entry. SDPA_TEST_STEPS="ctest vitest" runs a subset (skip set-up/build).
set -euo pipefail
SDPA_SCRIPT=test
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

run_setup()     { step "setup";  bash scripts/setup.sh; }
run_build()     { step "build (native wasm dist)"; bash scripts/build.sh native wasm dist; }
run_typecheck() {
  step "typecheck: tsc -p tsconfig.json (web/src + tests/node), tsc -p web/demo/tsconfig.json (demo + tests/browser)"
  node_modules/.bin/tsc -p tsconfig.json
  node_modules/.bin/tsc -p web/demo/tsconfig.json
}
# Import cycles in the package's source, type-only imports included (exits 1 on any).
run_cycles()    { step "cycles: madge --circular --extensions ts web/src"; node_modules/.bin/madge --circular --extensions ts web/src; }
run_ctest()     { step "ctest (build/native)"; ctest --test-dir build/native --output-on-failure -j "$(nproc 2>/dev/null || echo 2)"; }
run_ctest_wasm() { step "ctest (build/wasm: fuzz corpus replayed by the wasm kernels under node)"; ctest --test-dir build/wasm --output-on-failure; }
run_vitest()    { step "vitest run (tests/node)"; node_modules/.bin/vitest run --config vitest.config.ts; }
# The WebGPU files again on SwiftShader with 'subgroups' withheld from the adapter: the kernels that
# combine lanes through workgroup memory (flash-decoding's tile kernel, the backward's lanes), which
# the vitest step's device, having subgroups, runs only where a file forces them.
run_webgpu_wgmem() {
  step "WebGPU files without 'subgroups' (SDPA_WEBGPU_SUBGROUPS=0, SwiftShader)"
  SDPA_WEBGPU_SUBGROUPS=0 node_modules/.bin/vitest run --config vitest.config.ts tests/node/*webgpu*.test.ts
}
run_browser()   { step "browser tests of the demo (tests/browser: vite build + preview, the vite dev server of npm start; headless /usr/bin/chromium)"; node_modules/.bin/vitest run --config vitest.browser.config.ts; }
# The packed package in fresh apps (tests/browser/apps): npm pack, installed offline into a Vite app
# (vite dev, vite build + preview) and an esbuild app, with and without COOP/COEP, in chromium.
run_browser_apps() { step "browser tests of the packed package in fresh apps (tests/browser/apps: vite dev, vite build + preview, esbuild)"; node_modules/.bin/vitest run --config vitest.browser-apps.config.ts; }
# The WebGPU float16 kernels that read f16 storage ('shader-f16'): float16-gpu-webgpu.test.ts again,
# on dawn.node over Mesa's lavapipe (SwiftShader, which runs the vitest step, has no float16 shaders;
# lavapipe's subgroups are 8 wide, SwiftShader's 4), run by `npm run gpu-check -- --quick`, which
# then smoke-tests the bench's webgpu mode there too
# (the report in build/gpu-check/; lavapipe is not a GPU: its timings mean nothing); then, on that
# second Vulkan implementation, the int8/int4 caches' GPU quantizer (bit for bit with the CPU's,
# NaN/Inf blocks; their attention tests stay on SwiftShader: minutes of shader compiles here).
run_webgpu_f16() {
  local icd
  icd="$(ls /usr/share/vulkan/icd.d/lvp_icd*.json 2>/dev/null | head -n 1)"
  [[ -n "$icd" ]] || die "no lavapipe ICD in /usr/share/vulkan/icd.d (mesa-vulkan-drivers: run scripts/setup.sh)"
  step "WebGPU float16 kernels with 'shader-f16', gpu-check --quick and the int8/int4 cache quantizer on lavapipe ($icd)"
  node scripts/gpu-check.mjs build/gpu-check --quick --icd "$icd"
  VK_ICD_FILENAMES="$icd" node_modules/.bin/vitest run --config vitest.config.ts \
    tests/node/kv-cache-quantized-webgpu.test.ts -t 'bit for bit|non-finite'
}
# The WebGPU backend in headless Debian Chromium (tests/browser/webgpu-*.test.ts, SwiftShader).
run_browser_webgpu() { step "browser WebGPU tests (tests/browser/webgpu-*, chromium)"; node_modules/.bin/vitest run --config vitest.browser-webgpu.config.ts; }

STEPS=(${SDPA_TEST_STEPS:-setup build typecheck cycles ctest ctest_wasm vitest webgpu_wgmem webgpu_f16 browser browser_webgpu browser_apps})
for s in "${STEPS[@]}"; do "run_$s"; done
step "all tests passed (${STEPS[*]})"
