#!/usr/bin/env bash
# Idempotent set-up: system packages (only those missing) and node_modules.
# Non-interactive; as root it uses apt-get directly, otherwise sudo if present.
set -euo pipefail
SDPA_SCRIPT=setup
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

# package -> command that proves it is there (empty: check with dpkg -s)
declare -A PROBE=(
  [g++]=g++
  [cmake]=cmake
  [ninja-build]=ninja
  [emscripten]=em++
  [chromium]=chromium
  [libgtest-dev]=
  [libvulkan1]=
)
missing=()
# libvulkan1: the Vulkan loader dawn.node (npm `webgpu`) needs to reach Chromium's SwiftShader.
for pkg in g++ cmake ninja-build emscripten chromium libgtest-dev libvulkan1; do
  cmd="${PROBE[$pkg]}"
  if [[ -n "$cmd" ]] && command -v "$cmd" >/dev/null 2>&1; then continue; fi
  if [[ -z "$cmd" ]] && dpkg -s "$pkg" >/dev/null 2>&1; then continue; fi
  missing+=("$pkg")
done

if ((${#missing[@]})); then
  step "apt-get install ${missing[*]}"
  SUDO=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "need root (or sudo) to install: ${missing[*]}"
    SUDO=(sudo -n)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -qq
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
else
  step "system packages present (g++ cmake ninja emscripten chromium libgtest-dev libvulkan1)"
fi

command -v node >/dev/null 2>&1 || die "node >= 20.16 is required (not installed)"
node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&b>=16)?0:1)' \
  || die "node >= 20.16 is required (found $(node -v))"

if [[ ! -d node_modules || package-lock.json -nt node_modules ]]; then
  step "npm ci"
  npm ci --no-audit --no-fund
  touch node_modules
else
  step "node_modules up to date"
fi
