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

namespace servecast::cuda {

inline constexpr int kPagedKvPageSize = 64;  // tokens per page
// The bf16 tensor-core kernel's ring is filled by the tensor memory accelerator for
// splits of at least this many pages (on compute capability 9.0 and newer), by
// cp.async below.
inline constexpr int kPagedDecodeTmaMinPages = 8;

enum class KvDtype { kBf16, kFp8E4m3 };

struct PagedDecodeShape {
  std::int64_t batch = 1;
  std::int64_t num_heads = 1;
  std::int64_t num_kv_heads = 1;
  std::int64_t head_dim = 128;
  std::int64_t tokens = 1;  // cached tokens per sequence, the query's own included
  std::int64_t window = 0;  // 0: all tokens
  std::int64_t pages_per_seq() const { return (tokens + kPagedKvPageSize - 1) / kPagedKvPageSize; }
  std::int64_t group() const { return num_heads / num_kv_heads; }
};

// How one launch is split: the kernel variant, query heads per CTA (CUDA-core
// kernel: a power of two <= 8 covering the group; tensor-core kernel: up to 16),
// the group in chunks of that, and the number of KV splits (CTAs
// along the KV length, each a whole number of pages); `splits` > 1 adds the
// reduce kernel and a float workspace of `workspace_bytes`.
struct PagedDecodePlan {
  bool tensor_cores = false;  // the mma.sync variant (head dim 64/128; bf16 KV groups of 3+, fp8 KV groups of 2+)
  int heads_per_cta = 1;
  int head_chunks = 1;
  int splits = 1;
  std::int64_t pages_per_split = 1;
  std::size_t workspace_bytes = 0;
  int variant = 0;  // the bf16 tensor-core kernel's A/B variant (PagedDecodeVariants); 0: the default (always for fp8)
  bool tma = false;  // tensor-core kernel: K/V arrive through the tensor memory accelerator (bf16 default), not cp.async
  bool fp8_lean = true;  // fp8-KV tensor-core kernel: the lean loop (PagedDecodeTuning::fp8_lean)
  // "splits=8,pages_per_split=16,heads_per_cta=4", after "mma," or "mma,tma," for the
  // tensor-core kernel (",variant=<name>" appended when not 0; fp8_lean is not named)
  std::string Describe() const;
};

// A/B choices for benchmarks and tests (bench_decode_variants, the GPU tests). The
// defaults are what the op runs; PlanPagedDecode records the choices in the plan, and
// LaunchPagedDecode reads them from there (no process-wide state).
struct PagedDecodeTuning {
  // Whether PlanPagedDecode may pick the tensor-core variant; false routes every case,
  // bf16 and fp8 KV, to the CUDA-core kernel.
  bool tensor_cores = true;
  // Whether PlanPagedDecode may pick the tensor-core variant for fp8 KV (it also needs
  // tensor_cores); false routes fp8 KV to the CUDA-core kernel and leaves bf16 KV as it is.
  bool tensor_cores_fp8 = true;
  // Whether the fp8-KV tensor-core kernel runs its lean loop (the warps of a CTA fill
  // their own ring rows and keep their own running maxima, combined at the end; interior
  // tiles skip the mask; unchanged maxima skip the rescale) or the loop the bf16 kernel
  // runs (CTA barriers and a shared maximum per tile).
  bool fp8_lean = true;
  // Whether the split rule is the wave model (PlanPagedDecode) or, as before 2026-12-01,
  // the fewest splits that give every CTA slot one CTA (which can leave a nearly empty
  // second wave).
  bool wave_balanced_splits = true;
  // Which variant (PagedDecodeVariants) goes into bf16 tensor-core plans; PlanPagedDecode
  // throws servecast::Error when there is no such variant. The split rule of a variant
  // other than 0 aims at its own CTAs per SM (by shared memory) times its split target.
  int variant = 0;
};

// True when head_dim has a compiled instantiation (64, 128, 256).
bool PagedDecodeSupportsHeadDim(std::int64_t head_dim);

// The split rule: the KV length is split into the number of splits (CTAs along it,
// each a whole number of pages, at least 4, at most 256) that minimizes a wave model
// of the launch: waves of resident CTAs (4 per SM; for the tensor-core kernel 2 at head
// dim 128 with bf16 KV, 3 at 128 and 5 at 64 with fp8 KV) times the pages per split
// plus a fixed cost per CTA, plus the reduce kernel's when split.
//
// Which kernel: the tensor-core one (paged_decode_attention_mma) for head dim 64/128
// with bf16 KV and groups of 3+ query heads per KV head, or fp8 e4m3 KV and groups of
// 2+ (fp16 MMAs on K/V converted from fp8 in the fragment loads, exact); the CUDA-core
// one (paged_decode_attention) for everything else. Describe() starts with "mma," for
// the tensor-core kernel. With bf16 KV its ring is filled by the tensor memory
// accelerator ("mma,tma,") when a split has at least kPagedDecodeTmaMinPages pages and
// the device is sm_90 or newer, otherwise by cp.async (shorter splits pay more for the
// TMA ring's setup than it saves).
//
// `tuning` (A/B only; the op passes the defaults) may route cases to the CUDA-core
// kernel, pick a bf16 variant, the fp8 kernel's loop, or the old split rule.
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
