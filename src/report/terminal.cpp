#include "report/terminal.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "model/family.h"
#include "report/format.h"

namespace servecast::report {

using search::Mode;
using search::ModeResult;
using search::Point;
using search::SearchResult;

namespace {

std::string Pad(std::string s, std::size_t w, bool right = false) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}

// The simulated point's state in a few words.
std::string SimState(const search::PointSim& s) {
  std::string t = s.meets_sla ? "meets limits" : "MISSES limits";
  if (!s.admitted_all) t += ", cannot admit c";
  if (s.kv_saturated) t += ", KV saturated";
  if (s.prefill_utilization >= 0) t += Fmt(", prefill busy %.0f%%", 100 * s.prefill_utilization);
  return t;
}

std::string Table(const ModeResult& m, const search::SearchInputs& in) {
  std::string out;
  const bool agg = m.mode == Mode::kAgg;
  std::vector<std::string> head = {"rank", "tokens/s/gpu", "tokens/s/user", "TTFT ms", "TPOT ms", "request ms",
                                   "concurrency", "replicas", "gpus/replica"};
  if (agg) {
    head.insert(head.end(), {"parallel", "batch", "ctx tokens"});
  } else {
    head.insert(head.end(), {"(p) workers x parallel", "(p) batch", "(d) workers x parallel", "(d) batch"});
  }
  head.push_back("mem GiB");
  bool simulated = false;
  for (std::size_t i : m.best) simulated = simulated || m.points[i].sim.has_value();
  if (simulated) head.insert(head.end(), {"sim TTFT", "sim TPOT", "sim tokens/s/gpu", "simulation"});
  std::vector<std::vector<std::string>> rows;
  int rank = 0;
  for (std::size_t i : m.best) {
    const Point& p = m.points[i];
    std::vector<std::string> row = {std::to_string(++rank) + (p.meets_sla ? "" : "!"),
                                    Fmt("%.1f", p.tokens_per_s_gpu_cluster),
                                    Fmt("%.1f", p.tokens_per_s_user),
                                    Fmt("%.1f", p.ttft_ms),
                                    Fmt("%.2f", p.tpot_ms),
                                    Fmt("%.0f", p.request_latency_ms),
                                    std::to_string(p.concurrency * p.replicas),
                                    std::to_string(p.replicas),
                                    std::to_string(p.gpus_per_replica)};
    const auto par = [](const model::ParallelConfig& c) { return c.Compact(); };
    if (agg) {
      row.insert(row.end(), {par(p.par), std::to_string(p.batch), std::to_string(p.ctx_tokens)});
    } else {
      row.insert(row.end(), {std::to_string(p.prefill_workers) + " x " + par(p.par), std::to_string(p.prefill_batch),
                             std::to_string(p.decode_workers) + " x " + par(p.decode_par), std::to_string(p.batch)});
    }
    row.push_back(Fmt("%.1f", p.memory_gib));
    if (simulated) {
      if (p.sim && p.sim->simulated)
        row.insert(row.end(), {Fmt("%.1f", p.sim->ttft_ms), Fmt("%.2f", p.sim->tpot_ms),
                               Fmt("%.1f", p.sim->tokens_per_s_gpu), SimState(*p.sim)});
      else
        row.insert(row.end(), {"-", "-", "-", p.sim ? "not simulated: " + p.sim->failure : "not simulated"});
    }
    rows.push_back(std::move(row));
  }
  std::vector<std::size_t> w(head.size());
  for (std::size_t c = 0; c < head.size(); ++c) {
    w[c] = head[c].size();
    for (const auto& row : rows) w[c] = std::max(w[c], row[c].size());
  }
  for (std::size_t c = 0; c < head.size(); ++c) out += (c ? "  " : "  ") + Pad(head[c], w[c], c > 0 && c < 9);
  out += "\n";
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) out += (c ? "  " : "  ") + Pad(row[c], w[c], c > 0 && c < 9);
    out += "\n";
  }
  if (!m.best_meets_sla && !m.best.empty())
    out += "  ! no " + std::string(search::ModeName(m.mode)) + " deployment meets the limits (TTFT " +
           Fmt("%.0f", in.ttft_ms) + " ms, " +
           (in.request_latency_ms > 0 ? "request " + Fmt("%.0f", in.request_latency_ms) + " ms"
                                      : "TPOT " + Fmt("%.1f", in.tpot_ms) + " ms") +
           "); the nearest are shown\n";
  return out;
}

}  // namespace

