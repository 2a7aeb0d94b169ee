// PLACEHOLDER (infra): replaced by the core
#pragma once

namespace sdpa {
const char* placeholder_version();
}  // namespace sdpa
