#pragma once

// Op `attention_context` -> context_attention_perf: causal GQA prefill attention,
// float32, servecast's own blocked kernel with online softmax (flash-attention
// style), kernel_source "servecast_cpu_flash_prefill".
//
// Layouts (row-major): q and out [batch][isl][num_heads][head_dim];
// k and v [batch][isl][num_kv_heads][head_dim].

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cpu/attention_common.h"
#include "backends/cpu/op_support.h"
#include "collect/op.h"

namespace servecast::cpu {

// Query rows per tile (per query head of a KV group) and keys per tile.
inline constexpr std::int64_t kPrefillQueryTile = 32;
inline constexpr std::int64_t kPrefillKeyTile = 64;

// Scratch the kernel reuses between calls (sized on first use).
struct PrefillWorkspace {
  std::vector<float> acc, row_max, row_sum, scores;
};

// out = softmax(q·kᵀ / sqrt(head_dim), causal + window mask) · v. False (and
// nothing written) when head_dim has no kernel instantiation.
bool FlashPrefill(const AttentionShape& shape, const float* q, const float* k, const float* v, float* out,
                  PrefillWorkspace& ws);

// Compares `out` with the double-precision reference on `samples` (batch, head,
// position) triples: always the first and the last position, the window's edge
// when there is one, the rest drawn from `seed`.
RefCheck CheckPrefill(const AttentionShape& shape, const float* q, const float* k, const float* v, const float* out,
                      std::uint64_t seed, std::int64_t samples = 64);

std::unique_ptr<collect::Op> MakeAttentionContextOp();

}  // namespace servecast::cpu
