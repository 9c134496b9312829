// The MLA decode over a bf16 paged latent cache on Hopper's warpgroup MMA (wgmma),
// compiled for sm_90a only (src/CMakeLists.txt). Same arguments, split plan, workspace
// and combine as the mma.sync kernel (mla_kernels.cu); the plan picks this one for a
// bf16 cache where it runs (MlaDecodeWgmmaRuns).
//
// One CTA per (head block of HB = 16, 32 or 64 heads, KV split, sequence), two
// warpgroups, one CTA per SM. Tiles are one page (64 tokens × 576), brought by the
// tensor memory accelerator (TMA: a 2-D map over the pool, one 64 × 64 box per column
// panel, an mbarrier per ring slot) and stored as 9 column panels of 64 rows × 128
// bytes in the 128-byte swizzle. The head block's query rows are one panel set of HB
// rows, loaded once by cp.async.
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
// Tokens past the sequence's end are masked in the scores; the box of a partial last
// page brings the slots past the end too (whatever the pool holds there, NaN in the
// tests), so their latent rows are zeroed in shared memory before the value product.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/mla_kernels.h"
#include "backends/cuda/mma_ptx.cuh"
#include "backends/cuda/sm90a/wgmma.cuh"
#include "backends/cuda/tma.cuh"
#include "backends/cuda/tma.h"
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
// panel, each slot with its mbarrier. 16 heads (the query takes 18 KiB): three latent
// slots and one rotary slot, so that two tiles' latents are in flight while one
// computes (the rotary panel of the next tile is loaded once both warpgroups' scores
// are done), and P and the rescale factors double-buffered, so that one warpgroup
// may start the next tile's scores while the other finishes this tile's values (no
// barrier at the top of a tile); 32 and 64 heads: two slots of each (one tile in
// flight), issued at the top of a tile once both warpgroups are done with the slot.
template <int HB>
struct WgSmem {
  static constexpr int kLatent = HB == 16 ? 3 : 2;
  static constexpr int kRope = HB == 16 ? 1 : 2;
  static constexpr bool kSplitRope = kRope < kLatent;
  static constexpr int kPBufs = kSplitRope ? 2 : 1;             // P and alpha buffers
  static constexpr int kQ = 0;                                  // kPanels x HB rows x 128 B
  static constexpr int kRing = kQ + kPanels * HB * 128;         // multiple of 1024 for HB >= 8
  static constexpr int kRopeRing = kRing + kLatent * kLatentBytes;
  static constexpr int kP = kRopeRing + kRope * kPanelBytes;    // kPBufs x HB rows x 128 B
  static constexpr int kRed = kP + kPBufs * HB * 128;           // [4 warps][HB] floats
  static constexpr int kAlpha = kRed + 4 * HB * 4;              // [kPBufs][HB]
  static constexpr int kM = kAlpha + kPBufs * HB * 4;
  static constexpr int kL = kM + HB * 4;
  static constexpr int kBar = kL + HB * 4;                      // latent slots', then rotary slots' mbarriers
  static constexpr int kBytes = kBar + (kLatent + kRope) * 8;
  static constexpr int kSmem = kBytes + kAlign;                 // room to align the base
  static_assert(HB * kOutLd * 4 <= kP - kRing, "the output stages in the ring");
  static_assert(kBar % 8 == 0, "mbarriers are 8-byte aligned");
  static_assert(kSmem <= 227 * 1024, "fits one CTA per SM");
};

struct WgArgs {
  CUtensorMap pool_map;  // [pool rows][576] bf16, box 64 rows x 64 columns (MlaPoolMap)
  const bf16* q;
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
  float* red = reinterpret_cast<float*>(smem + L::kRed);
  float* alpha_base = reinterpret_cast<float*>(smem + L::kAlpha);
  float* m_s = reinterpret_cast<float*>(smem + L::kM);
  float* l_s = reinterpret_cast<float*>(smem + L::kL);

  const int h0 = blockIdx.x * HB, split = blockIdx.y, b = blockIdx.z;
  const int tid = static_cast<int>(threadIdx.x), wg = tid >> 7, wi = (tid >> 5) & 3, lane = tid & 31;
  const int g = lane >> 2, c = lane & 3;
  const int tiles_total = (a.tokens + kTile - 1) / kTile;
  const int t_begin = split * a.tiles_per_split;
  const int t_end = min(tiles_total, t_begin + a.tiles_per_split);
  const std::int32_t* table = a.table + static_cast<std::size_t>(b) * a.pages_per_seq;
  unsigned long long* bar_latent = reinterpret_cast<unsigned long long*>(smem + L::kBar);
  unsigned long long* bar_rope = bar_latent + L::kLatent;