std::string AsciiPareto(const SearchResult& r, int width, int height) {
  double xmax = 0, ymax = 0;
  for (const auto& m : r.modes)
    for (std::size_t i : m.frontier) {
      xmax = std::max(xmax, m.points[i].tokens_per_s_user);
      ymax = std::max(ymax, m.points[i].tokens_per_s_gpu_cluster);
    }
  if (xmax <= 0 || ymax <= 0) return "  (no points to plot)\n";
  std::vector<std::string> grid(static_cast<std::size_t>(height), std::string(static_cast<std::size_t>(width), ' '));
  auto put = [&](const Point& p, char ch) {
    const int x = std::min(width - 1, static_cast<int>(std::lround(p.tokens_per_s_user / xmax * (width - 1))));
    const int y = std::min(height - 1, static_cast<int>(std::lround(p.tokens_per_s_gpu_cluster / ymax * (height - 1))));
    char& cell = grid[static_cast<std::size_t>(height - 1 - y)][static_cast<std::size_t>(x)];
    if (cell == ' ' || ch == '*') cell = ch;
  };
  for (const auto& m : r.modes)
    for (std::size_t i : m.frontier) put(m.points[i], m.mode == Mode::kAgg ? 'a' : 'd');
  if (const Point* c = search::ChosenPoint(r)) put(*c, '*');
  std::string out;
  const std::string ylab = Fmt("%.0f", ymax);
  for (int row = 0; row < height; ++row) {
    std::string label = row == 0 ? ylab : (row == height - 1 ? "0" : "");
    out += Pad(label, 8, true) + " |" + grid[static_cast<std::size_t>(row)] + "\n";
  }
  out += std::string(9, ' ') + "+" + std::string(static_cast<std::size_t>(width), '-') + "\n";
  out += std::string(10, ' ') + "0" + Pad(Fmt("%.0f", xmax), static_cast<std::size_t>(width - 1), true) + "\n";
  out += std::string(10, ' ') + "tokens/s/user ->   (up: tokens/s/GPU; a agg, d disagg frontier, * chosen)\n";
  return out;
}

