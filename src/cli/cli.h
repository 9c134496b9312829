#pragma once

#include <functional>

#include "collect/registry.h"

namespace servecast::cli {

// Entry point of the servecast binary. `extra` registers more ops (the test
// binary adds its fault-injection ops this way); production passes nullptr.
int Main(int argc, char** argv, const std::function<void(collect::Registry&)>& extra);

}  // namespace servecast::cli
