#pragma once

// `servecast validate`: predict every row of a measured serving file and report
// the error per row and per (model, engine, mode) partition (docs/accuracy.md).
//
// The file follows AIC's `silicon_sample.csv` schema (one deployment per row:
// engine, model, parallelism, isl/osl, client concurrency, measured TTFT/TPOT).
// A row the estimator cannot answer is a failure with its reason, never dropped.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "perfdb/modes.h"

namespace servecast::serve {

// One measured deployment. Integer fields left empty in the file read as 0.
struct SiliconRow {
  int line = 0;  // 1-based line of the file
  std::string id, backend, backend_version, model_path, system, precision, mode;
  std::int64_t isl = 0, osl = 0, batch = 0;  // batch: client concurrency
  // The client concurrency named in silicon_data_source ("silicon_concurrency=N"; 0 when absent).
  std::int64_t source_concurrency = 0;
  int tp = 0, pp = 0, dp = 0, moe_tp = 0, moe_ep = 0;
  std::optional<std::string> gemm_quant, moe_quant;
  // disagg
  std::int64_t prefill_batch = 0, decode_batch = 0;
  int prefill_workers = 0, decode_workers = 0;
  int prefill_tp = 0, prefill_pp = 0, prefill_dp = 0, prefill_moe_tp = 0, prefill_moe_ep = 0;
  int decode_tp = 0, decode_pp = 0, decode_dp = 0, decode_moe_tp = 0, decode_moe_ep = 0;
  std::optional<double> ttft_ms, tpot_ms;  // measured
};

// Reads the file. Throws DataError naming file:line and the column for a
// missing required column, a row with the wrong number of fields, or a value
// that is not a number where one is expected.
std::vector<SiliconRow> ReadSiliconCsv(const std::string& path);

struct ValidateOptions {
  std::vector<std::string> roots;               // data roots
  std::string data;                             // BACKEND[/VERSION] for every row ("" = per row)
  std::map<std::string, std::string> data_map;  // engine -> BACKEND[/VERSION]
  perfdb::DatabaseMode mode = perfdb::DatabaseMode::kSilicon;
  std::string systems_dir, models_dir, engines_dir;
  std::string moe_distribution;
  // Also simulate every agg row (serve/simulate.h) with the workload of the
  // measured rows: closed-loop clients at the row's concurrency per rank,
  // 10 x c measured requests after 2 x c warm-up, lengths uniform in [0.8 L, L].
  bool simulate = false;
  bool sim_median = false;  // compare the simulated median per request (default: the mean)
  double sim_range_ratio = 0.8;  // lengths uniform in [ratio x L, L] (1: every request at the row's isl / osl)
};

struct RowResult {
  int line = 0;
  std::string id, model, engine, mode, config;
  std::string source;  // data source read ("trtllm/1.3.0rc20")
  bool predicted = false;
  double measured_ttft_ms = 0, measured_tpot_ms = 0;
  double ttft_ms = 0, tpot_ms = 0;                // predicted
  double ttft_error_pct = 0, tpot_error_pct = 0;  // (predicted - measured) / measured x 100
  std::string failure;                            // kind: missing data, unsupported model, bad row, ...
  std::string reason;                             // the estimator's message
  std::vector<std::string> notes;                 // derivations made for this row
  // --simulate: the simulated TTFT / TPOT statistic and its errors.
  bool simulated = false;
  double sim_ttft_ms = 0, sim_tpot_ms = 0, sim_ttft_error_pct = 0, sim_tpot_error_pct = 0;
  bool sim_kv_saturated = false, sim_admitted_all = true;
  std::int64_t sim_preemptions = 0, sim_max_running = 0;
  double sim_prefill_utilization = -1;  // disagg: busy fraction of the prefill instances (-1: agg)
  std::string sim_failure;  // why the row was not simulated
};

struct PartitionStats {
  std::string model, engine, mode;
  std::vector<std::string> sources;
  int rows = 0, predicted = 0;
  double ttft_median_abs_pct = 0, ttft_p90_abs_pct = 0;
  double tpot_median_abs_pct = 0, tpot_p90_abs_pct = 0;
  double ttft_median_signed_pct = 0, tpot_median_signed_pct = 0;
};

struct ValidateReport {
  std::vector<RowResult> rows;  // in file order, failures included
  std::vector<PartitionStats> partitions;
  PartitionStats overall;  // model/engine/mode "all"
  // --simulate: the same statistics over the simulated errors (simulated rows only).
  std::vector<PartitionStats> sim_partitions;
  PartitionStats sim_overall;
  int simulated = 0;
  int predicted = 0, failed = 0;
};

// Predicts every row. The data source of a row: the options' `data`, else the
// `data_map` entry of its engine, else the row's backend at the newest version
// <= the row's backend_version present under the roots, else the oldest newer
// one (the nearest), else none (the row fails with "missing data").
ValidateReport Validate(const std::vector<SiliconRow>& rows, const ValidateOptions& options);

// Median and p90 (linear interpolation between order statistics) of `v`.
double Quantile(std::vector<double> v, double q);

}  // namespace servecast::serve
