#pragma once

// servecast's grouped expert GEMM for the moe op: every local expert's matmul
// D_e = A_e · W_e^T in one launch, the way engines run MoE (one grouped kernel, not a
// launch per expert). A_e: the expert's rows of the permuted input ([rows x k], bf16
// or e4m3, row stride k elements); W_e: its weight [n x k] (k contiguous); D_e: bf16
// [rows x n]. The work is a list of tiles (expert, 128 output columns, up to `bt`
// rows), built on the host from the routing's per-expert counts, so the launch needs
// no device-side scheduling and is graph-capturable.
//
// Tensor cores through mma.sync (bf16 m16n8k16, e4m3 m16n8k32; fp32 accumulation).
// The weight rows are the MMA's M side and the tokens its N side, so a tile of a few
// tokens wastes little work: decode-sized MoE is a stream over the touched experts'
// weights, which a 4-stage cp.async pipeline keeps in flight.
//
// Types:
//  - bf16:      D = A · W^T.
//  - fp8:       D = (A · W^T) · a_scale[0] · w_scale[tile.w_scale] (per-tensor scales),
//               each 128-wide k block's partial sums promoted to fp32.
//  - fp8_block: for each 128-wide k block kb, D += (A_kb · W_kb^T) · a_scale(row, kb) ·
//               w_scale[tile.w_scale + (n / 128) · w_scale_ld + kb] (1x128 activation
//               groups in the moe op's segment layout, a_scale(row, kb) =
//               a_scale[k/128 · seg_off + kb · seg_rows + (row - seg_off)]; 128x128
//               weight blocks), partial sums promoted to fp32 per block.

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace servecast::cuda {

enum class MoeGemmType { kBf16, kFp8, kFp8Block };

// One CTA's work: rows [row0, row0 + rows) of the permuted buffers against output
// columns [n0, n0 + 128) of one expert.
struct MoeGemmTile {
  std::int64_t w_offset = 0;  // bytes from the weight base to the expert's [n x k] matrix
  std::int32_t row0 = 0;      // first row in the permuted input and in D
  std::int32_t rows = 0;      // rows of this tile (1 .. bt)
  std::int32_t n0 = 0;        // first output column (a multiple of 128)
  std::int32_t seg_off = 0;   // fp8_block: first row of the expert's segment
  std::int32_t seg_rows = 0;  // fp8_block: rows of the segment (padded)
  std::int32_t w_scale = 0;   // fp8 / fp8_block: index of the expert's first weight scale
};
static_assert(sizeof(MoeGemmTile) == 32, "MoeGemmTile is copied to the device as is");

inline constexpr int kMoeGemmTileN = 128;  // output columns per tile

// One expert's rows of a grouped GEMM.
struct MoeGemmSegment {
  std::int64_t row0 = 0;      // first row in the permuted buffers
  std::int64_t rows = 0;      // rows (the padded segment; 0: the expert is skipped)
  std::int64_t w_offset = 0;  // bytes from the weight base to the expert's [n x k] matrix
  std::int64_t w_scale = 0;   // index of the expert's first weight scale (fp8 types)
};

// The tiles of a grouped GEMM with `n` output columns and `bt` rows per tile, expert
// by expert; within an expert, columns outer and rows inner, so the CTAs that share a
// weight tile run side by side. Throws Error when a value does not fit the tile's
// 32-bit fields.
std::vector<MoeGemmTile> MoeGemmTiles(const std::vector<MoeGemmSegment>& segments, std::int64_t n, int bt);

struct MoeGroupedGemmArgs {
  MoeGemmType type = MoeGemmType::kBf16;
  const void* a = nullptr;  // permuted input, [.. x k]
  const void* w = nullptr;  // weight base (tiles' w_offset are relative to it)
  void* d = nullptr;        // bf16 output, [.. x n]
  std::int64_t n = 0, k = 0;
  const MoeGemmTile* tiles = nullptr;  // device array
  int num_tiles = 0;
  const float* a_scale = nullptr;  // fp8: one float; fp8_block: the segment-layout group scales
  const float* w_scale = nullptr;  // fp8: per-expert scales; fp8_block: 128x128 block scales
  std::int64_t w_scale_ld = 0;     // fp8_block: scales per 128-row weight block
};

// Whether the kernel takes this shape: rows of k elements a multiple of 16 bytes,
// n a multiple of 8, and for fp8_block k and n multiples of 128.
bool MoeGroupedGemmSupported(MoeGemmType type, std::int64_t n, std::int64_t k);

// The token-rows-per-tile variants of the mma.sync kernel: 8, 16, 32, 64, 128 (the fp8
// types, which keep a second set of accumulators, up to 64).
bool MoeGroupedGemmValidBt(MoeGemmType type, int bt);

// Enqueues the grouped GEMM with `bt` rows per tile (tiles built for that bt). Throws
// Error on an unsupported shape or bt, CudaError when the launch fails.
void LaunchMoeGroupedGemm(const MoeGroupedGemmArgs& args, int bt, cudaStream_t stream);

// The same GEMM on Hopper's warpgroup MMA (sm90a/moe_grouped_wgmma.cu): same tiles,
// arguments and results. It is compiled for sm_90a only, in builds whose CUDA
// architectures include 90 (MoeGroupedWgmmaBuilt), and runs only on a compute
// capability 9.0 device (MoeGroupedWgmmaRuns: built, and the current device is one);
// elsewhere the launcher throws Error.
bool MoeGroupedWgmmaBuilt();
bool MoeGroupedWgmmaRuns();
// Its rows-per-tile variants: 8, 16, 32, 64, 128 for every type.
bool MoeGroupedWgmmaValidBt(int bt);
void LaunchMoeGroupedGemmWgmma(const MoeGroupedGemmArgs& args, int bt, cudaStream_t stream);

}  // namespace servecast::cuda
