#pragma once

// servecast's own decode-attention kernel over a paged KV cache (flash-decoding
// with split KV), and the device fills the attention ops need.
//
// Paged KV cache: one pool of pages per tensor (K and V), each page holding
// kPagedKvPageSize tokens of every KV head, laid out
// [page][kv_head][token in page][head_dim] (one head's tokens of a page are
// contiguous); page_table [batch][pages_per_seq] (int32) maps a sequence's i-th
// page to a pool page. Element type bf16, or fp8 e4m3 with one scale per tensor
// (k = fp8 · k_scale).
//
// q and out: [batch][num_heads][head_dim] bf16. Query head h reads KV head
// h / (num_heads / num_kv_heads). Every sequence has `tokens` tokens in the cache
// (the query's own included); the query attends to all of them, or with window
// w > 0 to the last w. Scale 1/sqrt(head_dim).

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/cuda_plan/paged_decode_plan.h"

namespace servecast::cuda {

// The shapes, the plan, the tuning, the variants' configurations and the split rule
// are host code (backends/cuda_plan/paged_decode_plan.h, tested in every build);
// this is the split rule on the current device: PlanPagedDecodeOn with the TMA ring
// when the device has one (compute capability 9.0 or newer; none without a device,
// so host-only plans name the cp.async ring).
PagedDecodePlan PlanPagedDecode(const PagedDecodeShape& s, int multiprocessors, KvDtype kv_dtype,
                                const PagedDecodeTuning& tuning = {});

// Internal A/B variants of the bf16-KV tensor-core kernel (tile size, ring depth,
// page-table prefetch, split target), for bench_decode_variants and the GPU tests;
// not a parameter of the op. Variant 0 is the default, the only one the op runs
// (PagedDecodeTuning::variant). fp8-KV plans ignore the variant (the fp8 kernel has
// one configuration).
struct PagedDecodeVariant {
  std::string name;         // "default", "t32s3", ...
  std::string description;  // its knobs; shared memory, CTAs per SM and bytes in flight
};
std::vector<PagedDecodeVariant> PagedDecodeVariants();
// The variant's tensor-core kernel CTAs resident per multiprocessor on the current
// device (the CUDA occupancy calculator), head dim 64 or 128.
int PagedDecodeVariantCtasPerSm(int variant, std::int64_t head_dim);

// The fp8-KV tensor-core kernel's CTAs resident per multiprocessor on the current
// device (the CUDA occupancy calculator), head dim 64 or 128, for the lean loop (the
// default) or the full one (PagedDecodeTuning::fp8_lean); the split rule assumes 5 and 3.
int PagedDecodeFp8CtasPerSm(std::int64_t head_dim, bool lean = true);

// Enqueues the decode (and the reduce when plan.splits > 1) on `stream`.
// `workspace` holds plan.workspace_bytes (may be null when that is 0). The K and V
// pools hold batch · pages_per_seq pages (page-table entries in [0, batch ·
// pages_per_seq)), as the op and the benchmarks allocate them: the TMA ring's tensor
// maps span exactly that many pages (a page beyond would read as zeros, not fault).
void LaunchPagedDecode(const PagedDecodeShape& s, const PagedDecodePlan& plan, KvDtype kv_dtype, const void* q,
                       const void* k_pool, const void* v_pool, const std::int32_t* page_table, float k_scale,
                       float v_scale, void* out, void* workspace, cudaStream_t stream);

// Uniform fp8 e4m3 values in [-scale, scale) (rounded to fp8, never zero), from a
// counter-based hash of (seed, index).
void FillUniformFp8E4m3(void* dst, std::size_t n, std::uint64_t seed, float scale, cudaStream_t stream);

}  // namespace servecast::cuda
