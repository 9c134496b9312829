#pragma once

// `servecast estimate`: one deployment's latency, throughput and memory.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace servecast::cli {

struct EstimateArgs {
  std::string model, system, engine = "trtllm", data, mode = "static";
  std::vector<std::string> data_roots;
  std::string database_mode = "silicon", transfer_policy = "aggressive";
  std::int64_t isl = 1024, osl = 128, prefix = 0, batch = 1;
  int tp = 1, pp = 1, dp = 1, moe_tp = 0, moe_ep = 0;  // 0: derived (moe_tp 1, moe_ep = tp x dp x cp)
  int cp = 1;  // context parallel (sglang; static, and the disagg prefill workers' default)
  int nextn = 0, stride = 32;
  std::int64_t ctx_tokens = 0;  // agg: prefill token budget per step (0: isl)
  // disagg: each side's batch, workers and parallelism (0: the shared --batch / --tp ... values)
  std::int64_t prefill_batch = 1, decode_batch = 0;
  int prefill_workers = 1, decode_workers = 1;
  int prefill_tp = 0, prefill_pp = 0, prefill_dp = 0, prefill_moe_tp = 0, prefill_moe_ep = 0, prefill_cp = 0;
  int decode_tp = 0, decode_pp = 0, decode_dp = 0, decode_moe_tp = 0, decode_moe_ep = 0;
  double mtp_accepted = 0;
  std::optional<std::string> gemm_quant, moe_quant, kv_quant, fmha_quant, comm_quant;
  std::string moe_distribution;
  std::string detail;  // comma list of time, memory, source
  bool json = false;
  // agg --simulate: the request-level simulation (serve/simulate.h)
  bool simulate = false;
  std::int64_t sim_requests = 0;  // measured requests (0: 10 x batch)
  std::int64_t sim_warmup = -1;   // warm-up requests (-1: 2 x batch)
  double sim_rate = 0;            // Poisson arrivals per s per instance (0: closed loop at --batch)
  double sim_range_ratio = 0.8;   // lengths uniform in [ratio x L, L]
  std::int64_t sim_seed = 1;
  std::string systems_dir, models_dir, engines_dir;
  std::string calibration;  // engine-profile calibration: "" (servecast's) or "aic"
};

// Registers the subcommand and its options on `app`.
CLI::App* AddEstimateCommand(CLI::App& app, EstimateArgs& args);

// Runs it; `find` resolves a resource folder name ("systems", "models",
// "engines") of the installation. Throws the project's errors (the caller maps
// them to exit codes).
int RunEstimate(const EstimateArgs& args, const std::function<std::string(const std::string&)>& find);

}  // namespace servecast::cli
