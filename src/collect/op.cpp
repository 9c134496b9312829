#include "collect/op.h"

#include "collect/expr.h"
#include "core/error.h"
#include "core/version.h"

namespace servecast::collect {

std::optional<std::string> Requirement::Check(const RuntimeInfo& rt, const Params& params) const {
  if (!gpus_param.empty() && params.Has(gpus_param)) {
    const auto need = static_cast<int>(params.Num(gpus_param));
    if (rt.gpus_exact && need != rt.gpus)
      return "needs " + std::to_string(need) + " GPUs; the launcher started " + std::to_string(rt.gpus) +
             " ranks, and a launched run collects only cases that span all of them";
    if (need > rt.gpus)
      return "needs " + std::to_string(need) + " GPUs; this run has " + std::to_string(rt.gpus) + " (--gpus)";
  }
  if (!library.empty()) {
    auto it = rt.libraries.find(library);
    if (it == rt.libraries.end())
      return "requires " + library + (min_version.empty() ? "" : " >= " + min_version) + "; found no " + library +
             " in the runtime";
    if (!min_version.empty() && Version::Parse(it->second) < Version::Parse(min_version))
      return "requires " + library + " >= " + min_version + "; found " + it->second;
  }
  if (!feature.empty() && !rt.features.count(feature)) {
    std::string have;
    for (const auto& f : rt.features) have += (have.empty() ? "" : ", ") + f;
    return "requires the feature '" + feature + "'; the runtime (" + rt.backend + " " + rt.version +
           ") has " + (have.empty() ? "none" : have);
  }
  if (min_sm > 0 && rt.sm < min_sm) return "requires SM >= " + std::to_string(min_sm) + "; found SM " + std::to_string(rt.sm);
  if (max_sm > 0 && rt.sm > max_sm) return "requires SM <= " + std::to_string(max_sm) + "; found SM " + std::to_string(rt.sm);
  return std::nullopt;
}

CaseResult CaseResult::Passed(std::vector<Params> rows) {
  CaseResult r;
  r.disposition = Disposition::kPassed;
  r.rows = std::move(rows);
  return r;
}

CaseResult CaseResult::Failure(Disposition d, FailureClass c, std::string type, std::string message) {
  CaseResult r;
  r.disposition = d;
  r.failure_class = c;
  r.error_type = std::move(type);
  r.message = std::move(message);
  return r;
}

Params MakeRow(const TableSpec& table, const RuntimeInfo& rt, const std::string& op_name,
               const std::string& kernel_source, const Params& key, const TimingStats& stats, bool with_power,
               const Params& extra) {
  Params row;
  row.Set("framework", rt.backend);
  row.Set("version", rt.version);
  row.Set("device", rt.device_name);
  row.Set("op_name", op_name);
  row.Set("kernel_source", kernel_source);
  for (const auto& col : table.key_columns) {
    const Value& v = key.Get(col.name);
    if (col.type == ValueType::kDouble && TypeOf(v) == ValueType::kInt64)
      row.Set(col.name, static_cast<double>(std::get<std::int64_t>(v)));
    else if (TypeOf(v) != col.type)
      throw Error(table.name + ": key column '" + col.name + "' expects " + TypeName(col.type) + ", got " +
                  TypeName(TypeOf(v)) + " '" + ToString(v) + "'");
    else
      row.Set(col.name, v);
  }
  row.Set("latency", stats.median_ms);
  row.Set("latency_p10", stats.p10_ms);
  row.Set("latency_p90", stats.p90_ms);
  row.Set("samples", static_cast<std::int64_t>(stats.samples));
  row.Set("rsd", stats.rsd);
  row.Set("timing", stats.method);
  row.Set("l2", stats.l2);
  row.Set("clock_mhz_before", stats.clock_mhz_before);
  row.Set("clock_mhz_after", stats.clock_mhz_after);
  row.Set("throttled", static_cast<std::int64_t>(stats.throttled ? 1 : 0));
  for (const auto& col : table.extra_columns) {
    if (!extra.Has(col.name)) throw Error(table.name + ": the op gave no value for column '" + col.name + "'");
    row.Set(col.name, extra.Get(col.name));
  }
  if (with_power) {
    row.Set("power", stats.power_w);
    row.Set("power_limit", stats.power_limit_w);
  }
  return row;
}

}  // namespace servecast::collect