std::string TerminalReport(const SearchResult& r, const ReportContext& c) {
  const search::SearchInputs& in = c.inputs;
  std::string out;
  out += "servecast default\n";
  out += "  model     " + c.model->name + " [" + model::FamilyOf(*c.model).Name() + "], quant gemm " +
         c.model->quant.gemm + (!model::FamilyOf(*c.model).HasExperts() ? "" : ", moe " + c.model->quant.moe) +
         ", kv " + c.model->quant.kv + "\n";
  out += "  system    " + c.system + " (" + c.device + "), " + std::to_string(in.total_gpus) + " GPUs, engine " +
         c.engine + ", data " + c.data + ", database mode " + c.database_mode + "\n";
  out += "  workload  isl " + std::to_string(in.isl) + ", osl " + std::to_string(in.osl) + ", prefix " +
         std::to_string(in.prefix) + "; limits TTFT " + Fmt("%.0f", in.ttft_ms) + " ms, " +
         (in.request_latency_ms > 0 ? "request latency " + Fmt("%.0f", in.request_latency_ms) + " ms"
                                    : "TPOT " + Fmt("%.1f", in.tpot_ms) + " ms") +
         "\n\n";
  if (const Point* p = search::ChosenPoint(r)) {
    const ModeResult& m = r.modes[static_cast<std::size_t>(r.chosen)];
    out += "  best: " + std::string(search::ModeName(p->mode)) + " " + p->Parallel() +
           (r.chosen_ratio > 0 ? Fmt(" (%.2fx the best of the other mode)", r.chosen_ratio) : std::string()) + "\n";
    out += "    throughput   " + Fmt("%.0f", p->tokens_per_s_gpu_cluster * in.total_gpus) + " tokens/s on " +
           std::to_string(in.total_gpus) + " GPUs (" + Fmt("%.1f", p->tokens_per_s_gpu_cluster) + " per GPU, " +
           Fmt("%.1f", p->tokens_per_s_user) + " per user), " + Fmt("%.2f", p->seq_per_s * p->replicas) +
           " requests/s\n";
    out += "    latency      TTFT " + Fmt("%.1f", p->ttft_ms) + " ms, TPOT " + Fmt("%.2f", p->tpot_ms) +
           " ms, request " + Fmt("%.0f", p->request_latency_ms) + " ms\n";
    if (p->sim && p->sim->simulated)
      out += "    simulated    TTFT " + Fmt("%.1f", p->sim->ttft_ms) + " ms, TPOT " + Fmt("%.2f", p->sim->tpot_ms) +
             " ms, " + Fmt("%.1f", p->sim->tokens_per_s_gpu) + " tokens/s per GPU (" + SimState(*p->sim) +
             "; means over 1,000 requests)\n";
    else if (p->sim)
      out += "    simulated    not simulated: " + p->sim->failure + "\n";
    out += "    deployment   " + std::to_string(p->replicas) + " replica(s) of " + std::to_string(p->gpus_per_replica) +
           " GPUs, concurrency " + std::to_string(p->concurrency * p->replicas) +
           (m.best_meets_sla ? "" : "  (MISSES the limits: nothing met them)") + "\n";
    if (c.data_notes.empty()) out += "    data         every op cost from measured or interpolated rows\n";
    for (std::size_t i = 0; i < c.data_notes.size(); ++i)
      out += std::string(i == 0 ? "    data         " : "                 ") + c.data_notes[i] + "\n";
    out += "\n";
  } else {
    out += in.strict_sla ? "  no deployment meets the limits (--strict-sla; see the skip counts below)\n"
                         : "  no deployment could be estimated (see the skip counts below)\n";
    // Nothing fits: how far the closest configuration is from fitting.
    const ModeResult::OutOfMemory* least = nullptr;
    for (const ModeResult& m : r.modes)
      if (m.points.empty() && m.closest_oom && (!least || m.closest_oom->needed_gib < least->needed_gib))
        least = &*m.closest_oom;
    bool any_point = false;
    for (const ModeResult& m : r.modes) any_point = any_point || !m.points.empty();
    if (least && !any_point)
      out += "  closest to fitting: " + least->parallel + " needs " + Fmt("%.1f", least->needed_gib) +
             " GiB per GPU (weights " + Fmt("%.1f", least->weights_gib) + ") of " + Fmt("%.1f", least->capacity_gib) +
             ": more GPUs (--total-gpus) or a smaller quantization\n";
    out += "\n";
  }
  out += AsciiPareto(r);
  for (const ModeResult& m : r.modes) {
    out += "\n" + std::string(search::ModeName(m.mode)) + ": " + std::to_string(m.parallel_configs) +
           " parallel configs, " + std::to_string(m.evaluated) + " estimates, " + std::to_string(m.points.size()) +
           " feasible points, " + std::to_string(m.frontier.size()) + " on the frontier\n";
    if (!m.best.empty()) out += Table(m, in);
    for (const SkipGroup& g : GroupSkips(m.skipped)) {
      out += "  skipped " + std::to_string(g.count) + ": " + g.reason;
      if (g.keys > 1)
        out += " (" + std::to_string(g.keys) + " keys, each in --json), e.g.\n      " +
               g.example.substr(g.example.find(": ") + 2);
      out += "\n";
    }
  }
  out += Fmt("\nsearched in %.3f s", r.seconds) + Fmt(" (+ %.3f s loading)\n", c.load_seconds);
  return out;
}

