#include "cli/validate_cmd.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/data_roots.h"
#include "cli/value_checks.h"
#include "core/error.h"
#include "perfdb/modes.h"
#include "serve/validate.h"

namespace servecast::cli {

namespace {

using Json = nlohmann::ordered_json;

// "..._17" -> "17"; otherwise the id cut to 14 characters.
std::string ShortId(const std::string& id) {
  const auto us = id.find_last_of('_');
  if (us != std::string::npos && us + 1 < id.size() && id.find_first_not_of("0123456789", us + 1) == std::string::npos)
    return id.substr(us + 1);
  return id.size() <= 14 ? id : id.substr(0, 13) + "~";
}

std::string ShortModel(const std::string& m) {
  const auto slash = m.find_last_of('/');
  return slash == std::string::npos ? m : m.substr(slash + 1);
}

Json StatsJson(const serve::PartitionStats& p) {
  return {{"model", p.model},
          {"engine", p.engine},
          {"mode", p.mode},
          {"sources", p.sources},
          {"rows", p.rows},
          {"predicted", p.predicted},
          {"ttft_abs_error_pct", {{"median", p.ttft_median_abs_pct}, {"p90", p.ttft_p90_abs_pct}}},
          {"tpot_abs_error_pct", {{"median", p.tpot_median_abs_pct}, {"p90", p.tpot_p90_abs_pct}}},
          {"ttft_signed_error_pct_median", p.ttft_median_signed_pct},
          {"tpot_signed_error_pct_median", p.tpot_median_signed_pct}};
}

void PrintStats(const serve::PartitionStats& p) {
  std::string src;
  for (const auto& s : p.sources) src += (src.empty() ? "" : ",") + s;
  if (p.predicted == 0) {
    std::printf("  %-28s %-7s %-6s %4d %4d  %7s %7s  %7s %7s  %s\n", ShortModel(p.model).c_str(), p.engine.c_str(),
                p.mode.c_str(), p.rows, p.predicted, "-", "-", "-", "-", src.empty() ? "-" : src.c_str());
    return;
  }
  std::printf("  %-28s %-7s %-6s %4d %4d  %6.1f%% %6.1f%%  %6.1f%% %6.1f%%  %+6.1f%% %+6.1f%%  %s\n",
              ShortModel(p.model).c_str(), p.engine.c_str(), p.mode.c_str(), p.rows, p.predicted, p.ttft_median_abs_pct,
              p.ttft_p90_abs_pct, p.tpot_median_abs_pct, p.tpot_p90_abs_pct, p.ttft_median_signed_pct,
              p.tpot_median_signed_pct, src.empty() ? "-" : src.c_str());
}

}  // namespace

CLI::App* AddValidateCommand(CLI::App& app, ValidateArgs& a) {
  auto* c = app.add_subcommand(
      "validate",
      "predict every row of a measured serving file and print the error per row and partition; exit 0 when some row "
      "is predicted and none is impossible (a measured TTFT or TPOT <= 0, tp 0: a bad row), 1 otherwise, 2 on a "
      "malformed file");
  c->add_option("--silicon", a.silicon, "measured serving results (CSV, AIC silicon_sample.csv columns)")->required();
  c->add_option("--data-root", a.data_roots,
                kDataRootHelp);
  c->add_option("--data", a.data,
                "one perf-data source BACKEND[/VERSION] for every row (default: per row, see --data-map)");
  c->add_option("--data-map", a.data_map,
                "ENGINE=BACKEND[/VERSION]: the source for rows of that engine (repeat; default: the row's backend at "
                "the newest version <= its backend_version, else the nearest newer one)");
  c->add_option("--database-mode", a.database_mode, "silicon, hybrid, empirical or sol")->capture_default_str();
  c->add_option("--moe-distribution", a.moe_distribution, "expert load: balanced, power_law_1.01, power_law_1.2")
      ->check(ExpertLoad());
  c->add_flag("--json", a.json, "print one JSON document (rows, partitions, failures) and nothing else");
  c->add_flag("--simulate", a.simulate,
              "also simulate every row (closed-loop clients at its concurrency, 10 x c requests after 2 x c "
              "warm-up, lengths uniform in [0.8 L, L]; disagg: prefill and decode instances coupled by the KV "
              "hand-off) and print its errors next to the closed form's");
  c->add_option("--sim-statistic", a.sim_statistic,
                "--simulate: the per-request statistic compared with the measured value: mean or median")
      ->capture_default_str();
  c->add_option("--sim-range-ratio", a.sim_range_ratio,
                "--simulate: request lengths uniform in [ratio x L, L] for the row's isl and osl L (1: fixed lengths)")
      ->capture_default_str()
      ->check(NumberIn(0, 1, true));
  c->add_option("--systems", a.systems_dir, "system spec folder (default: systems/ of the installation)");
  c->add_option("--models", a.models_dir, "bundled model folder (default: models/ of the installation)");
  c->add_option("--engines", a.engines_dir, "engine profile folder (default: engines/ of the installation)");
  return c;
}

int RunValidate(const ValidateArgs& a, const std::function<std::string(const std::string&)>& find) {
  serve::ValidateOptions o;
  o.systems_dir = a.systems_dir.empty() ? find("systems") : a.systems_dir;
  o.models_dir = a.models_dir.empty() ? find("models") : a.models_dir;
  o.engines_dir = a.engines_dir.empty() ? find("engines") : a.engines_dir;
  o.roots = ResolveDataRoots(a.data_roots);
  if (o.roots.empty()) o.roots.push_back((std::filesystem::path(o.systems_dir) / "data").string());
  o.data = a.data;
  for (const auto& m : a.data_map) {
    const auto eq = m.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == m.size())
      throw UsageError("--data-map '" + m + "': expected ENGINE=BACKEND[/VERSION], e.g. vllm=trtllm/1.3.0rc20");
    o.data_map[m.substr(0, eq)] = m.substr(eq + 1);
  }
  o.mode = perfdb::ParseDatabaseMode(a.database_mode);
  o.moe_distribution = a.moe_distribution;
  if (a.sim_statistic != "mean" && a.sim_statistic != "median")
    throw UsageError("--sim-statistic '" + a.sim_statistic + "': expected mean or median");
  o.simulate = a.simulate;
  o.sim_median = a.sim_statistic == "median";
  o.sim_range_ratio = a.sim_range_ratio;

