// Parity with AIConfigurator's own estimator: every case and surface of AIC's
// frozen engine-step goldens (../shared/reference/aic-goldens/cases.json), run
// through our library (model op lists, perf database on AIC's tables read
// unchanged, static / mixed / decode steps, agg and disagg serving with AIC's
// engine constants) and compared at AIC's tolerance. docs/parity.md lists every
// value; SERVECAST_PARITY_REPORT=<file> makes this test write that table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/ops.h"
#include "perfdb/modes.h"
#include "serve/agg.h"
#include "serve/database.h"
#include "serve/engine_profile.h"
#include "serve/session.h"
#include "serve/static.h"
#include "system/system_spec.h"
#include "shared_data.h"

namespace servecast::serve {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const std::string kSource = SERVECAST_SOURCE_DIR;
const std::string kShared = SERVECAST_SHARED_DIR;
const std::string kCases = kShared + "/reference/aic-goldens/cases.json";
const std::string kAicData = kShared + "/reference/aic-parquet";

// One compared (or deliberately excluded) number.
struct Row {
  std::string case_name, surface, field;
  double aic = 0, ours = NAN;
  double rtol = 0;
  std::string status;  // "pass", "FAIL", "excluded: <why>"
};

std::mutex g_rows_mu;
std::vector<Row> g_rows;

const Json& Cases() {
  static const Json cases = [] {
    std::ifstream in(kCases);
    return in ? Json::parse(in) : Json::array();
  }();
  return cases;
}

std::vector<std::string> CaseNames() {
  std::vector<std::string> out;
  for (const auto& c : Cases()) out.push_back(c.at("name").get<std::string>());
  if (out.empty()) out.push_back("no_reference_files");
  return out;
}

double Round3(double v) { return std::round(v * 1000.0) / 1000.0; }

int IntOr(const Json& j, const char* key, int fallback) {
  return j.contains(key) && j.at(key).is_number() ? j.at(key).get<int>() : fallback;
}

perfdb::DatabaseMode ModeOf(const std::string& aic_mode) {
  std::string m = aic_mode;
  std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return perfdb::ParseDatabaseMode(m);
}

// The deployment and data of one surface, built as `servecast estimate` builds them.
struct CaseData {
  std::optional<Deployment> deployment;
  model::ModelConfig model;  // the deployment's, quantization settled for the data
  model::OpListOptions oo;
  const Database* db = nullptr;
  EngineProfile engine;
};

model::ParallelConfig Parallel(bool dense, int tp, int pp, int dp, int moe_tp, int moe_ep) {
  model::ParallelConfig p;
  p.tp = tp;
  p.pp = pp;
  if (dense) {  // AIC ignores the MoE fields of a dense model (the goldens pass moe_ep 8)
    p.dp = 1;
    p.moe_tp = 1;
    p.moe_ep = tp;
  } else {
    p.dp = dp;
    p.moe_tp = moe_tp;
    p.moe_ep = moe_ep;
  }
  return p;
}

// Opens the data for `pars` (one parallel config, or prefill + decode) and returns
// their op lists, built after the data settled the quantization as the CLI does.
std::vector<model::OpList> Open(CaseData& s, const Json& c, const Json& inputs,
                                const std::vector<model::ParallelConfig>& pars) {
  const systems::SystemSpec spec = systems::LoadSystemByName(kSource + "/systems", c.at("system").get<std::string>());
  // Quant modes are inferred from the checkpoint; only the HYBRID cases force the MoE quant.
  model::QuantOverrides ov;
  if (c.at("database_mode") == "HYBRID" && c.at("model_kind") == "moe") ov.moe = inputs.at("moe_quant").get<std::string>();
  Deployment& d =
      s.deployment.emplace(model::LoadModel(c.at("model_hf_id").get<std::string>(), kSource + "/models"), spec, ov);
  s.oo = OpOptionsFor(model::ParseEngine(c.at("backend").get<std::string>()), spec);
  DatabaseOptions dbo;
  dbo.roots = {kAicData};
  dbo.backend = c.at("backend").get<std::string>();
  dbo.version = c.at("version").get<std::string>();
  dbo.mode = ModeOf(c.at("database_mode").get<std::string>());
  if (c.contains("transfer_policy") && c.at("transfer_policy").is_string())
    dbo.policy = perfdb::ParseTransferPolicy(c.at("transfer_policy").get<std::string>());
  s.db = &d.OpenData(dbo, d.Needs(pars, s.oo));
  s.model = d.model();
  std::vector<model::OpList> ops;
  for (const auto& p : pars) ops.push_back(d.Ops(p, s.oo));
  s.engine = LoadEngineProfileByName(kSource + "/engines", s.oo.engine, "aic");
  return ops;
}

bool IsEnergyField(const std::string& field) {
  return field.find("energy") != std::string::npos || field.find("power") != std::string::npos;
}

class AicParity : public ::testing::TestWithParam<std::string> {
 protected:
  void Compare(const std::string& surface, const std::string& field, double aic, double ours, bool rounded) {
    Row r{name_, surface, field, aic, rounded ? Round3(ours) : ours, rtol_, ""};
    const double tol = std::max(std::abs(aic) * rtol_, 1e-9);
    const bool ok = std::isfinite(r.ours) && std::abs(r.ours - aic) <= tol;
    r.status = ok ? "pass" : "FAIL";
    EXPECT_TRUE(ok) << name_ << " " << surface << " " << field << ": AIC " << aic << ", ours " << r.ours
                    << " (rtol " << rtol_ << ")";
    Record(std::move(r));
  }
  void Exclude(const std::string& surface, const std::string& field, double aic, const std::string& why) {
    std::printf("[ EXCLUDED ] %s %s %s (AIC %.6g): %s\n", name_.c_str(), surface.c_str(), field.c_str(), aic,
                why.c_str());
    Record(Row{name_, surface, field, aic, NAN, rtol_, "excluded: " + why});
  }
  void Failed(const std::string& surface, const Json& outputs, const std::string& what) {
    for (const auto& [field, v] : outputs.items()) {
      if (!v.is_number()) continue;
      ADD_FAILURE() << name_ << " " << surface << " " << field << ": AIC " << v.get<double>() << ", ours: error "
                    << what;
      Record(Row{name_, surface, field, v.get<double>(), NAN, rtol_, "FAIL: " + what});
    }
  }
  static void Record(Row r) {
    std::lock_guard<std::mutex> lock(g_rows_mu);
    g_rows.push_back(std::move(r));
  }