std::vector<SkipGroup> GroupSkips(const std::map<std::string, std::size_t>& skipped) {
  std::vector<SkipGroup> out;
  std::map<std::string, std::size_t> index;  // group name -> position in out
  for (const auto& [why, n] : skipped) {
    // "<class>: <table> {<key>} <rest>": the class and table name the group.
    const auto colon = why.find(": ");
    const auto brace = why.find(" {");
    if (colon == std::string::npos || brace == std::string::npos || brace < colon) {
      out.push_back(SkipGroup{why, n, 1, why});
      continue;
    }
    const std::string name = why.substr(0, brace);
    const auto it = index.find(name);
    if (it == index.end()) {
      index.emplace(name, out.size());
      out.push_back(SkipGroup{why, n, 1, why});
      continue;
    }
    SkipGroup& g = out[it->second];
    g.reason = name;
    g.count += n;
    ++g.keys;
  }
  return out;
}

std::string RecommendStepsTable(const search::RecommendResult& r) {
  char line[512];
  std::snprintf(line, sizeof line, "  %5s  %-12s  %15s  %16s  %s\n", "GPUs", "meets limits", "best requests/s",
                "best concurrency", "meets target");
  std::string out = line;
  for (const auto& st : r.steps) {
    std::snprintf(line, sizeof line, "  %5d  %-12s  %15s  %16s  %s", st.gpus, st.any_meets_sla ? "yes" : "no",
                  st.any_meets_sla ? Fmt("%.3f", st.best_request_rate).c_str() : "-",
                  st.any_meets_sla ? std::to_string(st.best_concurrency).c_str() : "-", st.meets_target ? "yes" : "no");
    out += line + (st.note.empty() ? std::string() : "  (" + st.note + ")") + "\n";
  }
  return out;
}

nlohmann::ordered_json RecommendStepsJson(const search::RecommendResult& r) {
  nlohmann::ordered_json steps = nlohmann::ordered_json::array();
  for (const auto& st : r.steps)
    steps.push_back({{"gpus", st.gpus},
                     {"meets_limits", st.any_meets_sla},
                     {"best_request_rate", st.best_request_rate},
                     {"best_concurrency", st.best_concurrency},
                     {"meets_target", st.meets_target},
                     {"note", st.note}});
  return steps;
}

