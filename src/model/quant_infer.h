#pragma once

// Quantization inference: from what a checkpoint's config says (quantization_config
// in config.json, or hf_quant_config.json written by ModelOpt) to the per-op-class
// modes of QuantConfig. docs/models.md, "Quantization", has the table.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace servecast::model {

// The mode names each op class accepts (the perf tables' dtype names).
const std::vector<std::string>& GemmQuantNames();
const std::vector<std::string>& MoeQuantNames();
const std::vector<std::string>& KvQuantNames();
const std::vector<std::string>& FmhaQuantNames();
const std::vector<std::string>& CommQuantNames();

// Where the quantization facts come from. Any pointer may be null.
struct QuantSources {
  const nlohmann::json* quantization_config = nullptr;  // config.json's quantization_config
  std::string quantization_config_key;                  // its key path, for messages
  const nlohmann::json* hf_quant = nullptr;             // hf_quant_config.json, whole document
  std::string config_where;                             // config.json's name, for messages
  std::string hf_quant_where;                           // hf_quant_config.json's name, for messages
};

// Fills m.quant_algo, m.dynamic_activations, m.quant and m.quant_notes. An
// unsupported or malformed quantization description -> ConfigError naming the file
// and the field.
void InferQuant(ModelConfig& m, const QuantSources& src);

}  // namespace servecast::model
