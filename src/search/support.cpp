#include "search/support.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "perfdb/perf_database.h"
#include "search/search.h"
#include "serve/evaluate.h"

namespace servecast::search {

ProbePasses ProbeAt(std::int64_t batch, std::int64_t isl, std::int64_t osl) {
  ProbePasses p;
  p.context.context = true;
  p.context.batch = batch;
  p.context.seq = isl;
  p.generation.context = false;
  p.generation.batch = batch;
  p.generation.seq = isl + osl / 2;
  return p;
}

const char* SupportVerdictName(SupportVerdict v) {
  switch (v) {
    case SupportVerdict::kPass: return "PASS";
    case SupportVerdict::kPartial: return "PARTIAL";
    case SupportVerdict::kFail: return "FAIL";
  }
  return "FAIL";
}

namespace {

std::string FirstLine(const std::string& s) {
  const auto nl = s.find('\n');
  std::string out = nl == std::string::npos ? s : s.substr(0, nl);
  if (out.size() > 300) out = out.substr(0, 297) + "...";
  return out;
}

// The ops of a list that `db` cannot answer at every shape (one miss per op name).
std::vector<SupportMiss> Misses(const model::OpList& ops, const serve::Database& db, const SupportWorkload& w) {
  std::vector<SupportMiss> out;
  std::set<std::string> seen;
  auto run = [&](const std::vector<model::Op>& list, const serve::PassShape& shape) {
    for (const model::Op& op : list) {
      if (seen.count(op.name)) continue;
      try {
        // SILICON: an op of a table servecast cannot collect yet answers with its
        // roofline (EstimatorRead::uncollected), not a measured row: a miss here,
        // so such a model is never PASS (HYBRID answers it the same way).
        const serve::OpCost c = serve::EvaluateOp(op, db, shape);
        if (c.source == "roofline" && db.mode() == perfdb::DatabaseMode::kSilicon) {
          seen.insert(op.name);
          out.push_back({op.name, FirstLine(c.detail)});
        }
      } catch (const perfdb::MissingDataError& ex) {
        seen.insert(op.name);
        out.push_back({op.name, FirstLine(ex.what())});
      }
    }
  };
  for (std::int64_t b : w.batches) {
    const ProbePasses probe = ProbeAt(b, w.isl, w.osl);
    run(ops.context, probe.context);
    run(ops.generation, probe.generation);
  }
  return out;
}

std::string Join(const std::vector<SupportMiss>& misses, std::size_t max_items) {
  std::string s;
  for (std::size_t i = 0; i < misses.size() && i < max_items; ++i) {
    if (i) s += "; ";
    s += misses[i].op + ": " + misses[i].reason;
  }
  if (misses.size() > max_items) s += "; and " + std::to_string(misses.size() - max_items) + " more ops";
  return s;
}

}  // namespace

SupportConfig CheckConfig(const model::ModelConfig& m, const model::ParallelConfig& par,
                          const model::OpListOptions& oo, const serve::Database& silicon,
                          const serve::Database* hybrid, const SupportWorkload& w) {
  SupportConfig c;
  c.par = par;
  model::OpList ops;
  try {
    ops = model::BuildOpList(m, par, oo);
  } catch (const UsageError& ex) {
    c.invalid = FirstLine(ex.what());
    return c;
  }
  c.silicon_misses = Misses(ops, silicon, w);
  if (!c.silicon_misses.empty()) {
    if (hybrid) c.hybrid_misses = Misses(ops, *hybrid, w);
    else c.hybrid_misses = c.silicon_misses;
  }
  return c;
}

SupportReport Judge(model::Engine e, std::vector<SupportConfig> configs) {
  SupportReport r;
  r.engine = e;
  const SupportConfig* pass = nullptr;
  const SupportConfig* partial = nullptr;  // fewest ops falling back
  const SupportConfig* nearest = nullptr;  // fewest HYBRID misses
  std::string invalid;
  for (const SupportConfig& c : configs) {
    if (!c.invalid.empty()) {
      if (invalid.empty()) invalid = c.invalid;
      continue;
    }
    ++r.configs;
    if (c.silicon_misses.empty()) {
      ++r.configs_pass;
      if (!pass) pass = &c;
    } else if (c.hybrid_misses.empty()) {
      ++r.configs_partial;
      if (!partial || c.silicon_misses.size() < partial->silicon_misses.size()) partial = &c;
    } else if (!nearest || c.hybrid_misses.size() < nearest->hybrid_misses.size()) {
      nearest = &c;
    }
  }
  if (pass) {
    r.verdict = SupportVerdict::kPass;
    r.config = pass->par.ToString();
  } else if (partial) {
    r.verdict = SupportVerdict::kPartial;
    r.config = partial->par.ToString();
    for (const SupportMiss& s : partial->silicon_misses) r.fallbacks.push_back(s.op + ": " + s.reason);
    r.reason = std::to_string(partial->silicon_misses.size()) + " op(s) fall back to util-empirical (or to the roofline of a table not collected yet): " +
               Join(partial->silicon_misses, 3);
  } else if (nearest) {
    r.verdict = SupportVerdict::kFail;
    r.config = nearest->par.ToString();
    r.reason = Join(nearest->hybrid_misses, 3);
  } else {
    r.verdict = SupportVerdict::kFail;
    r.reason = invalid.empty() ? "no parallel configuration is valid for this model and engine" : invalid;
  }
  r.details = std::move(configs);
  return r;
}

SupportReport CheckSupport(const model::ModelConfig& m, model::Engine e, int gpus, const serve::Database& silicon,
                           const serve::Database* hybrid, const SupportWorkload& w) {
  model::OpListOptions oo;
  oo.engine = e;
  oo.gpus_per_node = silicon.spec().node.gpus_per_node;
  std::vector<SupportConfig> configs;
  std::string rejected;
  std::map<std::string, std::size_t> why;
  std::vector<model::ParallelConfig> pars;
  try {
    pars = EnumerateParallel(m, e, gpus, &why);
  } catch (const UsageError& ex) {
    SupportConfig c;
    c.invalid = FirstLine(ex.what());
    configs.push_back(c);
  }
  if (pars.empty() && !why.empty()) rejected = why.begin()->first;
  for (const model::ParallelConfig& p : pars) configs.push_back(CheckConfig(m, p, oo, silicon, hybrid, w));
  if (configs.empty() && !rejected.empty()) {
    SupportConfig c;
    c.invalid = rejected;
    configs.push_back(c);
  }
  SupportReport r = Judge(e, std::move(configs));
  r.data = silicon.source();
  return r;
}

}  // namespace servecast::search
