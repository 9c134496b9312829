#include "collect/summary.h"

#include <cstdio>
#include <filesystem>
#include <set>
#include <unordered_map>

#include "core/fs.h"

namespace servecast::collect {

bool RunSummary::ok() const { return failures == 0; }

RunSummary Summarize(const Plan& plan, const std::vector<JournalRecord>& records) {
  RunSummary s;
  std::unordered_map<std::string, const JournalRecord*> latest;
  std::unordered_map<std::string, bool> failed_before;
  for (const auto& r : records) {
    auto it = latest.find(r.id);
    if (it != latest.end() && IsFailure(it->second->status)) failed_before[r.id] = true;
    latest[r.id] = &r;
  }
  for (const auto& op : plan.ops) s.ops[op].stages = plan.counts.at(op);
  for (const auto& d : plan.dropped) {
    OpSummary& o = s.ops[d.c.op];
    if (d.stage == "requirements") {
      o.by_status["not_supported"]++;
      o.skipped_by_reason["not_supported: " + d.reason]++;
    } else {
      o.by_status["skipped"]++;
      o.skipped_by_reason[d.stage + ": " + d.reason]++;
    }
  }
  for (const auto& c : plan.cases) {
    OpSummary& o = s.ops[c.op];
    auto it = latest.find(c.id);
    if (it == latest.end()) {
      ++o.not_run;
      continue;
    }
    const JournalRecord& r = *it->second;
    o.by_status[std::string(ToString(r.status))]++;
    o.rows += r.rows.size();
    if (r.status == Disposition::kSkipped) o.skipped_by_reason[r.error_type + ": " + r.message]++;
    if (IsFailure(r.status)) {
      o.errors.push_back(&r);
      o.errors_by_class[std::string(ToString(r.failure_class))]++;
    } else if (r.status == Disposition::kPassed && failed_before.count(c.id)) {
      o.transient.push_back(&r);
      o.errors_by_class["transient"]++;
    }
  }
  for (auto& [op, o] : s.ops) {
    s.failures += o.errors.size() + o.not_run;
    // A planned op that produced no rows is a failure, unless this shard simply
    // received none of its cases, or the plan dropped every case of the op for a
    // declared reason (e.g. a multi-GPU op on a run with fewer --gpus): nothing of
    // it was planned, and the reasons are in skipped_by_reason.
    bool empty_shard = o.stages.supported > 0 && o.stages.after_shard == 0;
    bool all_dropped = o.stages.supported == 0 && o.stages.selected > 0;
    o.zero_rows = o.rows == 0 && !empty_shard && !all_dropped;
    if (o.zero_rows) ++s.failures;
  }
  return s;
}

void WriteSummaryFiles(const std::string& run_dir, const JournalHeader& h, const Plan& plan, const RunSummary& s,
                       const Json& extra) {
  Json ops = Json::object();
  Json systemic = Json::array();
  Json all_errors = Json::array();
  for (const auto& [op, o] : s.ops) {
    Json stages{{"raw", o.stages.raw},
                {"selected", o.stages.selected},
                {"after_skips", o.stages.after_skips},
                {"after_maturity", o.stages.after_maturity},
                {"supported", o.stages.supported},
                {"after_shard", o.stages.after_shard},
                {"final", o.stages.final}};
    Json status = Json::object();
    for (const auto& [k, n] : o.by_status) status[k] = n;
    Json reasons = Json::object();
    for (const auto& [k, n] : o.skipped_by_reason) reasons[k] = n;
    Json classes = Json::object();
    for (const auto& [k, n] : o.errors_by_class) {
      classes[k] = n;
      if (n >= kSystemicThreshold && k != "transient")
        systemic.push_back(Json{{"op", op}, {"class", k}, {"count", n}, {"note", "systemic: fix before a full run"}});
    }
    ops[op] = Json{{"plan", stages}, {"cases", status}, {"rows", o.rows}, {"not_run", o.not_run},
                   {"zero_rows", o.zero_rows}, {"skipped_by_reason", reasons}, {"errors_by_class", classes}};

    Json errs = Json::array();
    for (const JournalRecord* r : o.errors) {
      Json e{{"op", op},
             {"case_id", r->id},
             {"params", ParamsToJson(r->params)},
             {"status", std::string(ToString(r->status))},
             {"classification", std::string(ToString(r->failure_class))},
             {"error_type", r->error_type},
             {"message", r->message},
             {"worker", r->worker},
             {"at", r->at}};
      errs.push_back(e);
      all_errors.push_back(e);
    }
    for (const JournalRecord* r : o.transient)
      errs.push_back(Json{{"op", op}, {"case_id", r->id}, {"params", ParamsToJson(r->params)},
                          {"status", "passed"}, {"classification", "transient"},
                          {"message", "failed in an earlier attempt, passed on retry"}, {"at", r->at}});
    std::string path = run_dir + "/errors_" + h.backend + "." + op + ".json";
    if (!errs.empty()) WriteFileAtomic(path, errs.dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
    else std::filesystem::remove(path);
  }
  Json doc{{"summary",
            {{"backend", h.backend},
             {"version", h.version},
             {"device", h.device},
             {"arch", h.arch},
             {"sm", h.sm},
             {"system", h.system},
             {"plan_hash", "sha256:" + h.plan_hash},
             {"shard", std::to_string(h.shard_index) + "/" + std::to_string(h.shard_count)},
             {"planned", plan.cases.size()},
             {"failures", s.failures},
             {"systemic", systemic}}},
           {"ops", ops},
           {"errors", all_errors}};
  for (auto it = extra.begin(); it != extra.end(); ++it) doc["summary"][it.key()] = it.value();
  WriteFileAtomic(run_dir + "/collection_summary_" + h.backend + ".json",
                  doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
}

std::string FormatSummary(const Plan& plan, const RunSummary& s) {
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%-22s %8s %8s %8s %8s %8s %8s %8s %8s\n", "op", "planned", "passed", "failed",
                "timeout", "crashed", "skipped", "unsupp", "rows");
  out += buf;
  for (const auto& op : plan.ops) {
    const OpSummary& o = s.ops.at(op);
    auto get = [&](const char* k) {
      auto it = o.by_status.find(k);
      return it == o.by_status.end() ? std::size_t{0} : it->second;
    };
    std::snprintf(buf, sizeof(buf), "%-22s %8lld %8zu %8zu %8zu %8zu %8zu %8zu %8zu%s\n", op.c_str(),
                  static_cast<long long>(o.stages.final), get("passed"), get("failed") + get("incorrect"),
                  get("timeout"), get("crashed"), get("skipped"), get("not_supported"), o.rows,
                  o.zero_rows ? "  <- planned but produced no rows" : (o.not_run ? "  <- not finished" : ""));
    out += buf;
    for (const auto& [cls, n] : o.errors_by_class) {
      std::snprintf(buf, sizeof(buf), "    %-18s %zu%s\n", cls.c_str(), n,
                    n >= kSystemicThreshold && cls != "transient" ? "  (systemic)" : "");
      out += buf;
    }
  }
  return out;
}

}  // namespace servecast::collect
