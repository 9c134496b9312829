#pragma once

#include "collect/registry.h"

namespace servecast::cpu {

// Adds the "cpu" backend and its ops: gemm, attention_context,
// attention_generation, rmsnorm, silu_and_mul, custom_allreduce (multi-process).
void RegisterCpuBackend(collect::Registry& registry);

}  // namespace servecast::cpu
