# Shared helpers for scripts/*.sh (sourced, not run).
# shellcheck shell=bash
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export ROOT
# One line per step, with the elapsed seconds of the whole script.
SDPA_T0="${SDPA_T0:-$(date +%s)}"
step() { printf '[%s +%3ss] %s\n' "${SDPA_SCRIPT:-sdpa}" "$(( $(date +%s) - SDPA_T0 ))" "$*"; }
die() { printf '[%s] ERROR: %s\n' "${SDPA_SCRIPT:-sdpa}" "$*" >&2; exit 1; }
