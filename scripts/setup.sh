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

export DEBIAN_FRONTEND=noninteractive
SUDO=()
# as_root CMD...: CMD as root (sudo when not root); `what` names the packages for the error.
as_root() {
  if [[ $(id -u) -ne 0 && ${#SUDO[@]} -eq 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "need root (or sudo) to install: $what"
    SUDO=(sudo -n)
  fi
  "${SUDO[@]}" "$@"
}

if ((${#missing[@]})); then
  step "apt-get install ${missing[*]}"
  what="${missing[*]}"
  as_root apt-get update -qq
  as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
else
  step "system packages present (g++ cmake ninja emscripten chromium libgtest-dev libvulkan1)"
fi

# Mesa's lavapipe (Vulkan on the CPU) 23 or later: the software Vulkan with float16 shaders, on
# which the webgpu_f16 test step runs the WebGPU float16 kernels ('shader-f16' in dawn.node;
# SwiftShader has none). Debian 12's own Mesa (22.3) lacks Vulkan features Dawn requires;
# bookworm-backports has a newer one.
mesa_version() { dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || echo 0; }
lavapipe_ok() { dpkg --compare-versions "$(mesa_version)" ge 23; }
if ! lavapipe_ok; then
  step "apt-get install mesa-vulkan-drivers >= 23 (lavapipe)"
  what=mesa-vulkan-drivers
  codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
  release=()
  if [[ "$codename" == bookworm ]]; then
    echo "deb http://deb.debian.org/debian bookworm-backports main" | as_root tee /etc/apt/sources.list.d/sdpa-bookworm-backports.list >/dev/null
    release=(-t bookworm-backports)
  fi
  as_root apt-get update -qq
  as_root apt-get install -y -qq --no-install-recommends "${release[@]}" mesa-vulkan-drivers </dev/null
  lavapipe_ok || die "mesa-vulkan-drivers $(mesa_version) is older than 23 (lavapipe without the Vulkan features dawn.node needs)"
else
  step "lavapipe present (mesa-vulkan-drivers $(mesa_version))"
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
