#pragma once

#include "collect/registry.h"

namespace servecast::cuda {

// Adds the "cuda" backend and its ops (GEMM family, compute_scale, elementwise).
void RegisterCudaBackend(collect::Registry& registry);

}  // namespace servecast::cuda
