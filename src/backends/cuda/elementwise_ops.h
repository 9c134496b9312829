#pragma once

// The CUDA backend's elementwise ops, all writing elementwise_perf (key op_name,
// dtype, num_tokens, hidden_size), bfloat16 only, run by servecast's own kernels
// (elementwise_kernels.h). docs/kernels.md says what each op's row times:
//   rmsnorm           y = x / sqrt(mean(x²) + 1e-6) · w
//   rmsnorm_residual  residual = x + residual; y = rmsnorm(residual) · w (both written)
//   silu_and_mul      out = silu(gate) · up, input [tokens][2·hidden] = [gate | up]
//   residual_add      y = a + b
//   rotary_embedding  neox RoPE in place on one [tokens][hidden] tensor of
//                     hidden / 128 heads (head_dim 128), positions 0..tokens-1
//   embedding         out[t] = table[ids[t]], table [151936][hidden]

#include <memory>
#include <string>
#include <vector>

#include "collect/op.h"
#include "collect/registry.h"

namespace servecast::cuda {

// Registers this family's ops on the "cuda" backend.
void RegisterElementwiseOps(collect::Registry& r);

// The names above, in that order.
std::vector<std::string> ElementwiseOpNames();

// One op by name (throws Error for an unknown name). For tests: every reference
// value is multiplied by `reference_scale` before the comparison, so a value other
// than 1 (e.g. 1.05) must make the check report the case incorrect.
std::unique_ptr<collect::Op> MakeElementwiseOp(const std::string& op_name, double reference_scale = 1.0);

// The vocabulary of the embedding op's table (Qwen2/Qwen3's, 151936 rows).
inline constexpr long long kEmbeddingVocab = 151936;

}  // namespace servecast::cuda
