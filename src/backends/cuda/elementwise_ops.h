#pragma once

#include "collect/registry.h"

namespace servecast::cuda {

// Registers this family's ops on the "cuda" backend.
void RegisterElementwiseOps(collect::Registry& r);

}  // namespace servecast::cuda
