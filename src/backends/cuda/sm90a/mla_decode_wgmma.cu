// The MLA decode over a bf16 paged latent cache on Hopper's warpgroup MMA (wgmma),
// compiled for sm_90a only (src/CMakeLists.txt). Same arguments, split plan, workspace
// and combine as the mma.sync kernel (mla_kernels.cu); the plan picks this one for a
// bf16 cache where it runs (MlaDecodeWgmmaRuns).
//
// One CTA per (head block of HB = 16, 32 or 64 heads, KV split, sequence), two
// warpgroups, one CTA per SM. Tiles are one page (64 tokens × 576), in a ring of two
// by cp.async, stored as 9 column panels of 64 rows × 128 bytes in the 128-byte
// swizzle. The head block's query rows are one panel set of HB rows, loaded once.
// The tokens are the M dimension of both products, so no row of the tensor-core
// tiles is padding, whatever the head count:
//   scores  Sᵀ = C · Qᵀ   (64 tokens × HB heads, 576 deep): warpgroup w takes heads
//                          [w·HB/2, (w+1)·HB/2), A = the tile (K-major), B = Q;
//   softmax over the tokens of each head column: the warp's 16 rows by shuffles, the
//           warpgroup's four warps through shared memory; the running max per column,
//           each thread's share of the running sum (reduced once, at the end); P as
//           bf16 rows of 64 tokens (one K-major panel);
//   values  Oᵀ += Cᵀ · Pᵀ (512 latent columns × HB heads, 64 tokens deep): warpgroup w
//           owns latent columns [256w, 256w + 256), A = the tile's panels read
//           MN-major (the latent columns are contiguous), B = P.
// Tokens past the sequence's end are zero-filled by the copy (never read) and masked.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/mla_kernels.h"
#include "backends/cuda/mma_ptx.cuh"
#include "backends/cuda/sm90a/wgmma.cuh"
#include "core/error.h"

namespace servecast::cuda {
namespace {

using bf16 = __nv_bfloat16;
using wgmma::Desc;
using wgmma::DescMn64;
using wgmma::FenceProxyAsync;
using wgmma::FenceRegs;
using wgmma::WgCommit;
using wgmma::WgFence;
using wgmma::WgWait0;

constexpr int kThreads = 256;
constexpr int kTile = 64;                        // tokens per tile: one page
constexpr int kPanels = kMlaCacheDim / 64;       // 9 column panels of 64 bf16 (128 B)
constexpr int kPanelBytes = kTile * 128;         // 8192
constexpr int kLatentBytes = (kPanels - 1) * kPanelBytes;  // a tile's 8 latent panels
constexpr int kAlign = 1024;
constexpr int kOutLd = kMlaLatent + 4;           // floats per staged output row
constexpr float kInf = __builtin_huge_valf();

static_assert(kTile == kPagedKvPageSize, "a tile is one page");
static_assert(kMlaLatent == 2 * 4 * 64, "two warpgroups x four 64-column blocks of the latent");

// The ring: kLatent slots of a tile's 8 latent panels, then kRope slots of its rotary
// panel. 16 heads (the query takes 18 KiB): three latent slots and one rotary slot,
// so that two tiles' latents are in flight while one computes (the rotary panel of the
// next tile is loaded once both warpgroups' scores are done); 32 and 64 heads: two of
// each (one tile in flight).
template <int HB>
struct WgSmem {
  static constexpr int kLatent = HB == 16 ? 3 : 2;
  static constexpr int kRope = HB == 16 ? 1 : 2;
  static constexpr int kQ = 0;                                  // kPanels x HB rows x 128 B
  static constexpr int kRing = kQ + kPanels * HB * 128;         // multiple of 1024 for HB >= 8
  static constexpr int kRopeRing = kRing + kLatent * kLatentBytes;
  static constexpr int kP = kRopeRing + kRope * kPanelBytes;    // HB rows x 128 B
  static constexpr int kRed = kP + HB * 128;                    // [4 warps][HB] floats
  static constexpr int kAlpha = kRed + 4 * HB * 4;              // [HB]
  static constexpr int kM = kAlpha + HB * 4;
  static constexpr int kL = kM + HB * 4;
  static constexpr int kBytes = kL + HB * 4;
  static constexpr int kSmem = kBytes + kAlign;                 // room to align the base
  static_assert(HB * kOutLd * 4 <= kP - kRing, "the output stages in the ring");
  static_assert(kSmem <= 227 * 1024, "fits one CTA per SM");
};

struct WgArgs {
  const bf16* q;
  const unsigned char* pool;
  const std::int32_t* table;
  bf16* out;
  float* ws_o;
  float* ws_lse;
  int heads, tokens, pages_per_seq, splits, tiles_per_split;
  float score_scale_log2;
};

__device__ __forceinline__ void CopyAsync16(unsigned smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void CopyAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int kPending>
__device__ __forceinline__ void CopyAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}
// The 128 threads of warpgroup wg (ids 1 and 2; 0 is __syncthreads).
__device__ __forceinline__ void WarpgroupSync(int wg) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(wg + 1) : "memory");
}
// Byte offset of 16-byte chunk c of row r in a 128-byte-swizzled panel.
__device__ __forceinline__ int Swz(int r, int c) {
  return r * 128 + ((c ^ (r & 7)) << 4);
}

