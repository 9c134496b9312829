#pragma once

// The KV-cache write of a prefill: an engine's attention op stores the new tokens' K
// and V in its paged KV cache around the context FMHA (in the cache's dtype; fp8
// e4m3 with one scale per tensor, quantized here), so the attention_context row
// times this kernel with the FMHA.
//
// k, v: [batch][seq][kv_heads][head_dim] bf16 (the FMHA's own inputs, BSHD).
// k_pool, v_pool: pages of the layout of attention_kernels.h
// ([page][kv_head][token in page][head_dim], kPagedKvPageSize tokens a page);
// page_table: [batch][pages_per_seq] int32, the pool page of each sequence's page.
// fp8: stored = e4m3_satfinite(x × (1 / scale)), rounding to nearest even, so that
// x ≈ stored × scale (the decode kernel's k_scale / v_scale).

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/attention_kernels.h"

namespace servecast::cuda {

struct KvAppendShape {
  std::int64_t batch = 1;
  std::int64_t seq = 1;
  std::int64_t kv_heads = 1;
  std::int64_t head_dim = 128;  // a multiple of 8
  std::int64_t pages_per_seq() const { return (seq + kPagedKvPageSize - 1) / kPagedKvPageSize; }
};

// Enqueues the write of K and V into their pools on `stream` (one launch); checks the
// launch (CudaError on failure). Throws Error for a head_dim that is not a multiple of 8.
void LaunchKvCacheAppend(const KvAppendShape& s, KvDtype dtype, const void* k, const void* v,
                         const std::int32_t* page_table, float k_scale, float v_scale, void* k_pool, void* v_pool,
                         cudaStream_t stream);

}  // namespace servecast::cuda