  const std::vector<serve::SiliconRow> rows = serve::ReadSiliconCsv(a.silicon);
  const serve::ValidateReport rep = serve::Validate(rows, o);
  // Exit 1 also when a row is impossible (a measurement <= 0, tp 0, ...): the
  // file is wrong there, and a script must see it, not only a reader of the table.
  int bad_rows = 0;
  for (const auto& r : rep.rows) bad_rows += !r.predicted && r.failure == "bad row";
  const int status = rep.predicted > 0 && bad_rows == 0 ? 0 : 1;

  if (a.json) {
    Json jrows = Json::array(), failures = Json::array(), parts = Json::array();
    for (const auto& r : rep.rows) {
      Json j = {{"line", r.line},
                {"id", r.id},
                {"model", r.model},
                {"engine", r.engine},
                {"mode", r.mode},
                {"config", r.config},
                {"source", r.source},
                {"predicted", r.predicted},
                {"measured", {{"ttft_ms", r.measured_ttft_ms}, {"tpot_ms", r.measured_tpot_ms}}}};
      if (r.predicted) {
        j["prediction"] = {{"ttft_ms", r.ttft_ms}, {"tpot_ms", r.tpot_ms}};
        j["error_pct"] = {{"ttft", r.ttft_error_pct}, {"tpot", r.tpot_error_pct}};
      } else {
        j["failure"] = {{"kind", r.failure}, {"reason", r.reason}};
        failures.push_back({{"line", r.line},
                            {"id", r.id},
                            {"model", r.model},
                            {"engine", r.engine},
                            {"mode", r.mode},
                            {"kind", r.failure},
                            {"reason", r.reason}});
      }
      if (a.simulate) {
        if (r.simulated) {
          j["simulation"] = {{"statistic", a.sim_statistic},
                             {"ttft_ms", r.sim_ttft_ms},
                             {"tpot_ms", r.sim_tpot_ms},
                             {"error_pct", {{"ttft", r.sim_ttft_error_pct}, {"tpot", r.sim_tpot_error_pct}}},
                             {"kv_saturated", r.sim_kv_saturated},
                             {"admitted_all", r.sim_admitted_all},
                             {"preemptions", r.sim_preemptions},
                             {"max_running", r.sim_max_running}};
          if (r.sim_prefill_utilization >= 0) j["simulation"]["prefill_utilization"] = r.sim_prefill_utilization;
        } else {
          j["simulation"] = {{"failure", r.sim_failure}};
        }
      }
      j["notes"] = r.notes;
      jrows.push_back(std::move(j));
    }
    for (const auto& p : rep.partitions) parts.push_back(StatsJson(p));
    Json out = {{"silicon", a.silicon},  {"database_mode", perfdb::DatabaseModeName(o.mode)},
                {"data_roots", o.roots}, {"rows", jrows},
                {"partitions", parts},   {"overall", StatsJson(rep.overall)},
                {"failures", failures},  {"predicted", rep.predicted},
                {"failed", rep.failed}};
    if (a.simulate) {
      Json sp = Json::array();
      for (const auto& p : rep.sim_partitions) sp.push_back(StatsJson(p));
      out["simulation"] = {{"statistic", a.sim_statistic},
                           {"range_ratio", a.sim_range_ratio},
                           {"simulated", rep.simulated},
                           {"partitions", sp},
                           {"overall", StatsJson(rep.sim_overall)}};
    }
    std::printf("%s\n", out.dump(2).c_str());
    return status;
  }

