#pragma once

// Synthetic MoE routing for the moe op (AIC §4.6), shared by every backend: which
// experts each token picks, reproducibly from a seed, for the distributions
// "balanced", "power_law_1.01" and "power_law_1.2".
//
// The measured rank is expert-parallel rank 0 of moe_ep_size ranks; it owns the
// global experts [0, num_experts / moe_ep_size). Under a power law the most loaded
// EP rank's experts are swapped into rank 0's range, so rank 0 is the slowest
// rank, as AIC measures it.

#include <cstdint>
#include <string>
#include <vector>

namespace servecast::collect {

struct MoeRoutingShape {
  std::int64_t num_tokens = 0;
  std::int64_t num_experts = 0;
  std::int64_t topk = 0;
  std::int64_t moe_ep_size = 1;
  std::string distribution;  // "balanced", "power_law_1.01", "power_law_1.2"
};

struct MoeRouting {
  std::int64_t num_tokens = 0, num_experts = 0, topk = 0;
  // Token t picks experts expert_ids[t * topk + j] (distinct within a token, global
  // ids), with router weights weights[t * topk + j] (softmax over its top-k logits;
  // they sum to 1 per token).
  std::vector<std::int32_t> expert_ids;
  std::vector<float> weights;
  // Router logits [num_tokens][num_experts], bf16-representable, whose top-k per
  // token is exactly expert_ids (a margin separates picked from unpicked), for
  // backends that time the router's top-k kernel.
  std::vector<float> logits;
  std::vector<std::int64_t> tokens_per_expert;  // [num_experts]
  std::int64_t local_experts = 0;               // experts [0, local_experts) are rank 0's
  std::int64_t local_assignments = 0;           // (token, expert) pairs routed to rank 0
};

// Builds the routing; sample s (0, 1, ...) draws an independent power-law sample
// from the same seed (AIC times 5 samples per power-law case). Throws Error on an
// invalid shape (topk > experts, experts % ep != 0, unknown distribution).
MoeRouting SynthesizeMoeRouting(const MoeRoutingShape& shape, std::uint64_t seed, int sample = 0);

}  // namespace servecast::collect
