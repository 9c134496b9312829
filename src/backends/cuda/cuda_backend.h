#pragma once

#include "collect/registry.h"

namespace servecast::cuda {

// The "cuda" collector backend: NVIDIA GPUs through the CUDA runtime, cuBLASLt,
// cuDNN and NCCL, plus servecast's own kernels.
class CudaBackend : public collect::Backend {
 public:
  std::string name() const override { return "cuda"; }
  // Library stack read at run time: "<cuda runtime>-cublaslt<v>-cudnn<v>-nccl<v>",
  // e.g. "13.0-cublaslt13.1-cudnn9.14-nccl2.28". No GPU -> StartupError.
  collect::RuntimeInfo DetectRuntime() const override;
  std::vector<int> DefaultDevices() const override;  // every visible GPU
  // An index past the visible GPUs (CUDA_VISIBLE_DEVICES counts) is not present.
  std::string DeviceProblem(int device) const override;
  std::string DefaultSystem(const collect::RuntimeInfo& rt) const override;  // "" : resolve by device name
  void InitWorker(int device) const override;
  // An ncclUniqueId (hex) for a gang of collective ranks.
  std::string NewGroupId() const override;
};

}  // namespace servecast::cuda
