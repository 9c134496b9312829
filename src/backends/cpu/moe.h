#pragma once

// Op `moe` -> moe_perf, float32: one MoE layer on expert-parallel rank 0 of
// moe_ep_size ranks, as engines run it, kernel_source "servecast_cpu_moe".
// Routing is synthesized by collect/moe_routing.h (AIC §4.6); rank 0 owns the
// global experts [0, E/ep) and each expert's MLP is the tensor-parallel slice
// inter = inter_size / moe_tp_size. One call:
//   1. router: top-k over the logits [T][E] per token, softmax over the k picked;
//   2. permute: gather the tokens routed to rank 0's experts, grouped by expert;
//   3. per local expert e with n_e tokens: [n_e × hidden]·[hidden × 2·inter]
//      (gate | up, OpenBLAS sgemm), silu(gate)·up, [n_e × inter]·[inter × hidden];
//   4. un-permute: out[t] = Σ_j w_tj · y_tj over the token's picks on this rank
//      (other ranks' experts contribute nothing here).
// Power-law cases (distribution "power_law_<alpha>") use 5 routing samples, as AIC:
// one timed call runs samples 0..4 back to back, and the row's latency, p10 and p90
// are per sample (the call's time / 5). Balanced cases have one routing.
// Check (before timing, every sample): 8 tokens per sample (all when T <= 8; the
// first and the last included) against a double-precision reference that routes by
// the synthesized expert_ids and weights (so a wrong top-k fails too). Tolerance per
// element: 2× a first-order forward error bound propagated through the layer —
// gamma_{hidden+2}·Σ|x·w13| on gate and up, through silu'(gate) and up, plus
// 16u·|silu(gate)·up|; then gamma_{inter+2}·Σ|a·w2| plus Σ|w2|·(error of a); then
// the weighted combine (gamma_{topk+1} + 8u)·Σ|w·y|.

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cpu/op_support.h"
#include "collect/moe_routing.h"
#include "collect/op.h"

namespace servecast::cpu {

// Power-law routing samples per case, as AIC.
inline constexpr int kMoePowerLawSamples = 5;

struct MoeShape {
  std::int64_t num_tokens = 0;
  std::int64_t hidden = 0;
  std::int64_t inter = 0;  // per tensor-parallel rank: inter_size / moe_tp_size
  std::int64_t topk = 0;
  std::int64_t num_experts = 0;
  std::int64_t local_experts = 0;  // num_experts / moe_ep_size: experts [0, local) are this rank's
};

// Scratch the layer reuses between calls (grown on demand, never shrunk, so timed
// calls do not allocate once warm).
struct MoeWorkspace {
  std::vector<std::int32_t> topk_ids;        // [T][topk], the router's picks
  std::vector<float> topk_weights;           // [T][topk]
  std::vector<std::int64_t> expert_offsets;  // [local + 1]: rows of expert e are [off[e], off[e+1])
  std::vector<std::int64_t> fill;            // [local]
  std::vector<std::int64_t> row_token;       // [rows]
  std::vector<float> row_weight;             // [rows]
  std::vector<float> xp, gate_up, act, y;    // [rows][hidden], [rows][2·inter], [rows][inter], [rows][hidden]
};

// The layer: x [T][hidden], logits [T][E], w13 [local][hidden][2·inter] (gate
// columns then up columns), w2 [local][inter][hidden], out [T][hidden].
void MoeForward(const MoeShape& s, const float* x, const float* logits, const float* w13, const float* w2, float* out,
                MoeWorkspace& ws);

// Compares `out` with the double-precision reference on the tokens `tokens`,
// routed by `routing` (its expert_ids and weights).
RefCheck CheckMoe(const MoeShape& s, const float* x, const collect::MoeRouting& routing, const float* w13,
                  const float* w2, const float* out, const std::vector<std::int64_t>& tokens);

std::unique_ptr<collect::Op> MakeMoeOp();

}  // namespace servecast::cpu
