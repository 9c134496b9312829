#pragma once

// servecast's own kernels of Multi-head Latent Attention (DeepSeek-V3/R1, Kimi-K2):
// the absorbed-form decode over a paged latent KV cache, and the prefill's cache
// write. The geometry is the one every shipped MLA model shares (the MLA tables key
// rows by local heads only): a cached token is a latent of 512 values plus a shared
// rotary key of 64 (576 in all); prefill heads are q/k 192 (nope 128 + rope 64) and
// v 128.
//
// Paged latent cache: one pool of pages of kPagedKvPageSize (64) tokens, laid out
// [page][token in page][576] in bf16, or fp8 e4m3 with one scale per tensor
// (latent = fp8 · kv_scale); page_table [batch][pages_per_seq] (int32) maps a
// sequence's i-th page to a pool page. The decode's pool holds batch · pages_per_seq
// pages (the wgmma kernel's TMA map covers that many; a page index past them reads
// zeros).

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/cuda/attention_kernels.h"

namespace servecast::cuda {

inline constexpr int kMlaLatent = 512;                    // the compressed KV (values)
inline constexpr int kMlaRope = 64;                       // the shared rotary key
inline constexpr int kMlaCacheDim = kMlaLatent + kMlaRope;  // 576 per cached token
inline constexpr int kMlaNope = 128;                      // prefill q/k without rotary
inline constexpr int kMlaQkDim = kMlaNope + kMlaRope;     // 192
inline constexpr int kMlaVDim = 128;                      // prefill values

// ---- decode: one query token per sequence, absorbed form -------------------------
//
// q: [batch][num_heads][576] bf16 (q_nope already multiplied by W_UK, then q_rope);
// out: [batch][num_heads][512] bf16 = softmax(q · c_jᵀ · softmax_scale) · c_j[0:512]
// over the sequence's `tokens` cached latents c_j (the query's own included).
struct MlaDecodeShape {
  std::int64_t batch = 1;
  std::int64_t num_heads = 1;
  std::int64_t tokens = 1;
  std::int64_t pages_per_seq() const { return (tokens + kPagedKvPageSize - 1) / kPagedKvPageSize; }
};

// How a launch is cut: query heads per CTA (16, 32 or 64), the heads in blocks of
// that, and the KV length in `splits` CTAs of `tiles_per_split` tiles of
// `tile_tokens`; splits > 1 adds the combine kernel and a float workspace of
// `workspace_bytes`. `wgmma`: the Hopper kernel (sm90a/mla_decode_wgmma.cu, 64-token
// tiles, bf16 cache), else the mma.sync one (32-token tiles).
struct MlaDecodePlan {
  bool wgmma = false;
  int tile_tokens = 32;
  int head_tile = 16;
  int head_blocks = 1;
  int splits = 1;
  std::int64_t tiles_per_split = 1;
  int ctas_per_sm = 1;
  std::size_t workspace_bytes = 0;
  // Workspace for `batch` queries (launches go in chunks of at most 65535 queries).
  std::size_t WorkspaceFor(std::int64_t batch, std::int64_t num_heads) const;
  // "heads=64,splits=4,tiles_per_split=16", the wgmma kernel's prefixed
  // "wgmma,tile=64," (the row's kernel_source names it)
  std::string Describe() const;
};

// The head tile covers the local heads where it can (16 up to 16 heads, 32 up to 32,
// else 64); the split count minimizes a wave model (waves of resident CTAs times the
// tiles per split, plus the combine kernel's pass when split), at most 64 splits.
// Resident CTAs per SM (mma.sync: two for 16 heads, one for 32 and 64; wgmma: one)
// come from the CUDA occupancy calculator on the current device. A bf16 cache takes
// the wgmma kernel where it runs (MlaDecodeWgmmaRuns) unless `gathered` (the sparse
// launch, which only the mma.sync kernel has).
MlaDecodePlan PlanMlaDecode(const MlaDecodeShape& s, int multiprocessors, KvDtype kv_dtype, bool gathered = false);

// The wgmma decode is compiled in builds whose CUDA architectures include 90
// (MlaDecodeWgmmaBuilt) and runs on a compute capability 9.0 device.
bool MlaDecodeWgmmaBuilt();
bool MlaDecodeWgmmaRuns();
// Its dynamic shared memory for a head tile, allowed on the current device (the plan
// calls it); and one launch over `batch` queries (LaunchMlaDecode cuts the batch and
// adds the combine).
int PrepareMlaDecodeWgmma(int head_tile);
void LaunchMlaDecodeWgmmaPart(const MlaDecodeShape& s, const MlaDecodePlan& plan, const void* q, const void* pool,
                              const std::int32_t* page_table, float softmax_scale, void* out, float* ws_o,
                              float* ws_lse, std::int64_t batch, cudaStream_t stream);

// Enqueues the decode (and the combine when plan.splits > 1) on `stream`; checks the
// launches (CudaError). `workspace` holds plan.workspace_bytes (null when 0).
void LaunchMlaDecode(const MlaDecodeShape& s, const MlaDecodePlan& plan, KvDtype kv_dtype, const void* q,
                     const void* pool, const std::int32_t* page_table, float kv_scale, float softmax_scale, void* out,
                     void* workspace, cudaStream_t stream);

// Sparse (DeepSeek Sparse Attention): the same kernel over gathered latents. Query b
// (any number of them: prefill tokens are queries too) attends over its lens[b]
// <= s.tokens selected keys, whose pool token slots are slots[b][0 .. lens[b])
// (row stride s.tokens); s.tokens is the selection size (the indexer's top-k) the
// plan was made for.
void LaunchMlaSparse(const MlaDecodeShape& s, const MlaDecodePlan& plan, KvDtype kv_dtype, const void* q,
                     const void* pool, const std::int32_t* slots, const std::int32_t* lens, float kv_scale,
                     float softmax_scale, void* out, void* workspace, cudaStream_t stream);

// ---- prefill: the latent cache write and the shared rotary key -------------------
//
// latent: [batch][seq][576] bf16 (the kv_a projection's output: c_kv 512, k_rope 64).
// Writes each token's latent into its page slot of `pool` (bf16 copy, or e4m3 of
// x / kv_scale, rounding to nearest even, saturating), and copies its k_rope into
// columns 128..191 of every head of k: [batch][seq][num_heads][192] bf16 (the
// unabsorbed prefill's keys, nope part from kv_b, rope part shared by all heads).
struct MlaPrefillShape {
  std::int64_t batch = 1;
  std::int64_t seq = 1;
  std::int64_t num_heads = 1;
  std::int64_t pages_per_seq() const { return (seq + kPagedKvPageSize - 1) / kPagedKvPageSize; }
};
void LaunchMlaPrefillCacheWrite(const MlaPrefillShape& s, KvDtype kv_dtype, const void* latent,
                                const std::int32_t* page_table, float kv_scale, void* pool, void* k,
                                cudaStream_t stream);

}  // namespace servecast::cuda
