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
//  - w4_mxfp4 / w4_int4 (weight-only, bf16 activations): D = A · dequant(W)^T with the
//               4-bit weights dequantized to bf16 in registers inside the main loop, the
//               way engines run gpt-oss (mxfp4) and Kimi-K2.5 (int4) experts on Hopper.
//               Weights come in the kernel's own tiled layout (MoeW4 below), which an
//               engine's load-time repack produces from the checkpoint's row-major one.

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace servecast::cuda {

enum class MoeGemmType { kBf16, kFp8, kFp8Block, kW4Mxfp4, kW4Int4 };

inline bool IsW4(MoeGemmType t) {
  return t == MoeGemmType::kW4Mxfp4 || t == MoeGemmType::kW4Int4;
}

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

// The weight-only 4-bit layouts, for one expert matrix W [n x k] (n a multiple of 16;
// k padded with zero weights to kp = ceil(k / 64) · 64, as engines pad mxfp4 expert
// widths such as gpt-oss's 2880 / 4 = 720).
//
// Checkpoint ("plain") layout, what a quantizer writes and the check reads: row r is
// kp / 2 bytes of 4-bit codes (element 2j in the low nibble of byte j) followed by its
// kp / 32 group scales (one per 32 consecutive k):
//  - mxfp4: e2m1 codes (sign, 2 exponent bits, 1 mantissa bit; values 0, ±0.5 .. ±6),
//    e8m0 scales (one byte, 2^(e - 127)); the kernel takes e <= 128 (scales up to 2):
//    it folds 2^(e - 1) into one bf16 multiply;
//  - int4: codes u = q + 8 for q in [-8, 7], bf16 scales (two bytes); w = q · scale.
// The kernel's ("tiled") layout, the same bytes rearranged so that one 16-byte load
// gives a lane its mma.sync A fragments for 64 k: the weights as chunks (rb, kb) for
// the 16-row block rb and the 64-wide k block kb, at (rb · kp / 64 + kb) · 512 bytes;
// in a chunk, lane l (g = l / 4, t = l % 4) holds 4 words, word i for k16 step i, and
// nibble j + 4h of that word is row g + 8 (j % 2), k = 16 i + 2 t + 8 (j / 2) + h.
// The scales follow the weights (at n · kp / 2 bytes) as chunks (rb, kb) of 16 rows x 2
// groups (32 or 64 bytes), row-major.
struct MoeW4Layout {
  std::int64_t n = 0, k = 0, kp = 0;
  int scale_bytes = 1;  // 1 (e8m0) or 2 (bf16)
  std::int64_t RowBytes() const { return kp / 2 + kp / 32 * scale_bytes; }  // plain layout
  std::int64_t Bytes() const { return n * RowBytes(); }                        // either layout
};
MoeW4Layout MoeW4LayoutOf(MoeGemmType type, std::int64_t n, std::int64_t k);

// Quantizes the bf16 matrix src [n x k] (row-major) into the plain layout at dst
// (layout.Bytes() bytes): mxfp4 by the OCP MX rule (shared exponent floor(log2 amax) - 2,
// codes rounded to nearest even, saturated at ±6), int4 symmetric (scale amax / 7 in
// bf16, codes round(w / scale) clamped to [-8, 7]). Padded k columns are zero.
void LaunchMoeW4Quantize(MoeGemmType type, const void* src, const MoeW4Layout& layout, void* dst,
                         cudaStream_t stream);

// Rearranges one expert matrix from the plain layout (src) into the tiled one (dst).
void LaunchMoeW4Tile(const void* src, const MoeW4Layout& layout, void* dst, cudaStream_t stream);

struct MoeGroupedGemmArgs {
  MoeGemmType type = MoeGemmType::kBf16;
  const void* a = nullptr;  // permuted input, [.. x k]
  const void* w = nullptr;  // weight base (tiles' w_offset are relative to it; w4 types: tiled layout)
  void* d = nullptr;        // bf16 output, [.. x n]
  std::int64_t n = 0, k = 0;
  const MoeGemmTile* tiles = nullptr;  // device array
  int num_tiles = 0;
  const float* a_scale = nullptr;  // fp8: one float; fp8_block: the segment-layout group scales
  const float* w_scale = nullptr;  // fp8: per-expert scales; fp8_block: 128x128 block scales
  std::int64_t w_scale_ld = 0;     // fp8_block: scales per 128-row weight block
};

// Whether the kernel takes this shape: rows of k elements a multiple of 16 bytes,
// n a multiple of 8, and for fp8_block k and n multiples of 128; w4 types: n a multiple
// of 16, k of 8 (the activations' rows).
bool MoeGroupedGemmSupported(MoeGemmType type, std::int64_t n, std::int64_t k);

// The token-rows-per-tile variants of the mma.sync kernel: 8, 16, 32, 64, 128 (the fp8
// types, which keep a second set of accumulators, up to 64).
bool MoeGroupedGemmValidBt(MoeGemmType type, int bt);

// Enqueues the grouped GEMM with `bt` rows per tile (tiles built for that bt). Throws
// Error on an unsupported shape or bt, CudaError when the launch fails.
void LaunchMoeGroupedGemm(const MoeGroupedGemmArgs& args, int bt, cudaStream_t stream);

// The same GEMM on Hopper's warpgroup MMA (sm90a/moe_grouped_wgmma.cu): same tiles,
// arguments and results (the 4-bit types with the weights as wgmma's register operand). It is compiled for sm_90a only, in builds whose CUDA
// architectures include 90 (MoeGroupedWgmmaBuilt), and runs only on a compute
// capability 9.0 device (MoeGroupedWgmmaRuns: built, and the current device is one);
// elsewhere the launcher throws Error.
bool MoeGroupedWgmmaBuilt();
bool MoeGroupedWgmmaRuns();
// Its rows-per-tile variants: 8, 16, 32, 64, 128 for every type.
bool MoeGroupedWgmmaValidBt(int bt);
void LaunchMoeGroupedGemmWgmma(const MoeGroupedGemmArgs& args, int bt, cudaStream_t stream);

}  // namespace servecast::cuda
