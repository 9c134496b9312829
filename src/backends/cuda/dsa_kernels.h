#pragma once

// servecast's own kernels of DeepSeek Sparse Attention's pieces beyond the GEMMs and
// the sparse MLA (mla_kernels.h LaunchMlaSparse): the norms and rotary embeddings of
// the module, the cache write, the lightning indexer's scores and the top-k selection.
//
// Tokens: T = batch x isl new tokens, a sequence's consecutive; token r is at position
// step + r % isl of sequence r / isl, whose cached keys are its positions 0 .. that
// (the new ones included, causal). Caches are paged (kPagedKvPageSize tokens a page,
// page_table [batch][pages_per_seq]); a token's slot is page * 64 + position % 64:
//   latent pool  [slots][576]   bf16, or e4m3 with one scale per tensor
//   index pool   [slots][128]   e4m3, and index_scale [slots] float (one per token)

#include <cuda_runtime.h>

#include <cstdint>

namespace servecast::cuda {

inline constexpr int kDsaIndexDim = 128;  // the indexer's head and key width
inline constexpr int kDsaRopeDim = 64;    // rotated columns (MLA's rope, the indexer's first 64)

struct DsaTokens {
  std::int64_t batch = 1, isl = 1, step = 0;
  std::int64_t pages_per_seq = 1;  // of the page table
  std::int64_t tokens() const { return batch * isl; }
};

// Rows r < rows: y[r] = RMSNorm(x[r]) = x / sqrt(mean(x^2) + eps) * w, or with
// `layer_norm` LayerNorm (x - mean) / sqrt(var + eps) * w + bias (bf16, row r of x at
// x + r * x_stride, of y at y + r * y_stride; width a multiple of 8, at most 2048;
// float math). w, bias: [width] bf16.
void LaunchDsaNorm(const void* x, std::int64_t x_stride, void* y, std::int64_t y_stride, std::int64_t rows, int width,
                   const void* w, const void* bias, bool layer_norm, float eps, cudaStream_t stream);

// Where group g of token r's 64 rotated columns start: r * row_stride + g * group_stride + offset.
struct DsaRopeLayout {
  std::int64_t row_stride = 0, group_stride = 0, offset = 0;
};
// For token r and group g < groups: the 64 columns of x rotated into y as
// interleaved pairs (2i, 2i+1) by angle pos * theta^(-2i/64), pos the token's
// position (the angle in double, then float math).
void LaunchDsaRope(const void* x, const DsaRopeLayout& xl, void* y, const DsaRopeLayout& yl, const DsaTokens& t,
                   int groups, float theta, cudaStream_t stream);

// Writes each new token's latent (576 bf16 at latent + r * latent_stride: c_kv 512
// normalized, k_rope 64 rotated) into its latent-pool slot (bf16, or e4m3 of
// x / kv_scale), and its index key (128 bf16 at index_k + r * 128) into the index pool
// as e4m3 with its own scale max(amax / 448, min).
void LaunchDsaCacheWrite(const DsaTokens& t, const void* latent, std::int64_t latent_stride, const void* index_k,
                         const std::int32_t* page_table, bool kv_fp8, float kv_scale, void* pool, void* index_pool,
                         float* index_scale, cudaStream_t stream);

// The lightning indexer's scores: for token r and cached key s <= its position,
// logits[r * ld + s] = index_scale[s] * sum_h w[r][h] * relu(q[r][h] . k_s) (k_s the
// e4m3 key, q [T][heads][128] bf16, w [T][heads] bf16, times w_scale); keys past the
// position are not written. heads 32 or 64. bf16 tensor cores (the keys converted
// exactly from e4m3). A CTA scores chunk_tiles pages (64 keys each) of one token.
void LaunchDsaIndexerLogits(const DsaTokens& t, int heads, const void* q, const void* w, float w_scale,
                            const void* index_pool, const float* index_scale, const std::int32_t* page_table,
                            float* logits, std::int64_t ld, int chunk_tiles, cudaStream_t stream);
// The indexer's chunk (pages per CTA) for these tokens: 16 (1,024 keys) where the
// grid has at least 4 CTAs per multiprocessor, else halved until it does or is one
// page, so a few decode tokens still spread over the GPU (one token over 1,024 keys
// was one CTA: 58 us on the H200).
int DsaIndexerChunkTiles(const DsaTokens& t, int multiprocessors);

// Top-k of each token's scores: token r with n = position + 1 keys keeps all of them
// when n <= k, else the k largest of logits[r * ld .. + n) (ties at the threshold
// taken in any order); slots[r * k + j] = the pool slot of its j-th kept key (any
// order), lens[r] = min(n, k). One CTA per token: an 8-bit radix select (4 rounds
// of histograms) and a gather pass.
void LaunchDsaTopk(const DsaTokens& t, const float* logits, std::int64_t ld, int k, const std::int32_t* page_table,
                   std::int32_t* slots, std::int32_t* lens, cudaStream_t stream);

}  // namespace servecast::cuda