nlohmann::ordered_json PointJson(const Point& p) {
  auto par = [](const model::ParallelConfig& c) {
    nlohmann::ordered_json j{{"tp", c.tp}, {"pp", c.pp}, {"dp", c.dp}, {"moe_tp", c.moe_tp}, {"moe_ep", c.moe_ep}};
    if (c.cp > 1) j["cp"] = c.cp;  // context parallel (present when > 1)
    return j;
  };
  nlohmann::ordered_json j = {{"mode", search::ModeName(p.mode)},
                              {"parallel", p.Parallel()},
                              {"tokens_per_s_gpu", p.tokens_per_s_gpu_cluster},
                              {"tokens_per_s_gpu_replica", p.tokens_per_s_gpu},
                              {"tokens_per_s_user", p.tokens_per_s_user},
                              {"ttft_ms", p.ttft_ms},
                              {"tpot_ms", p.tpot_ms},
                              {"request_latency_ms", p.request_latency_ms},
                              {"seq_per_s_replica", p.seq_per_s},
                              {"concurrency_replica", p.concurrency},
                              {"replicas", p.replicas},
                              {"gpus_per_replica", p.gpus_per_replica},
                              {"memory_gib", p.memory_gib},
                              {"meets_sla", p.meets_sla}};
  if (p.nextn > 0) {
    j["nextn"] = p.nextn;
    j["mtp_accepted"] = p.mtp_accepted;
  }
  if (p.sim) {
    if (p.sim->simulated) {
      j["simulation"] = {{"ttft_ms", p.sim->ttft_ms},
                         {"tpot_ms", p.sim->tpot_ms},
                         {"request_latency_ms", p.sim->request_latency_ms},
                         {"tokens_per_s_gpu", p.sim->tokens_per_s_gpu},
                         {"tokens_per_s_user", p.sim->tokens_per_s_user},
                         {"kv_saturated", p.sim->kv_saturated},
                         {"admitted_all", p.sim->admitted_all},
                         {"meets_sla", p.sim->meets_sla}};
      if (p.sim->prefill_utilization >= 0) j["simulation"]["prefill_utilization"] = p.sim->prefill_utilization;
    } else {
      j["simulation"] = {{"failure", p.sim->failure}};
    }
  }
  if (p.mode == Mode::kAgg) {
    j["worker"] = par(p.par);
    j["batch"] = p.batch;
    j["ctx_tokens"] = p.ctx_tokens;
  } else {
    j["prefill"] = {{"parallel", par(p.par)}, {"workers", p.prefill_workers}, {"batch", p.prefill_batch}};
    j["decode"] = {{"parallel", par(p.decode_par)}, {"workers", p.decode_workers}, {"batch", p.batch}};
  }
  return j;
}

nlohmann::ordered_json JsonReport(const SearchResult& r, const ReportContext& c) {
  const search::SearchInputs& in = c.inputs;
  nlohmann::ordered_json j = {
      {"model", c.model->name},
      {"system", c.system},
      {"engine", c.engine},
      {"data", c.data},
      {"database_mode", c.database_mode},
      {"total_gpus", in.total_gpus},
      {"workload", {{"isl", in.isl}, {"osl", in.osl}, {"prefix", in.prefix}}},
      {"limits",
       {{"ttft_ms", in.ttft_ms},
        {"tpot_ms", in.request_latency_ms > 0 ? 0.0 : in.tpot_ms},
        {"request_latency_ms", in.request_latency_ms}}},
  };
  if (const Point* p = search::ChosenPoint(r)) {
    j["chosen"] = PointJson(*p);
    j["chosen_ratio"] = r.chosen_ratio;
    j["chosen_data_notes"] = c.data_notes;
  } else {
    j["chosen"] = nullptr;
  }
  nlohmann::ordered_json modes = nlohmann::ordered_json::object();
  for (const ModeResult& m : r.modes) {
    nlohmann::ordered_json best = nlohmann::ordered_json::array(), front = nlohmann::ordered_json::array();
    for (std::size_t i : m.best) best.push_back(PointJson(m.points[i]));
    for (std::size_t i : m.frontier) front.push_back(PointJson(m.points[i]));
    nlohmann::ordered_json skipped = nlohmann::ordered_json::object();
    for (const auto& [why, n] : m.skipped) skipped[why] = n;
    modes[search::ModeName(m.mode)] = {{"parallel_configs", m.parallel_configs},
                                       {"estimates", m.evaluated},
                                       {"feasible_points", m.points.size()},
                                       {"best_meets_sla", m.best_meets_sla},
                                       {"best", best},
                                       {"frontier", front},
                                       {"skipped", skipped}};
    if (m.closest_oom)
      modes[search::ModeName(m.mode)]["closest_out_of_memory"] = {{"parallel", m.closest_oom->parallel},
                                                                {"needed_gib", m.closest_oom->needed_gib},
                                                                {"weights_gib", m.closest_oom->weights_gib},
                                                                {"capacity_gib", m.closest_oom->capacity_gib}};
  }
  j["modes"] = modes;
  j["search_seconds"] = r.seconds;
  j["load_seconds"] = c.load_seconds;
  return j;
}

}  // namespace servecast::report
