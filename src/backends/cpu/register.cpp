#include "backends/cpu/register.h"

#include <memory>

#include "backends/cpu/attention_context.h"
#include "backends/cpu/attention_generation.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/custom_allreduce.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/moe.h"
#include "backends/cpu/rmsnorm.h"
#include "backends/cpu/silu_and_mul.h"

namespace servecast::cpu {

void RegisterCpuBackend(collect::Registry& registry) {
  registry.AddBackend(std::make_unique<CpuBackend>());
  registry.AddOp("cpu", MakeGemmOp());
  registry.AddOp("cpu", MakeAttentionContextOp());
  registry.AddOp("cpu", MakeAttentionGenerationOp());
  registry.AddOp("cpu", MakeRmsNormOp());
  registry.AddOp("cpu", MakeSiluAndMulOp());
  registry.AddOp("cpu", MakeCustomAllReduceOp());
  registry.AddOp("cpu", MakeMoeOp());
}

}  // namespace servecast::cpu
