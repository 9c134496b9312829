#include "backends/cuda/register.h"

#include <memory>

#include "backends/cuda/attention_ops.h"
#include "backends/cuda/comm_ops.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/dsa_ops.h"
#include "backends/cuda/elementwise_ops.h"
#include "backends/cuda/gdn_ops.h"
#include "backends/cuda/gemm_ops.h"
#include "backends/cuda/mamba2_ops.h"
#include "backends/cuda/mla_ops.h"
#include "backends/cuda/moe_ops.h"

namespace servecast::cuda {

void RegisterCudaBackend(collect::Registry& registry) {
  registry.AddBackend(std::make_unique<CudaBackend>());
  RegisterGemmOps(registry);
  RegisterElementwiseOps(registry);
  RegisterAttentionOps(registry);
  RegisterCommOps(registry);
  RegisterMoeOps(registry);
  RegisterMlaOps(registry);
  RegisterGdnOps(registry);
  RegisterMamba2Ops(registry);
  RegisterDsaOps(registry);
}

}  // namespace servecast::cuda