  void RunStaticSurface(const Json& c, const Json& s, const std::string& surface, bool rounded) {
    const Json& in = s.at("inputs");
    const bool dense = c.at("model_kind") == "dense";
    const auto par = Parallel(dense, in.at("tp"), IntOr(in, "pp", 1), IntOr(in, "dp", 1), IntOr(in, "moe_tp", 1),
                              IntOr(in, "moe_ep", 1));
    CaseData st;
    const auto ops = Open(st, c, in, {par});
    Workload w;
    w.batch = in.at("batch_size");
    w.isl = in.at("isl");
    w.osl = in.at("osl");
    w.prefix = IntOr(in, "prefix", 0);
    w.stride = IntOr(in, "stride", 1);
    const StaticEstimate r = RunStatic(st.model, par, ops[0], *st.db, st.engine, w);
    const double ctx = r.context.latency_ms, gen = r.generation.latency_ms;
    for (const auto& [field, v] : s.at("outputs").items()) {
      const double aic = v.get<double>();
      if (field == "static_ctx") Compare(surface, field, aic, ctx, rounded);
      else if (field == "static_gen") Compare(surface, field, aic, gen, rounded);
      else if (field == "static_total") Compare(surface, field, aic, ctx + gen, rounded);
      else if (field == "mixed_step" || field == "decode_step") {
        StepInputs si;
        si.isl = in.at("isl");
        si.osl = std::max<std::int64_t>(in.at("osl").get<std::int64_t>(), 2);
        si.prefix = IntOr(in, "prefix", 0);
        if (field == "mixed_step") {
          si.ctx_tokens = si.isl;
          si.gen_tokens = in.at("batch_size");
          Compare(surface, field, aic, MixedStep(ops[0], *st.db, si).latency_ms, false);
        } else {
          si.gen_tokens = IntOr(in, "decode_step_gen_tokens", in.at("batch_size").get<int>());
          Compare(surface, field, aic, DecodeStep(ops[0], *st.db, si).latency_ms, false);
        }
      } else if (IsEnergyField(field)) {
        // Sums of per-op energy (W*ms) and energy / unrounded phase latency (W);
        // AIC's goldens carry them unrounded.
        if (field == "static_ctx_energy") Compare(surface, field, aic, r.context.energy_wms, false);
        else if (field == "static_gen_energy") Compare(surface, field, aic, r.generation.energy_wms, false);
        else if (field == "static_ctx_power") Compare(surface, field, aic, r.context.PowerW(), false);
        else if (field == "static_gen_power") Compare(surface, field, aic, r.generation.PowerW(), false);
        else ADD_FAILURE() << name_ << " " << surface << ": unknown output field " << field;
      } else {
        ADD_FAILURE() << name_ << " " << surface << ": unknown output field " << field;
      }
    }
  }