template <int HB>
__global__ void __launch_bounds__(kThreads, 1) mla_decode_wgmma(const __grid_constant__ WgArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = WgSmem<HB>;
  constexpr int NH = HB / 2;   // heads per warpgroup in the score product
  constexpr int SB = NH / 8;   // its n8 blocks
  constexpr int OB = HB / 8;   // n8 blocks of the value product
  extern __shared__ char smem_raw[];
  char* smem = smem_raw + ((0u - SmemAddr(smem_raw)) & static_cast<unsigned>(kAlign - 1));
  const unsigned q_s = SmemAddr(smem + L::kQ), ring_s = SmemAddr(smem + L::kRing),
                 rope_s = SmemAddr(smem + L::kRopeRing), p_s = SmemAddr(smem + L::kP);
  char* pbuf = smem + L::kP;
  float* red = reinterpret_cast<float*>(smem + L::kRed);
  float* alpha_s = reinterpret_cast<float*>(smem + L::kAlpha);
  float* m_s = reinterpret_cast<float*>(smem + L::kM);
  float* l_s = reinterpret_cast<float*>(smem + L::kL);

  const int h0 = blockIdx.x * HB, split = blockIdx.y, b = blockIdx.z;
  const int tid = static_cast<int>(threadIdx.x), wg = tid >> 7, wi = (tid >> 5) & 3, lane = tid & 31;
  const int g = lane >> 2, c = lane & 3;
  const int tiles_total = (a.tokens + kTile - 1) / kTile;
  const int t_begin = split * a.tiles_per_split;
  const int t_end = min(tiles_total, t_begin + a.tiles_per_split);
  const std::int32_t* table = a.table + static_cast<std::size_t>(b) * a.pages_per_seq;

  // The head block's query rows (zero rows past the last head).
  for (int i = tid; i < HB * (kPanels * 8); i += kThreads) {
    const int r = i / (kPanels * 8), k = i % (kPanels * 8), h = h0 + r;
    const bool valid = h < a.heads;
    const bf16* src = a.q + (static_cast<std::size_t>(b) * a.heads + (valid ? h : 0)) * kMlaCacheDim + k * 8;
    CopyAsync16(q_s + (k >> 3) * (HB * 128) + Swz(r, k & 7), src, valid);
  }
  // Panels [p0, p1) of tile `tile` (latent panels 0..7 to latent slot `ls`, the rotary
  // panel 8 to rotary slot `rs`).
  auto load = [&](int tile, int p0, int p1, int ls, int rs) {
    if (tile >= t_end) return;
    const int tok0 = tile * kTile;
    const unsigned char* src =
        a.pool + static_cast<std::size_t>(table[tile]) * kPagedKvPageSize * kMlaCacheDim * 2;
    const int n = (p1 - p0) * 8;  // 16-byte chunks per row
    for (int i = tid; i < kTile * n; i += kThreads) {
      const int r = i / n, k = p0 * 8 + i % n, p = k >> 3;
      const bool valid = tok0 + r < a.tokens;
      const unsigned dst = p < kPanels - 1 ? ring_s + ls * kLatentBytes + p * kPanelBytes
                                           : rope_s + rs * kPanelBytes;
      CopyAsync16(dst + Swz(r, k & 7), valid ? src + static_cast<std::size_t>(r) * kMlaCacheDim * 2 + k * 16 : src,
                  valid);
    }
  };
  constexpr bool kSplitRope = L::kRope < L::kLatent;
  // Groups in flight, oldest first. Split: (latent t, rope t) then latent t + 1 before
  // tile t; each tile then commits rope t + 1 and latent t + 2 (two groups), so at the
  // top of tile t all but the newest group (latent t + 1) are complete. Not split: one
  // group per tile, tile t + 1 committed at the top of tile t.
  load(t_begin, 0, kPanels, 0, 0);
  CopyAsyncCommit();
  if constexpr (kSplitRope) {
    load(t_begin + 1, 0, kPanels - 1, 1, 0);
    CopyAsyncCommit();
  }

  float oacc[4][HB / 2];  // [64-column block of this warpgroup][HB/2 accumulators]
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int j = 0; j < HB / 2; ++j) oacc[mi][j] = 0.f;
  float m_run[SB][2], l_run[SB][2];
