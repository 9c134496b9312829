#pragma once

// The CUDA backend's DeepSeek Sparse Attention module ops (DeepSeek-V3.2, GLM-5;
// dsa.cpp says what a row times, docs/kernels.md how fast):
//   dsa_context_module     -> dsa_context_module_perf: prefill of isl new tokens per
//                             sequence after `step` cached ones
//   dsa_generation_module  -> dsa_generation_module_perf: one token per sequence over
//                             `step` cached ones
// AIC's schema; the geometry is the architecture's (tables/cost_model.h DsaGeometryOf);
// num_heads is the local head count of one GPU.

#include <memory>

#include "collect/op.h"
#include "collect/registry.h"

namespace servecast::cuda {

void RegisterDsaOps(collect::Registry& r);

// For tests: every reference value is multiplied by `reference_scale` before the
// comparison, so a value other than 1 (e.g. 1.05) must make the check fail.
std::unique_ptr<collect::Op> MakeDsaOp(bool context, double reference_scale = 1.0);

}  // namespace servecast::cuda
