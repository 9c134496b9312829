#pragma once

// The CUDA backend's Mamba2 op (Nemotron-H, NVIDIA Nemotron 3; docs/kernels.md says
// what each row times):
//   mamba2 -> mamba2_perf, AIC's schema: one case (phase, batch_size, seq_len, the local
//             head shape, chunk_size) gives two rows, one per kernel of the layer core
//             (kernel_source names it; the estimator sums them):
//               context     servecast_causal_conv1d (the short convolution over x, B, C
//                           with bias and SiLU, the final window written) and
//                           servecast_ssd_chunk (the chunked SSD scan from a zero state,
//                           final state written);
//               generation  servecast_causal_conv1d_update and
//                           servecast_selective_state_update (one token per sequence,
//                           the float32 state read and written).
// Heads and groups are per GPU (after tensor parallelism); d_model and model_name only
// say which model the shape came from. mamba2_kernels.h has the layouts and the math.

#include <memory>

#include "collect/op.h"
#include "collect/registry.h"

namespace servecast::cuda {

// Registers the op on the "cuda" backend.
void RegisterMamba2Ops(collect::Registry& r);

// For tests: every reference value is multiplied by `reference_scale` before the
// comparison, so a value other than 1 (e.g. 1.05) must make the check report the
// case incorrect.
std::unique_ptr<collect::Op> MakeMamba2Op(double reference_scale = 1.0);

}  // namespace servecast::cuda