  void RunMixed(const Json& c, const Json& s) {
    const Json& in = s.at("inputs");
    const bool dense = c.at("model_kind") == "dense";
    const auto par = Parallel(dense, in.at("tp"), IntOr(in, "pp", 1), IntOr(in, "dp", 1), IntOr(in, "moe_tp", 1),
                              IntOr(in, "moe_ep", 1));
    CaseData st;
    const auto ops = Open(st, c, in, {par});
    StepInputs si;
    si.ctx_tokens = in.at("ctx_tokens");
    si.gen_tokens = in.at("gen_tokens");
    si.isl = in.at("isl");
    si.osl = std::max<std::int64_t>(in.at("osl").get<std::int64_t>(), 2);
    si.prefix = IntOr(in, "prefix", 0);
    Compare("mixed", "mixed_step", s.at("outputs").at("mixed_step"), MixedStep(ops[0], *st.db, si).latency_ms, false);
  }

  void RunAggSurface(const Json& c, const Json& s) {
    const Json& in = s.at("inputs");
    const bool dense = c.at("model_kind") == "dense";
    const auto par = Parallel(dense, in.at("tp"), IntOr(in, "pp", 1), IntOr(in, "dp", 1), IntOr(in, "moe_tp", 1),
                              IntOr(in, "moe_ep", 1));
    CaseData st;
    const auto ops = Open(st, c, in, {par});
    AggInputs ai;
    ai.batch = in.at("batch_size");
    ai.ctx_tokens = in.at("ctx_tokens");
    ai.isl = in.at("isl");
    ai.osl = in.at("osl");
    ai.prefix = IntOr(in, "prefix", 0);
    const AggEstimate r = RunAgg(st.model, par, ops[0], *st.db, st.engine, ai);
    const Json& out = s.at("outputs");
    Compare("agg", "agg_ttft", out.at("agg_ttft"), r.ttft_ms, false);
    Compare("agg", "agg_tpot", out.at("agg_tpot"), r.tpot_ms, false);
    Compare("agg", "agg_request", out.at("agg_request"), r.request_latency_ms, false);
  }

  void RunDisaggSurface(const Json& c, const Json& s) {
    const Json& in = s.at("inputs");
    const bool dense = c.at("model_kind") == "dense";
    const auto pre = Parallel(dense, in.at("prefill_tp"), IntOr(in, "prefill_pp", 1), IntOr(in, "prefill_dp", 1),
                              IntOr(in, "prefill_moe_tp", 1), IntOr(in, "prefill_moe_ep", 1));
    const auto dec = Parallel(dense, in.at("decode_tp"), IntOr(in, "decode_pp", 1), IntOr(in, "decode_dp", 1),
                              IntOr(in, "decode_moe_tp", 1), IntOr(in, "decode_moe_ep", 1));
    CaseData st;
    const auto ops = Open(st, c, in, {pre, dec});
    DisaggInputs di;
    di.isl = in.at("isl");
    di.osl = in.at("osl");
    di.prefix = IntOr(in, "prefix", 0);
    di.prefill_batch = in.at("prefill_batch");
    di.decode_batch = in.at("decode_batch");
    di.prefill_workers = IntOr(in, "prefill_workers", 1);
    di.decode_workers = IntOr(in, "decode_workers", 1);
    di.stride = 1;
    const DisaggEstimate r = RunDisagg(st.model, pre, ops[0], dec, ops[1], *st.db, st.engine, di);
    const Json& out = s.at("outputs");
    Compare("disagg", "disagg_ttft", out.at("disagg_ttft"), r.ttft_ms, true);
    Compare("disagg", "disagg_tpot", out.at("disagg_tpot"), r.tpot_ms, true);
    Compare("disagg", "disagg_request", out.at("disagg_request"), r.request_latency_ms, true);
  }

