// PLACEHOLDER (infra): replaced by the core
// Minimal Embind surface so the wasm build, the loader shims and packaging can
// be tested end to end before the real bindings land.
#include <emscripten/bind.h>

#include <string>

#include "core/placeholder.h"

namespace {
std::string version() { return sdpa::placeholder_version(); }
}  // namespace

EMSCRIPTEN_BINDINGS(sdpa) { emscripten::function("version", &version); }
