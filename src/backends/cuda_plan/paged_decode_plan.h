#pragma once

// The host side of servecast's paged decode attention (backends/cuda/attention_kernels.h):
// the shapes, the launch plan and the split rule. No CUDA headers: this library is
// built and its tests run in every build (CI has no CUDA), while the kernels that
// carry the plan out live in the CUDA backend.
//
// Paged KV cache: one pool of pages per tensor (K and V), each page holding
// kPagedKvPageSize tokens of every KV head (attention_kernels.h has the layout).

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>

namespace servecast::cuda {

inline constexpr int kPagedKvPageSize = 64;  // tokens per page
// The bf16 tensor-core kernel's ring is filled by the tensor memory accelerator for
// splits of at least this many pages (on compute capability 9.0 and newer), by
// cp.async below.
inline constexpr int kPagedDecodeTmaMinPages = 8;
// A launch splits the KV length into at most this many parts (the reduce kernel's
// per-split weights live in shared memory).
inline constexpr int kPagedDecodeMaxSplits = 256;
// Query heads one tensor-core CTA holds (the MMA's 16 rows).
inline constexpr int kPagedDecodeMmaRows = 16;

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
  // tensor-core kernel: K/V arrive through the tensor memory accelerator (bf16 default), not cp.async
  bool tma = false;
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

// One configuration of the tensor-core kernel: warps per CTA (16 tokens each: a tile
// is 16·warps tokens), ring depth, page-table prefetch, how the ring is filled. The
// kernel takes these as template arguments (attention_kernels.cu instantiates every
// entry of kPagedDecodeVariantConfigs).
struct PagedDecodeMmaConfig {
  int warps;                // 16 tokens each: a tile is 16·warps tokens (16, 32 or 64)
  int stages;               // depth of the ring
  bool table_prefetch;      // page-table entries read 32 pages ahead into registers
  bool tma = false;         // the ring filled by the tensor memory accelerator (one 3-D box per tile), else cp.async
  int tma_promotion = 256;  // the tensor maps' L2 promotion, bytes (0: none)
};

// The fp8 kernel's ring depth: 4 stages of 16 KiB at head dim 128 (3 CTAs per SM
// by shared memory and by its registers), 5 of 8 KiB at head dim 64 (5 CTAs per SM).
constexpr int PagedDecodeFp8Stages(int head_dim) {
  return head_dim == 128 ? 4 : 5;
}

// Bytes of one tile row in shared memory: bf16 rows padded by 16 bytes (cp.async
// ring), unpadded and 128-byte swizzled when the tensor memory accelerator writes
// them (tma), fp8 rows unpadded (swizzled in the kernel).
constexpr int PagedDecodeMmaRowBytes(int head_dim, bool fp8, bool tma) {
  return fp8 ? head_dim : tma ? head_dim * 2 : (head_dim + 8) * 2;
}
constexpr int PagedDecodeMmaStageBytes(int head_dim, int warps, bool fp8, bool tma) {
  return 2 * 16 * warps * PagedDecodeMmaRowBytes(head_dim, fp8, tma);  // K and V tiles
}
// The ring's dynamic shared memory. tma: 1 KiB more, to align the ring to the 1,024
// bytes a 128-byte swizzle pattern spans; fp8 (cp.async): 128 bytes more, to align it
// to a 128-byte bank line.
constexpr int PagedDecodeMmaSmemBytes(int head_dim, int warps, int stages, bool fp8, bool tma) {
  return stages * PagedDecodeMmaStageBytes(head_dim, warps, fp8, tma) + (tma ? 1024 : fp8 ? 128 : 0);
}
// CTAs of a config that fit on one multiprocessor by shared memory (228 KiB per SM
// on Hopper, 1 KiB reserved per CTA, plus the kernel's static arrays), at most 16;
// the split rule's CTAs-per-SM target for the variants and the fp8 kernel.
constexpr int PagedDecodeMmaCtasPerSm(int head_dim, int warps, int stages, bool fp8, bool tma) {
  const int kstatic = (3 * warps + 1) * kPagedDecodeMmaRows * 4 + (tma ? 8 * stages : 0);
  const int per_cta = PagedDecodeMmaSmemBytes(head_dim, warps, stages, fp8, tma) + kstatic + 1024;
  return 228 * 1024 / per_cta < 16 ? 228 * 1024 / per_cta : 16;
}

// The bf16-KV tensor-core kernel's internal A/B variants (tile size, ring depth,
// page-table prefetch, split target), for bench_decode_variants and the GPU tests;
// not a parameter of the op. Entry 0 is the default, the only one the op runs
// (PagedDecodeTuning::variant); entry kPagedDecodeCpAsyncVariant runs the default's
// short splits. The split rule aims at split_waves × the config's CTAs per SM.
struct PagedDecodeVariantConfig {
  const char* name;
  const char* what;
  PagedDecodeMmaConfig config;
  int split_waves;
};
inline constexpr PagedDecodeVariantConfig kPagedDecodeVariantConfigs[] = {
    // Why the default is the TMA ring without L2 promotion: attention_kernels.cu (kMmaTma).
    {"default",
     "the op's kernel: the ring filled by the tensor memory accelerator, one 3-D box (whole rows, 128-byte "
     "swizzled) per tile and tensor, no L2 promotion (the default since 2026-12-01)",
     {4, 3, true, true, 0},
     1},
    {"cp_async",
     "a cp.async ring with rows padded by 16 bytes, every thread copying its pieces (the default until "
     "2026-12-01)",
     {4, 3, true},
     1},
    {"no_prefetch", "cp_async with the page table read per tile (the default until 2026-11-30)", {4, 3, false}, 1},
    {"t32s3", "cp_async, half-page tiles, 4 CTAs per SM at head dim 128", {2, 3, true}, 1},
    {"t32s4", "cp_async, half-page tiles, 4 stages, 3 CTAs per SM", {2, 4, true}, 1},
    {"t32s6", "cp_async, half-page tiles, 6 stages, 2 CTAs per SM (deeper ring)", {2, 6, true}, 1},
    {"t16s3", "cp_async, one-warp CTAs, quarter-page tiles, 8 CTAs per SM", {1, 3, true}, 1},
    {"t16s6", "cp_async, one-warp CTAs, 6 stages, 4 CTAs per SM", {1, 6, true}, 1},
    {"fine_splits", "cp_async with 8x the CTAs of one resident wave", {4, 3, true}, 8},
    {"tma3d_l2_256", "the default with 256-byte L2 promotion", {4, 3, true, true, 256}, 1},
    {"tma3d_l2_128", "the default with 128-byte L2 promotion", {4, 3, true, true, 128}, 1},
};
inline constexpr int kPagedDecodeVariantCount = static_cast<int>(std::size(kPagedDecodeVariantConfigs));
inline constexpr int kPagedDecodeCpAsyncVariant = 1;

// The variant's entry; servecast::Error naming the range when there is none.
const PagedDecodeVariantConfig& PagedDecodeVariantAt(int variant);

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
// `tma_ring` (the device is sm_90 or newer: PlanPagedDecode in attention_kernels.h
// asks the current device), otherwise by cp.async (shorter splits pay more for the
// TMA ring's setup than it saves).
//
// `tuning` (A/B only; the op passes the defaults) may route cases to the CUDA-core
// kernel, pick a bf16 variant, the fp8 kernel's loop, or the old split rule.
PagedDecodePlan PlanPagedDecodeOn(const PagedDecodeShape& s, int multiprocessors, KvDtype kv_dtype, bool tma_ring,
                                  const PagedDecodeTuning& tuning = {});

}  // namespace servecast::cuda