  // The head block's query rows (zero rows past the last head).
  for (int i = tid; i < HB * (kPanels * 8); i += kThreads) {
    const int r = i / (kPanels * 8), k = i % (kPanels * 8), h = h0 + r;
    const bool valid = h < a.heads;
    const bf16* src = a.q + (static_cast<std::size_t>(b) * a.heads + (valid ? h : 0)) * kMlaCacheDim + k * 8;
    CopyAsync16(q_s + (k >> 3) * (HB * 128) + Swz(r, k & 7), src, valid);
  }
  CopyAsyncCommit();
  // Thread 0 issues every tile copy: the 8 latent panels of tile `tile` (pool page
  // `page`) to latent slot `ls`, its rotary panel to rotary slot `rs` (one box of 64
  // pool rows x 64 columns each, from the page's first row). It reads the page table
  // a tile ahead of the copies (into registers), so that the issue does not wait on it.
  auto page_of = [&](int tile) { return tile < t_end ? table[tile] : 0; };
  auto load_latent = [&](int tile, int page, int ls) {
    if (tile >= t_end) return;
    MbarArriveExpectTx(&bar_latent[ls], kLatentBytes);
#pragma unroll
    for (int p = 0; p < kPanels - 1; ++p)
      TmaLoad2d(smem + L::kRing + ls * kLatentBytes + p * kPanelBytes, &a.pool_map, p * 64, page * kTile,
                &bar_latent[ls]);
  };
  auto load_rope = [&](int tile, int page, int rs) {
    if (tile >= t_end) return;
    MbarArriveExpectTx(&bar_rope[rs], kPanelBytes);
    TmaLoad2d(smem + L::kRopeRing + rs * kPanelBytes, &a.pool_map, kMlaLatent, page * kTile, &bar_rope[rs]);
  };
  int page1 = 0, page2 = 0;  // thread 0: the pages of tiles t + 1 and t + 2
  constexpr bool kSplitRope = L::kSplitRope;
  // In flight before tile t: split, latent t and t + 1 and rope t (each tile then
  // issues rope t + 1 and latent t + 2 once its scores are done); not split, tile t
  // (each tile issues tile t + 1 at its top).
  if (tid == 0) {
    for (int k = 0; k < L::kLatent + L::kRope; ++k) MbarInit(&bar_latent[k], 1);
    FenceMbarrierInit();
    const int page0 = page_of(t_begin);
    page1 = page_of(t_begin + 1);
    load_latent(t_begin, page0, 0);
    load_rope(t_begin, page0, 0);
    if constexpr (kSplitRope) load_latent(t_begin + 1, page1, 1);
    page2 = page_of(t_begin + 2);
  }
  CopyAsyncWait<0>();
  FenceProxyAsync();  // the query, visible to wgmma
  __syncthreads();    // the query and the barriers' initialization

  float oacc[4][HB / 2];  // [64-column block of this warpgroup][HB/2 accumulators]
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int j = 0; j < HB / 2; ++j) oacc[mi][j] = 0.f;
  float m_run[SB][2], l_run[SB][2];
#pragma unroll
  for (int nb = 0; nb < SB; ++nb) m_run[nb][0] = m_run[nb][1] = -kInf, l_run[nb][0] = l_run[nb][1] = 0.f;

  for (int t = t_begin; t < t_end; ++t) {
    const int i = t - t_begin, ls = i % L::kLatent, rs = i % L::kRope, pb = i % L::kPBufs;
    if constexpr (!kSplitRope) {
      __syncthreads();  // both warpgroups are done with tile t - 1: its slots are free
      if (tid == 0) {
        load_latent(t + 1, page1, (i + 1) % L::kLatent);
        load_rope(t + 1, page1, (i + 1) % L::kRope);
        page1 = page2;
        page2 = page_of(t + 3);
      }
    }
    MbarWait(&bar_latent[ls], static_cast<unsigned>(i / L::kLatent) & 1u);
    MbarWait(&bar_rope[rs], static_cast<unsigned>(i / L::kRope) & 1u);
    const unsigned tile_s = ring_s + ls * kLatentBytes;
    const unsigned trope_s = rope_s + rs * kPanelBytes;
    const unsigned pt_s = p_s + pb * (HB * 128);
    char* pbuf = smem + L::kP + pb * (HB * 128);
    float* alpha_s = alpha_base + pb * HB;
    const int valid = min(kTile, a.tokens - t * kTile);
    if (valid < kTile) {
      // The sequence's partial last page (the split's last tile, so a uniform branch):
      // zero the latent rows past its end, which the value product multiplies by P = 0.
      char* lat = smem + L::kRing + ls * kLatentBytes;
      for (int k = tid; k < (kTile - valid) * (kPanels - 1) * 8; k += kThreads) {
        const int r = valid + k / ((kPanels - 1) * 8), q = k % ((kPanels - 1) * 8);
        *reinterpret_cast<uint4*>(lat + (q >> 3) * kPanelBytes + Swz(r, q & 7)) = make_uint4(0, 0, 0, 0);
      }
      FenceProxyAsync();  // the zeros, visible to wgmma
      __syncthreads();
    }

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
      if (tid == 0) {
        load_rope(t + 1, page1, (i + 1) % L::kRope);      // both scores of tile t are done
        load_latent(t + 2, page2, (i + 2) % L::kLatent);  // tile t - 1's slot: both its value products are done
        page1 = page2;
        page2 = page_of(t + 3);
      }
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
                               Desc(pt_s + j * 32));
    WgCommit();
    WgWait0();
#pragma unroll
    for (int mi = 0; mi < 4; ++mi) FenceRegs<HB / 2>(oacc[mi]);
  }

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

// The pool as the TMA's 2-D tensor [rows][576] bf16 (one row per pool page and token
// slot: batch · pages_per_seq pages, as the op and the benchmark allocate it); a box
// is one column panel (64 values, 128 bytes) of one page's 64 rows.
CUtensorMap MlaPoolMap(const void* pool, const MlaDecodeShape& s) {
  const cuuint64_t rows = static_cast<cuuint64_t>(s.batch * s.pages_per_seq() * kTile);
  if (rows > static_cast<cuuint64_t>(INT32_MAX))  // the kernel's box coordinates are signed 32-bit
    throw Error("mla decode: a pool of " + std::to_string(rows) +
                " token slots is beyond the TMA ring's 32-bit row coordinates");
  const cuuint64_t dims[2] = {kMlaCacheDim, rows};
  const cuuint64_t strides[1] = {kMlaCacheDim * 2};
  const cuuint32_t box[2] = {64, kTile};
  return TensorMapBf16Swizzle128("mla decode", pool, 2, dims, strides, box, 256);
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
  a.pool_map = MlaPoolMap(pool, s);
  a.q = static_cast<const bf16*>(q);
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
