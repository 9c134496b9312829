#pragma once

// Helpers of the op-list tests (ops_test.cpp, deepseek_ops_test.cpp): the bundled
// models folder, an op of a phase by name, and an op list under one engine.

#include <stdexcept>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/ops.h"

namespace servecast::model::oplist_test {

inline const std::string kModels = std::string(SERVECAST_SOURCE_DIR) + "/models";

inline const Op& Find(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& op : ops)
    if (op.name == name) return op;
  throw std::runtime_error("no op " + name);
}
inline bool Has(const std::vector<Op>& ops, const std::string& name) {
  for (const Op& op : ops)
    if (op.name == name) return true;
  return false;
}

inline OpList Build(const ModelConfig& m, ParallelConfig p, Engine e = Engine::kTrtllm, int nextn = 0) {
  OpListOptions o;
  o.engine = e;
  o.nextn = nextn;
  return BuildOpList(m, p, o);
}

}  // namespace servecast::model::oplist_test
