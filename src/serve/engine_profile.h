#pragma once

// A serving engine's constants, read from engines/<engine>.yaml (docs/estimator.md,
// "Engine profiles"): one data file per engine, so calibration changes data, not code.

#include <map>
#include <string>

#include "model/model_config.h"
#include "model/ops.h"

namespace servecast::serve {

enum class KvBudgetRule {
  kOfFree,   // (capacity - non-KV) x fraction x (1 - reserved) x (1 - tolerance)
  kOfTotal,  // capacity x fraction x (1 - reserved) x (1 - tolerance) - non-KV
};

struct KvBudget {
  KvBudgetRule rule = KvBudgetRule::kOfFree;
  double fraction = 0.9;
  double reserved = 0;
  double tolerance = 0;
};

struct MemoryProfile {
  // Activation coefficient per model family ("dense", "moe") and tp bucket (1, 2, 4, 8).
  std::map<std::string, std::map<int, double>> activation_coefficients;
  double activation_floor_bytes = 0;
  double activation_factor = 1;
  double other_bytes_factor = 1;
  KvBudget kv_budget;

  // coefficient[family][largest bucket <= min(tp, 8)]; ConfigError when the family is absent.
  double ActivationCoefficient(model::Family family, int tp) const;
};

struct EngineProfile {
  model::Engine engine = model::Engine::kTrtllm;
  std::string source_file;
  MemoryProfile memory;
};

// Reads and validates one profile (unknown keys, missing values and bad numbers ->
// ConfigError with file, line and key).
EngineProfile LoadEngineProfile(const std::string& path);
// engines_dir/<name>.yaml
EngineProfile LoadEngineProfileByName(const std::string& engines_dir, model::Engine engine);

}  // namespace servecast::serve
