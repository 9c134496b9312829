#pragma once

// servecast's own kernels around the moe op's expert GEMMs (moe.cpp): router top-k,
// the expert permutation (count, offsets, scatter), the fp8_block activation
// quantizer in the per-expert segment layout, and the weighted combine. Every
// launcher enqueues on `stream`, never synchronizes or allocates, and throws
// CudaError when the launch fails, so a whole MoE call can be captured in a graph.
//
// The permuted ("expert-sorted") buffers hold the local experts' rows one segment
// after another: expert e's rows are [offsets[e], offsets[e] + counts[e]), its
// segment is padded to a multiple of `align` rows (4 for fp8_block, whose 1x128
// activation scales cuBLASLt reads in 16-byte aligned token columns; 1 otherwise),
// so offsets[e + 1] = offsets[e] + RoundUp(counts[e], align). Padding rows are never
// written by the scatter; the fp8_block quantizer writes zeros (and the smallest
// scale) there, so the GEMMs read finite values.

#include <cuda_runtime.h>

#include <cstdint>

namespace servecast::cuda {

inline constexpr int kMoeMaxTopk = 32;                // one warp lane per pick
inline constexpr std::int64_t kMoeMaxExperts = 2048;  // the router's row stays in shared memory

// Router: for each token t, the topk largest of the bf16 logits [tokens x experts]
// (descending, the lower expert first on a tie) -> ids[t * topk + j], and the
// softmax over those topk logits (fp32) -> weights[t * topk + j]. One warp per token.
// Kernel moe_router_topk.
void LaunchMoeRouterTopk(const void* logits_bf16, std::int64_t tokens, std::int64_t experts, int topk,
                         std::int32_t* ids, float* weights, cudaStream_t stream);

// counts[e] = number of picks ids[a] == e for e < local_experts (ids >= local_experts
// belong to other EP ranks). Zeroes counts first (a memset node). Kernel moe_count_local.
void LaunchMoeCountLocal(const std::int32_t* ids, std::int64_t picks, std::int64_t local_experts, int* counts,
                         cudaStream_t stream);

// offsets[0..local_experts] (padded exclusive prefix sum of counts, see above) and
// cursor[e] = offsets[e] for the scatter. One block. Kernel moe_expert_offsets.
void LaunchMoeOffsets(const int* counts, std::int64_t local_experts, int align, int* offsets, int* cursor,
                      cudaStream_t stream);

// For every pick a = t * topk + j routed to a local expert e: slot = cursor[e]++
// (atomic; the order of a token's rows inside a segment is not deterministic),
// slot_of[a] = slot, row_token[slot] = t, and row t of `src` (row_bytes bytes) is
// copied to row `slot` of `dst`. Remote picks get slot_of[a] = -1. A slot at or beyond
// `capacity` rows (only possible when the routing disagrees with the host's counts)
// is not written and gets slot_of[a] = -1 too. One block per pick. Kernel moe_scatter_rows.
void LaunchMoeScatterRows(const std::int32_t* ids, std::int64_t tokens, int topk, std::int64_t local_experts,
                          int* cursor, int* slot_of, int* row_token, std::int64_t capacity, const void* src, void* dst,
                          std::int64_t row_bytes, cudaStream_t stream);

// fp8 1x128 activation quantization in the segment layout, for the `rows` rows of the
// permuted buffer (rows = offsets[local_experts]). For row r of expert e (i = r -
// offsets[e], n = offsets[e + 1] - offsets[e]) and 128-column group g of the k
// columns: the values v are the bf16 row of `in` ([rows x k]), or, with `silu_mul`,
// silu(gate) * up in fp32 from `in` = [rows x 2k] bf16 rows [gate | up]; then
// s = max(amax(v) / 448, kFp8MinScale) -> scales[k/128 * offsets[e] + g * n + i]
// (expert e's block is cuBLASLt's VEC128_32F layout for its n rows), q = e4m3(v * (1/s)).
// Padding rows (i >= counts[e]) get q = 0 and s = kFp8MinScale. Requires k % 128 == 0.
// One warp per (row, group). Kernel moe_quant_fp8_group128.
void LaunchMoeQuantGroup128(const void* in_bf16, bool silu_mul, std::int64_t rows, std::int64_t k, const int* offsets,
                            const int* counts, std::int64_t local_experts, void* q_e4m3, float* scales,
                            cudaStream_t stream);

// out[t] = sum over j with slot_of[t * topk + j] >= 0 of weights[t * topk + j] *
// expert_out[slot] (fp32 accumulation, bf16 result); a token with no local pick gets
// a zero row. expert_out: [.. x hidden] bf16, out: [tokens x hidden] bf16. One block
// per token. Kernel moe_combine.
void LaunchMoeCombine(const void* expert_out_bf16, const int* slot_of, const float* weights, std::int64_t tokens,
                      int topk, std::int64_t hidden, void* out_bf16, cudaStream_t stream);

// dst row i = the `row_bytes` bytes at base + offsets[i], for i < count (the moe
// check's weight rows, read in one copy). One block per row. Kernel moe_gather_rows.
void LaunchGatherRows(const void* base, const std::int64_t* offsets, std::int64_t count, std::int64_t row_bytes,
                      void* dst, cudaStream_t stream);

}  // namespace servecast::cuda
