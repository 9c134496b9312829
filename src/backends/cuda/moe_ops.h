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
// The expert GEMMs are one cuBLASLt matmul per non-empty local expert, with the
// per-expert token counts fixed when the case is prepared: the routing is
// synthesized on the host (collect/moe_routing.h), so the counts are known and the
// device permutation must reproduce them (checked). Engines run a fused grouped GEMM
// (CUTLASS grouped GEMM / DeepGEMM) instead, which is the known way to go faster:
// cases with few tokens per expert pay one GEMM launch per expert here. The
// kernel_source column says so: "servecast_moe:cublaslt_per_expert".
//
// Power-law cases time 5 independent routings (AIC's 5 samples) in one rotation:
// call i runs sample i % 5, a replay holds a multiple of 5 calls, and the row's
// latency is the mean per sample (replay time / calls). Balanced cases: 1 sample.
//
// Status: unverified (skipped unless --include-unverified). Written without a GPU;
// it has not run yet. docs/kernels.md will say what it was checked against once it has.

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

inline constexpr const char* kMoeKernelSource = "servecast_moe:cublaslt_per_expert";

}  // namespace moe
}  // namespace servecast::cuda
