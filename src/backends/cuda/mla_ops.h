#pragma once

// The CUDA backend's MLA ops (DeepSeek-V3/R1, Kimi-K2 geometry; docs/kernels.md says
// what each row times):
//   mla_context     -> context_mla_perf: the unabsorbed prefill of one layer's
//                      attention: the new tokens' latents (512 + 64) written into the
//                      64-token paged cache (bf16, or fp8 e4m3 with one scale), the
//                      shared rotary key copied into every head's k, then causal MHA
//                      with q/k 192 and v 128 through cuDNN's fused SDPA
//   mla_generation  -> generation_mla_perf: absorbed decode, one query token per
//                      sequence over the paged latent cache (q·k over 576, values the
//                      512 latent), servecast's split-KV tensor-core kernel
//                      (mla_kernels.h)
//   mla_gen_pre     -> mla_bmm_perf: per-head q_nope (128) x W_UK into the latent (512)
//   mla_gen_post    -> mla_bmm_perf: per-head latent output (512) x W_UV into v (128)
//                      (both cuBLASLt strided-batched GEMMs, bf16 or fp8 per tensor)
// num_heads is the local head count of one GPU.

#include <memory>

#include "collect/op.h"
#include "collect/registry.h"

namespace servecast::cuda {

// Registers the four ops on the "cuda" backend.
void RegisterMlaOps(collect::Registry& r);

// For tests: every reference value is multiplied by `reference_scale` before the
// comparison, so a value other than 1 (e.g. 1.05) must make the check report the
// case incorrect.
std::unique_ptr<collect::Op> MakeMlaContextOp(double reference_scale = 1.0);
std::unique_ptr<collect::Op> MakeMlaGenerationOp(double reference_scale = 1.0);
// pre: mla_gen_pre, else mla_gen_post.
std::unique_ptr<collect::Op> MakeMlaBmmOp(bool pre, double reference_scale = 1.0);

}  // namespace servecast::cuda
