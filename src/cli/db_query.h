#pragma once

// `servecast db query`: latency of one op at one shape from a perf database.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace servecast::cli {

struct DbQueryArgs {
  std::vector<std::string> roots;
  std::string system, backend, version, op, quant = "bfloat16", attn_dtype = "bfloat16", kv_dtype = "bfloat16";
  std::int64_t m = 1, n = 0, k = 0, batch = 1, seq = 0, heads = 0, kv_heads = 0, head_dim = 128, window = 0;
  std::string mode = "silicon", policy = "aggressive";
  std::int64_t tokens = 1, hidden = 0, inter = 0, topk = 1, experts = 1, moe_tp = 1, moe_ep = 1, gpus = 2;
  double size = 0;
  std::string distribution = "uniform", collective = "all_reduce", comm_dtype = "half";
  std::string bmm_op = "mla_gen_pre";
  std::vector<std::string> keys;  // --key column=value: a declared table's key (--op <table>)
  bool json = false;
  std::string systems_dir;
};

CLI::App* AddDbQueryCommand(CLI::App& db, DbQueryArgs& args);

// Prints the estimate (one line, or one JSON document with --json); `find`
// resolves the default systems/ folder. UsageError for an unknown op or a
// shape the op needs but was not given.
int RunDbQuery(const DbQueryArgs& args, const std::function<std::string(const std::string&)>& find);

}  // namespace servecast::cli
