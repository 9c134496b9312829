#pragma once

// Op `attention_generation` -> generation_attention_perf: decode attention (one
// query token per sequence, isl 1) over a paged KV cache, GQA, float32, servecast's
// own kernel, kernel_source "servecast_cpu_paged_decode".
//
// Every sequence of the batch has step + 1 tokens in the cache (step earlier
// tokens and the query's own), and the query attends to all of them (or to the
// last window_size when window_size > 0). q and out are [batch][num_heads][head_dim].

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cpu/attention_common.h"
#include "backends/cpu/op_support.h"
#include "collect/op.h"

namespace servecast::cpu {

inline constexpr std::int64_t kKvPageSize = 64;  // tokens per page

// A paged KV cache as serving engines keep it: one pool of fixed-size pages, each
// holding kKvPageSize tokens of every KV head, laid out
// [page][kv_head][token in page][head_dim] (a head's tokens of a page are
// contiguous); a page table per sequence maps its i-th page to a pool page.
struct PagedKvCache {
  std::int64_t num_kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t pages_per_seq = 0;
  std::int64_t num_pages = 0;
  std::vector<float> k, v;               // num_pages · num_kv_heads · kKvPageSize · head_dim
  std::vector<std::int32_t> page_table;  // [batch][pages_per_seq]

  std::int64_t Offset(std::int64_t b, std::int64_t pos, std::int64_t kv_head) const {
    std::int64_t page = page_table[static_cast<std::size_t>(b * pages_per_seq + pos / kKvPageSize)];
    return ((page * num_kv_heads + kv_head) * kKvPageSize + pos % kKvPageSize) * head_dim;
  }
  const float* Key(std::int64_t b, std::int64_t pos, std::int64_t kv_head) const {
    return k.data() + Offset(b, pos, kv_head);
  }
  const float* Value(std::int64_t b, std::int64_t pos, std::int64_t kv_head) const {
    return v.data() + Offset(b, pos, kv_head);
  }
};

// Bytes of the cache for `batch` sequences of `tokens` tokens (pages and page table).
double PagedKvCacheBytes(std::int64_t batch, std::int64_t tokens, std::int64_t num_kv_heads, std::int64_t head_dim);

// A cache with room for `batch` sequences of `tokens` tokens: exactly the pages
// needed, assigned to sequences in a shuffled order drawn from `rng` (so that a
// kernel ignoring the page table reads the wrong tokens). K and V are zero.
PagedKvCache MakePagedKvCache(std::int64_t batch, std::int64_t tokens, std::int64_t num_kv_heads, std::int64_t head_dim,
                              Rng& rng);

struct DecodeWorkspace {
  std::vector<float> acc, row_max, row_sum, scores;
};

// out = attention of each sequence's query over its step + 1 cached tokens. False
// (nothing written) when head_dim has no kernel instantiation.
bool PagedDecode(const AttentionShape& shape, const float* q, const PagedKvCache& cache, float* out,
                 DecodeWorkspace& ws);

// Compares `out` with the double-precision reference on up to `samples`
// (batch, head) pairs (all of them when there are that few), always including the
// first and the last.
RefCheck CheckDecode(const AttentionShape& shape, const float* q, const PagedKvCache& cache, const float* out,
                     std::uint64_t seed, std::int64_t samples = 32);

std::unique_ptr<collect::Op> MakeAttentionGenerationOp();

}  // namespace servecast::cpu
