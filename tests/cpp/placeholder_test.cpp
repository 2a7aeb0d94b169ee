// PLACEHOLDER (infra): replaced by the core
#include <gtest/gtest.h>

#include <string>

#include "core/placeholder.h"

TEST(Placeholder, VersionIsSet) {
  EXPECT_FALSE(std::string(sdpa::placeholder_version()).empty());
}
