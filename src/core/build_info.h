#pragma once

#include <string_view>

namespace servecast {

// The release version of this build (from CMake's project version).
std::string_view BuildVersion();
// The git commit the binary was built from (12 hex digits, "-dirty" when the
// tracked tree had local changes, "unknown" outside a git checkout).
std::string_view BuildCommit();

}  // namespace servecast
