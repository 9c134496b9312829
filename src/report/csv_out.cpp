#include "report/csv_out.h"

#include <cstdio>
#include <numeric>
#include <unordered_set>

namespace servecast::report {

using search::Mode;
using search::ModeResult;
using search::Point;

namespace {

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

void AppendParallel(std::vector<std::string>& row, const model::ParallelConfig& c) {
  for (int v : {c.tp, c.pp, c.dp, c.moe_tp, c.moe_ep}) row.push_back(std::to_string(v));
}

std::string JoinRow(const std::vector<std::string>& row) {
  std::string line;
  for (std::size_t i = 0; i < row.size(); ++i) {
    if (i) line += ',';
    line += CsvField(row[i]);
  }
  return line + "\n";
}

}  // namespace

std::string CsvField(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

std::vector<std::string> PointCsvHeader(Mode mode) {
  std::vector<std::string> h = {"mode",
                                "parallel",
                                "tokens_per_s_gpu",
                                "tokens_per_s_gpu_replica",
                                "tokens_per_s_user",
                                "ttft_ms",
                                "tpot_ms",
                                "request_latency_ms",
                                "seq_per_s_replica",
                                "seq_per_s_total",
                                "concurrency_replica",
                                "concurrency_total",
                                "replicas",
                                "gpus_per_replica",
                                "gpus_used",
                                "memory_gib",
                                "meets_sla",
                                "on_frontier"};
  if (mode == Mode::kAgg) {
    h.insert(h.end(), {"tp", "pp", "dp", "moe_tp", "moe_ep", "batch", "ctx_tokens"});
  } else {
    h.insert(h.end(), {"p_tp", "p_pp", "p_dp", "p_moe_tp", "p_moe_ep", "p_workers", "p_batch", "d_tp", "d_pp", "d_dp",
                       "d_moe_tp", "d_moe_ep", "d_workers", "d_batch"});
  }
  return h;
}

std::string PointsCsv(const ModeResult& m, const std::vector<std::size_t>& rows, bool ranked) {
  const std::unordered_set<std::size_t> front(m.frontier.begin(), m.frontier.end());
  std::vector<std::string> head = PointCsvHeader(m.mode);
  if (ranked) head.insert(head.begin(), "rank");
  std::string out = JoinRow(head);
  std::size_t rank = 0;
  for (std::size_t i : rows) {
    const Point& p = m.points[i];
    std::vector<std::string> row;
    if (ranked) row.push_back(std::to_string(++rank));
    row.insert(row.end(),
               {search::ModeName(p.mode), p.Parallel(), Num(p.tokens_per_s_gpu_cluster), Num(p.tokens_per_s_gpu),
                Num(p.tokens_per_s_user), Num(p.ttft_ms), Num(p.tpot_ms), Num(p.request_latency_ms), Num(p.seq_per_s),
                Num(p.seq_per_s * p.replicas), std::to_string(p.concurrency),
                std::to_string(p.concurrency * p.replicas), std::to_string(p.replicas),
                std::to_string(p.gpus_per_replica), std::to_string(p.replicas * p.gpus_per_replica), Num(p.memory_gib),
                p.meets_sla ? "true" : "false", front.count(i) ? "true" : "false"});
    if (m.mode == Mode::kAgg) {
      AppendParallel(row, p.par);
      row.push_back(std::to_string(p.batch));
      row.push_back(std::to_string(p.ctx_tokens));
    } else {
      AppendParallel(row, p.par);
      row.push_back(std::to_string(p.prefill_workers));
      row.push_back(std::to_string(p.prefill_batch));
      AppendParallel(row, p.decode_par);
      row.push_back(std::to_string(p.decode_workers));
      row.push_back(std::to_string(p.batch));
    }
    out += JoinRow(row);
  }
  return out;
}

std::string AllPointsCsv(const ModeResult& m) {
  std::vector<std::size_t> all(m.points.size());
  std::iota(all.begin(), all.end(), std::size_t{0});
  return PointsCsv(m, all);
}

}  // namespace servecast::report
