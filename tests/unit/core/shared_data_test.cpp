// The rule of tests/support/shared_data.h: absent reference data skips a test,
// unless SERVECAST_REQUIRE_SHARED says the run promises it; then it fails.

#include "shared_data.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstdlib>

namespace servecast::testing {
namespace {

void NeedAbsentData() { SERVECAST_NEED_SHARED(false, "no data at /nowhere"); }

TEST(SharedData, AbsentDataFailsWhenRequired) {
  ::setenv("SERVECAST_REQUIRE_SHARED", "1", 1);
  EXPECT_TRUE(SharedDataRequired());
  EXPECT_FATAL_FAILURE(NeedAbsentData(), "SERVECAST_REQUIRE_SHARED is set");
  ::setenv("SERVECAST_REQUIRE_SHARED", "0", 1);
  EXPECT_FALSE(SharedDataRequired());
  ::unsetenv("SERVECAST_REQUIRE_SHARED");
  EXPECT_FALSE(SharedDataRequired());
}

TEST(SharedData, PresentDataNeitherSkipsNorFails) {
  ::setenv("SERVECAST_REQUIRE_SHARED", "1", 1);
  SERVECAST_NEED_SHARED(true, "unused");
  ::unsetenv("SERVECAST_REQUIRE_SHARED");
  SUCCEED();
}

}  // namespace
}  // namespace servecast::testing
