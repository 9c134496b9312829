#pragma once

// Per-GPU memory of one worker and its KV-cache capacity (AIC §3.5;
// docs/estimator.md, "Memory model").

#include <cstdint>
#include <vector>

#include "model/model_config.h"
#include "model/ops.h"
#include "serve/engine_profile.h"
#include "system/system_spec.h"

namespace servecast::serve {

struct MemoryInputs {
  std::int64_t batch = 1;       // concurrent requests per worker (per attention-DP rank)
  std::int64_t tokens = 0;      // tokens in one forward pass (sizing activations)
  std::int64_t seq_len = 0;     // KV length reserved per request (isl + osl)
  int nextn = 0;
};

struct MemoryBreakdown {
  double weights = 0;      // bytes per GPU
  double activations = 0;
  double kv_cache = 0;     // batch x (seq_len x kv_bytes_per_token + state_bytes_per_sequence)
  double nccl = 0;
  double other = 0;
  double total = 0;
  double capacity = 0;
  bool oom = false;             // total >= capacity
  double kv_bytes_per_token = 0;  // per GPU, all layers (with a family's side cache: DSA's indexer keys)
  // Recurrent state per sequence (Gated DeltaNet, Mamba2), per GPU, constant in
  // the sequence's length; counted in kv_cache and against the KV budget.
  double state_bytes_per_sequence = 0;
  double kv_budget = 0;           // bytes the engine gives the KV cache
  bool kv_oom = false;            // kv_cache > kv_budget
  std::int64_t max_batch = 0;     // requests of seq_len tokens that fit the KV budget
};

// Weight bytes of one op occurrence (its quant's bytes per element; the embedding is bf16).
double OpWeightBytes(const model::Op& op);
// Weight bytes of all occurrences of `ops` (x scale). A GPU holds the context
// ops' weights / pp.
double WeightBytes(const std::vector<model::Op>& ops);

MemoryBreakdown EstimateMemory(const model::ModelConfig& m, const model::ParallelConfig& p, const model::OpList& ops,
                               const systems::SystemSpec& spec, const EngineProfile& engine, const MemoryInputs& in);

}  // namespace servecast::serve
