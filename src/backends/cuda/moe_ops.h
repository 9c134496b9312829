#pragma once

// The CUDA backend's `moe` op (table moe_perf): one call is the whole MoE layer of
// expert-parallel rank 0 as an engine runs it, for moe_dtype bfloat16, fp8 (per-tensor
// dynamic activation scales, per-expert weight scales) and fp8_block (1x128 activation
// groups, 128x128 weight blocks):
//   router top-k + softmax over bf16 logits -> count picks per local expert -> padded
//   offsets -> scatter token rows into an expert-sorted buffer -> per local expert
//   gate+up GEMM -> SiLU(gate)·up (fused with the 1x128 quantization for fp8_block)
//   -> per local expert down GEMM -> weighted combine into [tokens x hidden] bf16.
// Everything stays on the device without a host synchronization (graph-captured).
//
// The expert GEMMs (gate+up, then down) run one of two ways, chosen per case by
// autotuning (the fastest on this case's routings and weights, as TensorRT-LLM picks
// a MoE tactic):
//  - servecast's grouped GEMM (moe_grouped_gemm.h): every local expert in one launch,
//    tiles of 128 output columns x bt token rows (bt 8 .. 128), on mma.sync
//    warpgroup MMA on Hopper in builds for sm_90 ("servecast_moe:grouped_wgmma_bt<bt>"),
//    mma.sync elsewhere ("servecast_moe:grouped_mma_bt<bt>");
//  - one cuBLASLt matmul per non-empty local expert (heuristic top choice that runs);
//    kernel_source "servecast_moe:cublaslt_per_expert". It pays a launch per expert,
//    and wins when each expert has many rows.
// The per-expert token counts are fixed when the case is prepared: the routing is
// synthesized on the host (collect/moe_routing.h), so the tile list and the matmul
// shapes are known, and the device permutation must reproduce those counts (checked).
//
// Power-law cases time 5 independent routings (AIC's 5 samples) in one rotation:
// call i runs sample i % 5, a replay holds a multiple of 5 calls, and the row's
// latency is the mean per sample (replay time / calls). Balanced cases: 1 sample.

#include <memory>
#include <string>

#include "collect/op.h"
#include "collect/registry.h"

namespace servecast::cuda {

// Registers the moe op on the "cuda" backend.
void RegisterMoeOps(collect::Registry& r);

namespace moe {

struct MoeRunOptions {
  bool time = true;  // false: prepare, check, and stop (no row)
  // -1: autotune the expert GEMMs; 0: cuBLASLt per expert; 8, 16, 32, 64, 128: the
  // grouped kernel with that many rows per tile (tests pin each path).
  int force_bt = -1;
  bool force_wgmma = false;  // with force_bt > 0: the wgmma kernel instead of mma.sync
  // Testing the check itself: the final output's reference values are multiplied by
  // (1 + perturb_reference); a value like 0.1 must make the case incorrect.
  double perturb_reference = 0;
};

struct MoeRunReport {
  collect::CaseResult result;
  std::string kernel_source;
  std::string check_summary;  // one line per checked stage of the last checked sample
  double worst_ratio = 0;     // worst |error| / tolerance of the output stage over all samples
  int samples = 1;            // routings timed per rotation
  int weight_copies = 1;      // copies of the touched experts' weights rotated while timing
};

// Runs one moe case (moe_perf key columns in c.params) on the current device.
MoeRunReport RunMoeCase(const collect::Case& c, const collect::RunContext& ctx, const MoeRunOptions& opt);

std::unique_ptr<collect::Op> MakeMoeOp();

inline constexpr const char* kMoeCublasLtSource = "servecast_moe:cublaslt_per_expert";
inline constexpr const char* kMoeGroupedSourcePrefix = "servecast_moe:grouped_mma_bt";  // + rows per tile
inline constexpr const char* kMoeWgmmaSourcePrefix = "servecast_moe:grouped_wgmma_bt";   // + rows per tile

}  // namespace moe
}  // namespace servecast::cuda
