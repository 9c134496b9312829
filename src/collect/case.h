#pragma once

#include <string>

#include "collect/params.h"

namespace servecast::collect {

// One benchmark invocation: an op and its parameters. The ID is derived from both
// and is stable across runs and machines.
struct Case {
  std::string op;
  Params params;
  std::string id;     // "<op>:<canonical params>"
  std::string owner;  // the plan file (and profile) that first produced it
};

std::string MakeCaseId(const std::string& op, const Params& params);

}  // namespace servecast::collect
