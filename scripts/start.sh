#!/usr/bin/env bash
# npm start: set-up, build, then the Vite dev server for web/demo
# (COOP/COEP headers on). Extra arguments go to vite, e.g. npm start -- --port 5174 --host
set -euo pipefail
SDPA_SCRIPT=start
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
step "setup"; bash scripts/setup.sh
step "build (wasm dist)"; bash scripts/build.sh wasm dist
step "vite dev server for web/demo"
exec node_modules/.bin/vite --config web/demo/vite.config.ts "$@"
