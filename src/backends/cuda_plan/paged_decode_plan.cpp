#include "backends/cuda_plan/paged_decode_plan.h"

#include <algorithm>

#include "core/error.h"

namespace servecast::cuda {

const PagedDecodeVariantConfig& PagedDecodeVariantAt(int variant) {
  if (variant < 0 || variant >= kPagedDecodeVariantCount)
    throw Error("paged decode: variant " + std::to_string(variant) + " does not exist (0.." +
                std::to_string(kPagedDecodeVariantCount - 1) + ")");
  return kPagedDecodeVariantConfigs[variant];
}

std::string PagedDecodePlan::Describe() const {
  return std::string(tensor_cores ? (tma ? "mma,tma," : "mma,") : "") + "splits=" + std::to_string(splits) +
         ",pages_per_split=" + std::to_string(pages_per_split) + ",heads_per_cta=" + std::to_string(heads_per_cta) +
         (variant != 0 ? std::string(",variant=") + PagedDecodeVariantAt(variant).name : std::string());
}

bool PagedDecodeSupportsHeadDim(std::int64_t head_dim) {
  return head_dim == 64 || head_dim == 128 || head_dim == 256;
}

PagedDecodePlan PlanPagedDecodeOn(const PagedDecodeShape& s, int multiprocessors, KvDtype kv_dtype, bool tma_ring,
                                  const PagedDecodeTuning& tuning) {
  if (tuning.variant != 0) PagedDecodeVariantAt(tuning.variant);  // throws when out of range
  PagedDecodePlan p;
  const std::int64_t g = s.group();
  const bool fp8 = kv_dtype == KvDtype::kFp8E4m3;
  p.fp8_lean = tuning.fp8_lean;
  p.tensor_cores = tuning.tensor_cores && (s.head_dim == 64 || s.head_dim == 128) &&
                   (fp8 ? tuning.tensor_cores_fp8 && g >= 2 : g >= 3);
  const PagedDecodeMmaConfig& dflt = kPagedDecodeVariantConfigs[0].config;
  int ctas_per_sm = 4;
  if (p.tensor_cores && fp8) {
    // The fp8 kernel (no A/B variants): 3 CTAs per SM at head dim 128 (64 KiB of
    // stages), 5 at 64 (40 KiB).
    p.heads_per_cta = static_cast<int>(std::min<std::int64_t>(g, kPagedDecodeMmaRows));
    const int d = static_cast<int>(s.head_dim);
    ctas_per_sm = PagedDecodeMmaCtasPerSm(d, dflt.warps, PagedDecodeFp8Stages(d), true, false);
  } else if (p.tensor_cores) {
    p.heads_per_cta = static_cast<int>(std::min<std::int64_t>(g, kPagedDecodeMmaRows));
    if (s.head_dim == 128) ctas_per_sm = 2;  // 102 KiB of stages
    p.variant = tuning.variant;
    if (p.variant != 0) {
      const PagedDecodeVariantConfig& v = PagedDecodeVariantAt(p.variant);
      const PagedDecodeMmaConfig& c = v.config;
      ctas_per_sm =
          PagedDecodeMmaCtasPerSm(static_cast<int>(s.head_dim), c.warps, c.stages, false, c.tma) * v.split_waves;
    }
  } else {
    p.heads_per_cta = g >= 8 ? 8 : g >= 4 ? (g == 4 ? 4 : 8) : g == 3 ? 4 : static_cast<int>(g);
  }
  p.head_chunks = static_cast<int>((g + p.heads_per_cta - 1) / p.heads_per_cta);
  const std::int64_t first = s.window > 0 ? std::max<std::int64_t>(0, s.tokens - s.window) : 0;
  const std::int64_t pages = (s.tokens - 1) / kPagedKvPageSize - first / kPagedKvPageSize + 1;
  const std::int64_t base = s.batch * s.num_kv_heads * p.head_chunks;
  const std::int64_t target = static_cast<std::int64_t>(ctas_per_sm) * std::max(1, multiprocessors);
  const std::int64_t max_splits = std::clamp<std::int64_t>((pages + 3) / 4, 1, kPagedDecodeMaxSplits);
  std::int64_t splits = 1;
  if (tuning.wave_balanced_splits) {
    // A launch's CTAs run in waves of `target` (the CTAs resident at once), so with n
    // splits it lasts about waves(n) · (pages per split + c) + (n > 1 ? c : 0) page
    // times: c for a CTA's fixed cost (Q, page table, filling the ring, the epilogue)
    // and again for the reduce kernel, each about one page of bf16 K + V at head dim
    // 128 (32 KiB: ~2 µs per CTA at one wave's share of the bandwidth), scaled to this
    // page's bytes. Take the fewest splits within 2% of the fastest. Compared with filling
    // every slot once: 16 sequences x 8 KV heads on 264 slots take 2 splits (one wave
    // of 256 CTAs), not 3 (384 CTAs, a second wave of 120); at short lengths or when
    // one split already fills the waves, the fixed costs keep n small.
    const double page_bytes =
        static_cast<double>(kPagedKvPageSize) * static_cast<double>(s.head_dim) * (fp8 ? 1.0 : 2.0) * 2.0;
    const double c = 32768.0 / page_bytes;
    auto cost = [&](std::int64_t n) {
      const std::int64_t waves = (base * n + target - 1) / target;
      const std::int64_t per_split = (pages + n - 1) / n;
      return static_cast<double>(waves) * (static_cast<double>(per_split) + c) + (n > 1 ? c : 0.0);
    };
    double best = cost(1);
    for (std::int64_t n = 2; n <= max_splits; ++n) best = std::min(best, cost(n));
    while (cost(splits) > best * 1.02) ++splits;  // the fewest within 2% of the best
  } else {
    splits = std::min<std::int64_t>((target + base - 1) / base, max_splits);  // the rule before 2026-12-01
  }
  p.pages_per_split = (pages + splits - 1) / splits;
  p.splits = static_cast<int>((pages + p.pages_per_split - 1) / p.pages_per_split);
  if (p.tensor_cores && !fp8 && PagedDecodeVariantAt(p.variant).config.tma) {
    if (!tma_ring && p.variant != 0)
      throw Error("paged decode: variant " + std::string(PagedDecodeVariantAt(p.variant).name) +
                  " needs the TMA ring (compute capability 9.0 or newer)");
    // The default takes the cp.async ring for short splits (kPagedDecodeTmaMinPages).
    p.tma = tma_ring && (p.variant != 0 || p.pages_per_split >= kPagedDecodeTmaMinPages);
  }
  if (p.splits > 1)
    p.workspace_bytes = static_cast<std::size_t>(s.batch * s.num_heads) * static_cast<std::size_t>(p.splits) *
                        (static_cast<std::size_t>(s.head_dim) + 1) * sizeof(float);
  return p;
}

}  // namespace servecast::cuda
