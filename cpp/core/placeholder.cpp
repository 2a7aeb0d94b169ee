// PLACEHOLDER (infra): replaced by the core
// Exists only so that the native and wasm builds have a core source to compile.
#include "core/placeholder.h"

namespace sdpa {
const char* placeholder_version() { return "0.1.0-placeholder"; }
}  // namespace sdpa