#pragma unroll
  for (int nb = 0; nb < SB; ++nb) m_run[nb][0] = m_run[nb][1] = -kInf, l_run[nb][0] = l_run[nb][1] = 0.f;

  for (int t = t_begin; t < t_end; ++t) {
    const int i = t - t_begin, ls = i % L::kLatent, rs = i % L::kRope;
    if constexpr (kSplitRope)
      CopyAsyncWait<1>();
    else
      CopyAsyncWait<0>();
    FenceProxyAsync();  // this thread's copies, visible to wgmma
    __syncthreads();    // every thread's copies landed; the previous tile's slots are free
    if constexpr (!kSplitRope) {
      load(t + 1, 0, kPanels, (i + 1) % L::kLatent, (i + 1) % L::kRope);
      CopyAsyncCommit();
    }
    const unsigned tile_s = ring_s + ls * kLatentBytes;
    const unsigned trope_s = rope_s + rs * kPanelBytes;

    // Scores of this warpgroup's heads.
    float sacc[NH / 2];
    FenceRegs<NH / 2>(sacc);
    WgFence();
#pragma unroll
    for (int p = 0; p < kPanels; ++p)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        wgmma::Wgmma<NH, wgmma::WgType::kBf16>(sacc,
                                               Desc((p < kPanels - 1 ? tile_s + p * kPanelBytes : trope_s) + j * 32),
                                               Desc(q_s + p * (HB * 128) + wg * (NH * 128) + j * 32),
                                               (p | j) != 0 ? 1 : 0);
    WgCommit();
    WgWait0();
    FenceRegs<NH / 2>(sacc);

    // Softmax over the tile's tokens, per head column.
    const int tok_a = t * kTile + wi * 16 + g, tok_b = tok_a + 8;
    const bool va = tok_a < a.tokens, vb = tok_b < a.tokens;
    float s[SB][2][2];
#pragma unroll
    for (int nb = 0; nb < SB; ++nb)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        s[nb][e][0] = va ? sacc[nb * 4 + e] * a.score_scale_log2 : -kInf;
        s[nb][e][1] = vb ? sacc[nb * 4 + 2 + e] * a.score_scale_log2 : -kInf;
        float mx = fmaxf(s[nb][e][0], s[nb][e][1]);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
        if (g == 0) red[wi * HB + wg * NH + nb * 8 + 2 * c + e] = mx;
      }
    WarpgroupSync(wg);
