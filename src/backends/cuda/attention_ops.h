#pragma once

// The CUDA backend's attention ops (docs/kernels.md says what each row times):
//   attention_context     -> context_attention_perf: causal prefill (GQA/MQA/MHA,
//                            optional sliding window) after the paged KV-cache
//                            write (bf16 or fp8 e4m3 cache); bf16 attention through
//                            cuDNN's fused SDPA, or fp8 (attn_dtype fp8, fp8 cache)
//                            through its fp8 SDPA graph, both built with the backend
//                            graph API (attention_cudnn.h)
//   attention_generation  -> generation_attention_perf: one query token per
//                            sequence over a paged KV cache (64-token pages), bf16
//                            or fp8 e4m3 KV, servecast's split-KV decode kernel
//                            (attention_kernels.h)

#include <memory>

#include "collect/op.h"
#include "collect/registry.h"

namespace servecast::cuda {

// Registers both ops on the "cuda" backend.
void RegisterAttentionOps(collect::Registry& r);

// For tests: every reference value is multiplied by `reference_scale` before the
// comparison, so a value other than 1 (e.g. 1.05) must make the check report the
// case incorrect.
std::unique_ptr<collect::Op> MakeAttentionContextOp(double reference_scale = 1.0);
std::unique_ptr<collect::Op> MakeAttentionGenerationOp(double reference_scale = 1.0);

// For tests and A/B measurements: the ops with non-default choices (the registered ops
// use the defaults, SdpaFp8Options{} and PagedDecodeTuning{}): the context op's fp8
// cuDNN graph built with `fp8_options` (attention_cudnn.h), the generation op planned
// with `tuning` (attention_kernels.h).
struct SdpaFp8Options;
struct PagedDecodeTuning;
std::unique_ptr<collect::Op> MakeAttentionContextOp(double reference_scale, const SdpaFp8Options& fp8_options);
std::unique_ptr<collect::Op> MakeAttentionGenerationOp(double reference_scale, const PagedDecodeTuning& tuning);

}  // namespace servecast::cuda