  void RunPerOp(const Json& c, const Json& s) {
    const Json& in = s.at("inputs");
    const bool dense = c.at("model_kind") == "dense";
    const auto par = Parallel(dense, in.at("tp"), IntOr(in, "pp", 1), IntOr(in, "dp", 1), IntOr(in, "moe_tp", 1),
                              IntOr(in, "moe_ep", 1));
    CaseData st;
    const auto ops = Open(st, c, in, {par});
    Workload w;
    w.batch = in.at("batch_size");
    w.isl = in.at("isl");
    w.osl = in.at("osl");
    w.prefix = IntOr(in, "prefix", 0);
    w.stride = IntOr(in, "stride", 1);
    const StaticEstimate r = RunStatic(st.model, par, ops[0], *st.db, st.engine, w);
    for (const auto* phase : {"context", "generation"}) {
      const PhaseEstimate& pe = std::string(phase) == "context" ? r.context : r.generation;
      std::map<std::string, double> ours, ours_energy;
      for (const auto& l : pe.ops) {
        ours[l.name] += l.latency_ms;
        ours_energy[l.name] += l.energy_wms;
      }
      const Json& golden = s.at("outputs").at(phase);
      for (const auto& [op, v] : golden.items()) {
        const double aic = v.at("latency_ms");
        const std::string surface = std::string("per_op.") + phase;
        auto it = ours.find(op);
        // AIC lists ops that cost nothing at this shape (p2p at pp = 1); we omit them.
        Compare(surface, op + ".latency_ms", aic, it == ours.end() ? 0.0 : it->second, false);
        // Energy of every op, zeros included (formula ops, rows without power).
        if (v.contains("energy_wms")) {
          auto e = ours_energy.find(op);
          Compare(surface, op + ".energy_wms", v.at("energy_wms"), e == ours_energy.end() ? 0.0 : e->second, false);
        }
      }
      for (const auto& [op, lat] : ours) {
        if (golden.contains(op)) continue;
        const std::string surface = std::string("per_op.") + phase;
        Compare(surface, op + ".latency_ms (not in AIC)", 0.0, lat, false);
      }
    }
  }

  std::string name_;
  double rtol_ = 0;
};

TEST_P(AicParity, EverySurface) {
  SERVECAST_NEED_SHARED(fs::exists(kCases), "no AIC reference files at " + std::string(kCases) + " (../shared is absent)");
  const Json* found = nullptr;
  for (const auto& c : Cases())
    if (c.at("name") == GetParam()) found = &c;
  ASSERT_NE(found, nullptr) << GetParam();
  const Json& c = *found;
  name_ = GetParam();
  rtol_ = c.at("tolerance_rtol");
  for (const auto& [surface, s] : c.at("surfaces").items()) {
    SCOPED_TRACE(name_ + " " + surface);
    try {
      if (surface == "static") RunStaticSurface(c, s, "static", true);
      else if (surface == "compile_engine") RunStaticSurface(c, s, "compile_engine", false);
      else if (surface == "mixed") RunMixed(c, s);
      else if (surface == "agg") RunAggSurface(c, s);
      else if (surface == "disagg") RunDisaggSurface(c, s);
      else if (surface == "per_op") RunPerOp(c, s);
      else ADD_FAILURE() << "unknown surface " << surface;
    } catch (const std::exception& e) {
      Failed(surface, s.at("outputs"), e.what());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Goldens, AicParity, ::testing::ValuesIn(CaseNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

// Writes every row as a markdown table when SERVECAST_PARITY_REPORT names a file.
class ReportWriter : public ::testing::Environment {
 public:
  void TearDown() override {
    const char* path = std::getenv("SERVECAST_PARITY_REPORT");
    if (path == nullptr || g_rows.empty()) return;
    std::ofstream out(path);
    int pass = 0, fail = 0, excluded = 0;
    for (const auto& r : g_rows) (r.status == "pass" ? pass : r.status.rfind("excluded", 0) == 0 ? excluded : fail)++;
    out << "Compared: " << pass + fail << " values, " << pass << " pass, " << fail << " fail; " << excluded
        << " excluded.\n\n";
    out << "| case | surface | field | AIC | ours | ours − AIC | rel. diff | rtol | status |\n";
    out << "|---|---|---|---:|---:|---:|---:|---:|---|\n";
    char buf[512];
    for (const auto& r : g_rows) {
      if (std::isnan(r.ours)) {
        std::snprintf(buf, sizeof buf, "| %s | %s | %s | %.6g | — | — | — | %g | %s |\n", r.case_name.c_str(),
                      r.surface.c_str(), r.field.c_str(), r.aic, r.rtol, r.status.c_str());
      } else {
        const double rel = r.aic != 0 ? (r.ours - r.aic) / std::abs(r.aic) : 0.0;
        std::snprintf(buf, sizeof buf, "| %s | %s | %s | %.6f | %.6f | %+.2e | %+.2e | %g | %s |\n",
                      r.case_name.c_str(), r.surface.c_str(), r.field.c_str(), r.aic, r.ours, r.ours - r.aic, rel,
                      r.rtol, r.status.c_str());
      }
      out << buf;
    }
  }
};
const auto* const kReport = ::testing::AddGlobalTestEnvironment(new ReportWriter);

}  // namespace
}  // namespace servecast::serve
