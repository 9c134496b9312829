#pragma once

// A small hand-made search result for the report writers' tests.

#include <string>

#include "model/family.h"
#include "model/model_config.h"
#include "report/terminal.h"
#include "search/search.h"

namespace servecast::report::testing {

inline search::Point MakePoint(search::Mode mode, double user, double gpu, int tp, bool sla = true) {
  search::Point p;
  p.mode = mode;
  p.par.tp = tp;
  p.decode_par.tp = tp * 2;
  p.batch = 8;
  p.ctx_tokens = 4096;
  p.prefill_batch = 1;
  p.prefill_workers = 1;
  p.decode_workers = 2;
  p.gpus_per_replica = mode == search::Mode::kAgg ? tp : tp + 4 * tp;
  p.ttft_ms = 500;
  p.tpot_ms = 1000.0 / user;
  p.request_latency_ms = 500 + 999 * p.tpot_ms;
  p.tokens_per_s_gpu = gpu;
  p.tokens_per_s_gpu_cluster = gpu;
  p.tokens_per_s_user = user;
  p.seq_per_s = 1.5;
  p.concurrency = 8;
  p.replicas = 8 / p.gpus_per_replica > 0 ? 8 / p.gpus_per_replica : 1;
  p.memory_gib = 60.5;
  p.meets_sla = sla;
  return p;
}

// agg: 6 points (frontier 0, 2, 4 by tokens/s/user), disagg: 4 points (frontier 1, 3).
// TPOT limit 25 ms -> 40 tokens/s/user; the largest tokens/s/user is 100.
inline search::SearchResult MakeResult() {
  using search::Mode;
  search::SearchResult r;
  search::ModeResult agg;
  agg.mode = Mode::kAgg;
  agg.points = {MakePoint(Mode::kAgg, 20, 900, 1, false), MakePoint(Mode::kAgg, 25, 500, 1, false),
                MakePoint(Mode::kAgg, 50, 700, 2),        MakePoint(Mode::kAgg, 55, 300, 2),
                MakePoint(Mode::kAgg, 100, 200, 4),       MakePoint(Mode::kAgg, 90, 100, 4)};
  agg.frontier = {0, 2, 4};
  agg.best = {2, 4};
  agg.best_meets_sla = true;
  agg.parallel_configs = 3;
  agg.evaluated = 40;
  agg.skipped = {{"missing data: gemm <fp8> & co", 7}};
  search::ModeResult dis;
  dis.mode = Mode::kDisagg;
  dis.points = {MakePoint(Mode::kDisagg, 30, 400, 1), MakePoint(Mode::kDisagg, 45, 800, 1),
                MakePoint(Mode::kDisagg, 60, 300, 2), MakePoint(Mode::kDisagg, 70, 600, 2)};
  dis.frontier = {1, 3};
  dis.best = {1, 3};
  dis.best_meets_sla = true;
  dis.parallel_configs = 2;
  dis.evaluated = 30;
  r.modes = {agg, dis};
  r.chosen = 1;
  r.chosen_ratio = 800.0 / 700.0;
  r.seconds = 0.25;
  return r;
}

inline model::ModelConfig MakeModel() {
  model::ModelConfig m;
  m.name = "acme/<Tiny> & \"Co\"";
  m.family = &model::FindFamily("dense");
  m.quant.gemm = "bf16";
  m.quant.kv = "bf16";
  return m;
}

inline ReportContext MakeContext(const model::ModelConfig& m) {
  ReportContext c;
  c.model = &m;
  c.system = "tiny_gpu";
  c.device = "Tiny <GPU>";
  c.engine = "trtllm";
  c.data = "trtllm/1.0";
  c.database_mode = "silicon";
  c.inputs.total_gpus = 8;
  c.inputs.isl = 4000;
  c.inputs.osl = 1000;
  c.inputs.ttft_ms = 2000;
  c.inputs.tpot_ms = 25;
  return c;
}

}  // namespace servecast::report::testing
