#!/usr/bin/env bash
# Differential fuzzing of the SIMD kernel against the scalar reference (tests/fuzz/attention_fuzz.cpp)
# with libFuzzer under ASan + UBSan, half the time with separate multiplies and adds (the SIMD128
# build), half with an emulated fused multiply-add (the relaxed-SIMD build's code path).
# Usage: npm run fuzz -- [seconds, default 60]
# New interesting inputs go to build/fuzz/corpus (seeded from tests/fuzz/corpus); a failing input
# is saved as build/fuzz/crash-* and can be replayed with build/fuzz/attention_fuzz_<variant> <file>.
set -euo pipefail
SDPA_SCRIPT=fuzz
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
usage="usage: npm run fuzz -- [seconds, default 60]"
case "${1:-60}" in
  -h|--help) echo "$usage"; exit 0 ;;
  *[!0-9]*|0) echo "fuzz: seconds must be a whole number above 0; got '$1'" >&2; echo "$usage" >&2; exit 2 ;;
esac
seconds="${1:-60}"

if ! dpkg -s libclang-rt-14-dev >/dev/null 2>&1; then
  step "installing clang's sanitizer and libFuzzer runtime (libclang-rt-14-dev)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libclang-rt-14-dev >/dev/null
fi
mkdir -p build/fuzz/corpus
# Failing inputs of earlier runs are kept, but only this run's count against it.
mkdir -p build/fuzz/earlier-crashes
mv build/fuzz/crash-* build/fuzz/earlier-crashes/ 2>/dev/null || true
for variant in separate fused; do
  defines=()
  [[ $variant == fused ]] && defines=(-DSDPA_EMULATE_FUSED_MADD)
  step "building build/fuzz/attention_fuzz_$variant (clang, -fsanitize=fuzzer,address,undefined ${defines[*]})"
  clang++ -std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined -Icpp "${defines[@]}" \
    cpp/core/*.cpp cpp/cpu/*.cpp cpp/dispatch/*.cpp cpp/extras/*.cpp cpp/webgpu/plan.cpp tests/fuzz/attention_fuzz.cpp -o "build/fuzz/attention_fuzz_$variant"
  step "fuzzing the $variant multiply-adds for $((seconds / 2))s (2 workers)"
  # Run in build/fuzz: libFuzzer writes its per-job fuzz-<n>.log files into the working directory.
  (cd build/fuzz && "./attention_fuzz_$variant" -max_total_time="$((seconds / 2))" -timeout=20 \
    -rss_limit_mb=4096 -artifact_prefix=./ -print_final_stats=1 -jobs=2 -workers=2 \
    corpus ../../tests/fuzz/corpus) 2>&1 | tee "build/fuzz/last-run-$variant.log" |
    grep -E "^#|DONE|stat::|ERROR|SUMMARY|attention_fuzz:" || true
done
if ls build/fuzz/crash-* >/dev/null 2>&1; then die "fuzzing found failing inputs: $(ls build/fuzz/crash-*)"; fi
step "no failures in ${seconds}s; corpus: $(ls build/fuzz/corpus | wc -l) inputs in build/fuzz/corpus"
