#pragma once

// Tests that compare against ../shared (AIC's tables, the reference model configs,
// the golden cases) skip when it is absent, except where the run promises it: with
// SERVECAST_REQUIRE_SHARED set (not "0") in the environment, as .ci/run sets it,
// its absence fails the test, so that a parity claim never rests on skipped tests.

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace servecast::testing {

inline bool SharedDataRequired() {
  const char* v = std::getenv("SERVECAST_REQUIRE_SHARED");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

}  // namespace servecast::testing

// In a test body or SetUp: skip (or, when required, fail) unless `present`.
#define SERVECAST_NEED_SHARED(present, what)                                                          \
  do {                                                                                                \
    if (!(present)) {                                                                                 \
      if (::servecast::testing::SharedDataRequired())                                                 \
        FAIL() << std::string(what) << " (SERVECAST_REQUIRE_SHARED is set: ../shared must be there)"; \
      else                                                                                            \
        GTEST_SKIP() << std::string(what);                                                            \
    }                                                                                                 \
  } while (0)
