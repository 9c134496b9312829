#include "backends/cuda/kv_cache_append.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/quantize_device.cuh"
#include "core/error.h"

namespace servecast::cuda {
namespace {

constexpr int kThreads = 256;

// One thread moves 8 consecutive values (16 bytes of bf16) of one (sequence, token,
// KV head) row; blockIdx.y picks K (0) or V (1).
template <bool kFp8>
__global__ void __launch_bounds__(kThreads)
    kv_cache_append(const uint4* __restrict__ k, const uint4* __restrict__ v, const std::int32_t* __restrict__ table,
                    std::int64_t seq, std::int64_t kv_heads, std::int64_t vecs_per_row, std::int64_t pages_per_seq,
                    std::int64_t total_vecs, float inv_k, float inv_v, void* __restrict__ k_pool,
                    void* __restrict__ v_pool) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x;
  if (i >= total_vecs) return;
  const bool is_v = blockIdx.y == 1;
  const std::int64_t d8 = i % vecs_per_row;
  std::int64_t rest = i / vecs_per_row;
  const std::int64_t g = rest % kv_heads;
  rest /= kv_heads;
  const std::int64_t t = rest % seq;
  const std::int64_t b = rest / seq;
  const std::int64_t page = table[b * pages_per_seq + t / kPagedKvPageSize];
  const std::int64_t dst = ((page * kv_heads + g) * kPagedKvPageSize + t % kPagedKvPageSize) * vecs_per_row + d8;
  const uint4 x = __ldg((is_v ? v : k) + i);
  if constexpr (!kFp8) {
    reinterpret_cast<uint4*>(is_v ? v_pool : k_pool)[dst] = x;
  } else {
    reinterpret_cast<uint2*>(is_v ? v_pool : k_pool)[dst] = fp8dev::Quantize8(x, is_v ? inv_v : inv_k);
  }
}

}  // namespace

void LaunchKvCacheAppend(const KvAppendShape& s, KvDtype dtype, const void* k, const void* v,
                         const std::int32_t* page_table, float k_scale, float v_scale, void* k_pool, void* v_pool,
                         cudaStream_t stream) {
  if (s.head_dim % 8 != 0)
    throw Error("kv cache append: head_dim " + std::to_string(s.head_dim) + " is not a multiple of 8");
  const std::int64_t vecs_per_row = s.head_dim / 8;
  const std::int64_t total = s.batch * s.seq * s.kv_heads * vecs_per_row;
  if (total == 0) return;
  const dim3 grid(static_cast<unsigned>((total + kThreads - 1) / kThreads), 2);
  const auto* k8 = static_cast<const uint4*>(k);
  const auto* v8 = static_cast<const uint4*>(v);
  if (dtype == KvDtype::kFp8E4m3)
    kv_cache_append<true><<<grid, kThreads, 0, stream>>>(k8, v8, page_table, s.seq, s.kv_heads, vecs_per_row,
                                                         s.pages_per_seq(), total, 1.0f / k_scale, 1.0f / v_scale,
                                                         k_pool, v_pool);
  else
    kv_cache_append<false><<<grid, kThreads, 0, stream>>>(k8, v8, page_table, s.seq, s.kv_heads, vecs_per_row,
                                                          s.pages_per_seq(), total, 1.0f, 1.0f, k_pool, v_pool);
  SC_CUDA_CHECK_LAUNCH();
}

}  // namespace servecast::cuda