#pragma unroll
    for (int nb = 0; nb < SB; ++nb)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int hl = wg * NH + nb * 8 + 2 * c + e;
        const float tmax = fmaxf(fmaxf(red[hl], red[HB + hl]), fmaxf(red[2 * HB + hl], red[3 * HB + hl]));
        const float m_new = fmaxf(m_run[nb][e], tmax);  // finite: every tile holds a valid token
        const float alpha = exp2f(m_run[nb][e] - m_new);
        const float p0 = exp2f(s[nb][e][0] - m_new), p1 = exp2f(s[nb][e][1] - m_new);
        l_run[nb][e] = l_run[nb][e] * alpha + p0 + p1;
        m_run[nb][e] = m_new;
        if (wi == 0 && g == 0) alpha_s[hl] = alpha;
        const int ra = wi * 16 + g, rb = ra + 8;
        *reinterpret_cast<bf16*>(pbuf + Swz(hl, ra >> 3) + (ra & 7) * 2) = __float2bfloat16(p0);
        *reinterpret_cast<bf16*>(pbuf + Swz(hl, rb >> 3) + (rb & 7) * 2) = __float2bfloat16(p1);
      }
    FenceProxyAsync();  // P, visible to wgmma
    __syncthreads();    // P and the rescale factors of both warpgroups' heads; both scores done
    if constexpr (kSplitRope) {
      load(t + 1, kPanels - 1, kPanels, 0, (i + 1) % L::kRope);  // the rotary slot is free
      CopyAsyncCommit();
      load(t + 2, 0, kPanels - 1, (i + 2) % L::kLatent, 0);     // tile t - 1's latent slot
      CopyAsyncCommit();
    }

    // Values: Oᵀ = alpha · Oᵀ + Cᵀ · Pᵀ over this warpgroup's 256 latent columns.
#pragma unroll
    for (int nb = 0; nb < OB; ++nb) {
      const float a0 = alpha_s[nb * 8 + 2 * c], a1 = alpha_s[nb * 8 + 2 * c + 1];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        oacc[mi][nb * 4 + 0] *= a0;
        oacc[mi][nb * 4 + 1] *= a1;
        oacc[mi][nb * 4 + 2] *= a0;
        oacc[mi][nb * 4 + 3] *= a1;
      }
    }
#pragma unroll
    for (int mi = 0; mi < 4; ++mi) FenceRegs<HB / 2>(oacc[mi]);
    WgFence();
#pragma unroll
    for (int mi = 0; mi < 4; ++mi)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        wgmma::WgmmaTransA<HB>(oacc[mi], DescMn64(tile_s + (wg * 4 + mi) * kPanelBytes + j * 2048),
                               Desc(p_s + j * 32));
    WgCommit();
    WgWait0();
#pragma unroll
    for (int mi = 0; mi < 4; ++mi) FenceRegs<HB / 2>(oacc[mi]);
  }
  CopyAsyncWait<0>();

  // Each head's sum: the threads' shares over the warp, then the warpgroup.
#pragma unroll
  for (int nb = 0; nb < SB; ++nb)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float sum = l_run[nb][e];
      sum += __shfl_xor_sync(0xffffffffu, sum, 4);
      sum += __shfl_xor_sync(0xffffffffu, sum, 8);
      sum += __shfl_xor_sync(0xffffffffu, sum, 16);
      if (g == 0) red[wi * HB + wg * NH + nb * 8 + 2 * c + e] = sum;
    }
  WarpgroupSync(wg);
  if (wi == 0 && g == 0) {
#pragma unroll
    for (int nb = 0; nb < SB; ++nb)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int hl = wg * NH + nb * 8 + 2 * c + e;
        l_s[hl] = red[hl] + red[HB + hl] + red[2 * HB + hl] + red[3 * HB + hl];
        m_s[hl] = m_run[nb][e];
      }
  }
  __syncthreads();  // the sums; every tile's products are done, the ring is free

  // Stage O / l as [head][latent] floats, then store rows coalesced.
  float* os = reinterpret_cast<float*>(smem + L::kRing);
