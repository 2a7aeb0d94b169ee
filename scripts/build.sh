#!/usr/bin/env bash
# Incremental build. Steps (default: native wasm dist):
#   native  g++ build of sdpa_core + GoogleTest suite in build/native
#   wasm    Emscripten build in build/wasm -> web/src/wasm/sdpa_core.{mjs,wasm}
#   dist    tsc web/src -> dist/, copy web/src/wasm/ -> dist/wasm/
#   demo    vite build of web/demo -> web/demo/dist
# Usage: build.sh [--lib | --demo | STEP...]
#   --lib   wasm dist        (what npm pack needs; used by prepack)
#   --demo  native wasm dist demo
# Env: SDPA_SANITIZE=1 adds ASan+UBSan to the native build (build/native-san).
set -euo pipefail
SDPA_SCRIPT=build
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

steps=()
for arg in "$@"; do
  case "$arg" in
    --lib) steps+=(wasm dist) ;;
    --demo) steps+=(native wasm dist demo) ;;
    native|wasm|dist|demo) steps+=("$arg") ;;
    *) die "unknown argument: $arg" ;;
  esac
done
((${#steps[@]})) || steps=(native wasm dist)
has() { [[ " ${steps[*]} " == *" $1 "* ]]; }

GEN=()
command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
JOBS="${SDPA_JOBS:-$(nproc 2>/dev/null || echo 2)}"

# configure <dir> <cmake args...>: configure once; later builds re-use the
# folder (a generator switch, e.g. Ninja appearing, starts it afresh).
configure() {
  local dir="$1"; shift
  if [[ -f "$dir/CMakeCache.txt" ]]; then
    local want="${GEN[1]:-Unix Makefiles}"
    grep -q "^CMAKE_GENERATOR:INTERNAL=$want\$" "$dir/CMakeCache.txt" && return 0
    rm -rf "$dir"
  fi
  "$@" -S . -B "$dir" "${GEN[@]}" >"$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; die "configure of $dir failed"; }
}

if has native; then
  NATIVE_DIR=build/native
  SAN=OFF
  if [[ "${SDPA_SANITIZE:-0}" != 0 ]]; then NATIVE_DIR=build/native-san; SAN=ON; fi
  step "native: cmake build in $NATIVE_DIR (sanitizers $SAN)"
  mkdir -p build
  configure "$NATIVE_DIR" cmake -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSDPA_SANITIZE="$SAN"
  cmake --build "$NATIVE_DIR" -j "$JOBS"
fi

if has wasm; then
  step "wasm: emcmake cmake build in build/wasm -> web/src/wasm/"
  command -v emcmake >/dev/null 2>&1 || die "emcmake not found: run bash scripts/setup.sh"
  mkdir -p build
  # emcmake's default emulator (node --experimental-wasm-threads) is rejected by node 20.
  configure build/wasm emcmake cmake -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CROSSCOMPILING_EMULATOR="$(command -v node)"
  NODE_PATH=/usr/share/nodejs cmake --build build/wasm -j "$JOBS"
fi

if has dist; then
  step "dist: tsc -p tsconfig.build.json, copy web/src/wasm -> dist/wasm"
  [[ -x node_modules/.bin/tsc ]] || die "node_modules missing: run bash scripts/setup.sh"
  [[ -f web/src/wasm/sdpa_core.wasm ]] || die "web/src/wasm/sdpa_core.wasm missing: build the wasm step first"
  # Built beside dist/ (the same depth: the source maps' relative paths hold), then put in its
  # place by renames, and only where it changed: the tests that read dist/ (bench.test.ts) run
  # while npm pack's prepack runs this step (pack.test.ts) and never see it half-written.
  rm -rf dist.next dist.old
  node_modules/.bin/tsc -p tsconfig.build.json --outDir dist.next
  mkdir -p dist.next/wasm
  cp -R web/src/wasm/. dist.next/wasm/
  if diff -rq dist.next dist >/dev/null 2>&1; then
    rm -rf dist.next
  else
    [[ ! -d dist ]] || mv dist dist.old
    mv dist.next dist
    rm -rf dist.old
  fi
fi

if has demo; then
  step "demo: vite build web/demo -> web/demo/dist"
  node_modules/.bin/vite build --config web/demo/vite.config.ts --logLevel warn
fi
step "done (${steps[*]})"