  std::printf("servecast validate: %s (%zu rows), database mode %s\n", a.silicon.c_str(), rep.rows.size(),
              perfdb::DatabaseModeName(o.mode));
  std::printf(
      "line = the row's line in the file; error = (predicted - measured) / measured;\n"
      "config = isl/osl, client concurrency, parallelism\n\n");
  std::printf("  %-5s %-24s %-7s %-6s %-26s %9s %9s %9s %9s %8s %8s\n", "line", "model", "engine", "mode", "config",
              "TTFT ms", "pred", "TPOT ms", "pred", "TTFT err", "TPOT err");
  for (const auto& r : rep.rows) {
    std::printf("  %-5d %-24s %-7s %-6s %-26s %9.2f ", r.line, ShortModel(r.model).substr(0, 24).c_str(),
                r.engine.c_str(), r.mode.c_str(), r.config.c_str(), r.measured_ttft_ms);
    if (r.predicted)
      std::printf("%9.2f %9.3f %9.3f %+7.1f%% %+7.1f%%\n", r.ttft_ms, r.measured_tpot_ms, r.tpot_ms, r.ttft_error_pct,
                  r.tpot_error_pct);
    else
      std::printf("%9s %9.3f %9s   not predicted (%s)\n", "-", r.measured_tpot_ms, "-", r.failure.c_str());
  }

  std::printf("\nper partition (|error|: median, p90; signed: median)\n");
  std::printf("  %-28s %-7s %-6s %4s %4s  %-15s  %-15s  %-15s  %s\n", "model", "engine", "mode", "rows", "pred",
              "TTFT med  p90", "TPOT med  p90", "signed TTFT TPOT", "data source");
  for (const auto& p : rep.partitions) PrintStats(p);
  PrintStats(rep.overall);

  if (a.simulate) {
    std::printf("\nsimulated (%s per request over 10 x c requests after 2 x c warm-up, lengths in [%.2g L, L]): %d of "
                "%zu rows\n",
                a.sim_statistic.c_str(), a.sim_range_ratio, rep.simulated, rep.rows.size());
    std::printf("  %-5s %-24s %-7s %-26s %9s %9s %9s %9s %9s %9s %8s %8s  %s\n", "line", "model", "engine", "config",
                "TTFT ms", "closed", "sim", "TPOT ms", "closed", "sim", "TTFT err", "TPOT err", "engine state");
    for (const auto& r : rep.rows) {
      if (!r.predicted) continue;
      std::printf("  %-5d %-24s %-7s %-26s %9.2f %9.2f ", r.line, ShortModel(r.model).substr(0, 24).c_str(),
                  r.engine.c_str(), r.config.c_str(), r.measured_ttft_ms, r.ttft_ms);
      if (!r.simulated) {
        std::printf("%9s %9.3f %9.3f %9s   not simulated (%s)\n", "-", r.measured_tpot_ms, r.tpot_ms, "-",
                    r.sim_failure.c_str());
        continue;
      }
      std::string state = !r.sim_admitted_all ? "cannot admit c (max " + std::to_string(r.sim_max_running) + " run)"
                          : r.sim_kv_saturated ? "KV saturated"
                                               : "fits";
      if (r.sim_preemptions > 0) state += ", " + std::to_string(r.sim_preemptions) + " preempted";
      if (r.sim_prefill_utilization >= 0)
        state += ", prefill busy " + std::to_string(static_cast<int>(std::lround(100 * r.sim_prefill_utilization))) + "%";
      std::printf("%9.2f %9.3f %9.3f %9.3f %+7.1f%% %+7.1f%%  %s\n", r.sim_ttft_ms, r.measured_tpot_ms, r.tpot_ms,
                  r.sim_tpot_ms, r.sim_ttft_error_pct, r.sim_tpot_error_pct, state.c_str());
    }
    std::printf("\nper partition, closed form -> simulated (|error| median, p90; signed median)\n");
    std::printf("  %-28s %-7s %-6s %4s %4s  %-15s  %-15s  %-15s  %s\n", "model", "engine", "mode", "rows", "pred",
                "TTFT med  p90", "TPOT med  p90", "signed TTFT TPOT", "data source");
    for (std::size_t i = 0; i < rep.partitions.size(); ++i) {
      PrintStats(rep.partitions[i]);
      PrintStats(rep.sim_partitions[i]);
    }
    PrintStats(rep.overall);
    PrintStats(rep.sim_overall);
  }

  if (rep.failed > 0) {
    std::printf("\nnot predicted: %d of %zu rows\n", rep.failed, rep.rows.size());
    for (const auto& r : rep.rows)
      if (!r.predicted)
        std::printf("  line %d (id %s, %s, %s): %s: %s\n", r.line, ShortId(r.id).c_str(), ShortModel(r.model).c_str(),
                    r.engine.c_str(), r.failure.c_str(), r.reason.c_str());
  }
  bool any_note = false;
  for (const auto& r : rep.rows)
    for (const auto& n : r.notes) {
      if (!any_note) std::printf("\nnotes\n");
      any_note = true;
      std::printf("  line %d (id %s): %s\n", r.line, ShortId(r.id).c_str(), n.c_str());
    }
  if (rep.predicted == 0) std::fprintf(stderr, "servecast validate: no row could be predicted\n");
  if (bad_rows > 0)
    std::fprintf(stderr, "servecast validate: %d row(s) of %s are impossible measurements or malformed (\"bad row\" above)\n",
                 bad_rows, a.silicon.c_str());
  return status;
}

}  // namespace servecast::cli