#pragma unroll
  for (int nb = 0; nb < OB; ++nb)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int hl = nb * 8 + 2 * c + e;
      const float l = l_s[hl];
      const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        const int d = wg * 256 + mi * 64 + wi * 16 + g;
        os[hl * kOutLd + d] = oacc[mi][nb * 4 + e] * inv;
        os[hl * kOutLd + d + 8] = oacc[mi][nb * 4 + 2 + e] * inv;
      }
    }
  __syncthreads();
  for (int i = tid; i < HB * (kMlaLatent / 4); i += kThreads) {
    const int hl = i / (kMlaLatent / 4), col = (i % (kMlaLatent / 4)) * 4, h = h0 + hl;
    if (h >= a.heads) continue;
    const float4 v = *reinterpret_cast<const float4*>(os + hl * kOutLd + col);
    if (a.splits == 1) {
      __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
      uint2 packed{*reinterpret_cast<unsigned*>(&lo), *reinterpret_cast<unsigned*>(&hi)};
      *reinterpret_cast<uint2*>(a.out + (static_cast<std::size_t>(b) * a.heads + h) * kMlaLatent + col) = packed;
    } else {
      const std::size_t slot = (static_cast<std::size_t>(b) * a.splits + split) * a.heads + h;
      *reinterpret_cast<float4*>(a.ws_o + slot * kMlaLatent + col) = v;
      if (col == 0) a.ws_lse[slot] = l_s[hl] > 0.f ? m_s[hl] + log2f(l_s[hl]) : -kInf;
    }
  }
#else
  __trap();  // built for sm_90a only: never launched elsewhere (MlaDecodeWgmmaRuns)
#endif
}

template <int HB>
int Prepare() {
  SC_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(&mla_decode_wgmma<HB>),
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, WgSmem<HB>::kSmem));
  return WgSmem<HB>::kSmem;
}

template <int HB>
void Launch(const MlaDecodePlan& plan, WgArgs a, std::int64_t batch, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(plan.head_blocks), static_cast<unsigned>(plan.splits),
                  static_cast<unsigned>(batch));
  void* args[] = {&a};
  SC_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(&mla_decode_wgmma<HB>), grid, dim3(kThreads), args,
                                 static_cast<std::size_t>(WgSmem<HB>::kSmem), stream));
}

[[noreturn]] void BadHeadTile(int head_tile) {
  throw Error("mla decode wgmma: head tile " + std::to_string(head_tile) + " (have 16, 32, 64)");
}

}  // namespace

bool MlaDecodeWgmmaBuilt() {
  return true;
}

int PrepareMlaDecodeWgmma(int head_tile) {
  switch (head_tile) {
    case 16:
      return Prepare<16>();
    case 32:
      return Prepare<32>();
    case 64:
      return Prepare<64>();
    default:
      BadHeadTile(head_tile);
  }
}

void LaunchMlaDecodeWgmmaPart(const MlaDecodeShape& s, const MlaDecodePlan& plan, const void* q, const void* pool,
                              const std::int32_t* page_table, float softmax_scale, void* out, float* ws_o,
                              float* ws_lse, std::int64_t batch, cudaStream_t stream) {
  WgArgs a{};
  a.q = static_cast<const bf16*>(q);
  a.pool = static_cast<const unsigned char*>(pool);
  a.table = page_table;
  a.out = static_cast<bf16*>(out);
  a.ws_o = ws_o;
  a.ws_lse = ws_lse;
  a.heads = static_cast<int>(s.num_heads);
  a.tokens = static_cast<int>(s.tokens);
  a.pages_per_seq = static_cast<int>(s.pages_per_seq());
  a.splits = plan.splits;
  a.tiles_per_split = static_cast<int>(plan.tiles_per_split);
  a.score_scale_log2 = softmax_scale * 1.4426950408889634f;
  switch (plan.head_tile) {
    case 16:
      return Launch<16>(plan, a, batch, stream);
    case 32:
      return Launch<32>(plan, a, batch, stream);
    case 64:
      return Launch<64>(plan, a, batch, stream);
    default:
      BadHeadTile(plan.head_tile);
  }
}

}  // namespace servecast::cuda
