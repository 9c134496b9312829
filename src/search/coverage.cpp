#include "search/coverage.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <tuple>

#include "core/error.h"
#include "core/yaml_util.h"
#include "model/family.h"
#include "perfdb/perf_database.h"
#include "search/search.h"
#include "search/support.h"
#include "serve/evaluate.h"
#include "serve/session.h"
#include "tables/table_spec.h"

namespace servecast::search {
namespace {

using Key = std::vector<std::pair<std::string, std::string>>;

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string KeyString(const Key& key) {
  std::string out;
  for (const auto& [column, value] : key) out += (out.empty() ? "" : ", ") + column + "=" + value;
  return out;
}

std::string FirstLine(const std::string& s) {
  const auto nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

std::string KeyNames(const tables::TableSpec& spec) {
  std::string out;
  for (const std::string& c : spec.KeyColumnNames()) out += (out.empty() ? "" : ", ") + c;
  return out;
}

std::string Str(std::int64_t v) {
  return std::to_string(v);
}

// Every column of `gap` has the miss's value.
bool KeyMatches(const Key& gap, const Key& miss) {
  for (const auto& [column, value] : gap) {
    auto it = std::find_if(miss.begin(), miss.end(), [&](const auto& kv) { return kv.first == column; });
    if (it == miss.end() || it->second != value) return false;
  }
  return true;
}

bool GapMatches(const CoverageGap& g, const CoverageMiss& m, const std::string& engine) {
  if (Lower(g.model) != Lower(m.model)) return false;
  if (!g.engines.empty() && std::find(g.engines.begin(), g.engines.end(), engine) == g.engines.end()) return false;
  if (g.unsupported) return m.table.empty();
  return g.table == m.table && KeyMatches(g.key, m.key);
}

// The misses of one engine's configuration, merged into `out` by (model, table, key).
class MissSink {
 public:
  explicit MissSink(std::vector<CoverageMiss>& out) : out_(out) {}
  void Add(const std::string& model, const std::string& engine, const std::string& config, const std::string& op,
           const OpLookup& lookup, const std::string& reason) {
    CoverageMiss* m = nullptr;
    for (CoverageMiss& c : out_)
      if (c.model == model && c.table == lookup.table && c.key == lookup.key) m = &c;
    if (m == nullptr) {
      out_.push_back({});
      m = &out_.back();
      m->model = model;
      m->table = lookup.table;
      m->key = lookup.key;
      m->reason = FirstLine(reason);
    }
    m->engines.insert(engine);
    if (!op.empty()) m->ops.insert(op);
    if (!config.empty()) m->configs[engine].insert(config);
  }

 private:
  std::vector<CoverageMiss>& out_;
};

}  // namespace

std::string OpLookup::KeyText() const {
  return KeyString(key);
}

std::string CoverageMiss::KeyText() const {
  return KeyString(key);
}

OpLookup LookupOf(const model::Op& op) {
  using model::OpKind;
  switch (op.kind) {
    case OpKind::kGemm:
      return {"gemm_perf", {{"gemm_dtype", op.quant}, {"n", Str(op.n)}, {"k", Str(op.k)}}};
    case OpKind::kContextAttention:
    case OpKind::kGenerationAttention:
      return {op.kind == OpKind::kContextAttention ? "context_attention_perf" : "generation_attention_perf",
              {{"num_heads", Str(op.heads)},
               {"num_key_value_heads", Str(op.kv_heads)},
               {"head_dim", Str(op.head_dim)},
               {"window_size", Str(op.window)},
               {"attn_dtype", op.fmha_quant},
               {"kv_cache_dtype", op.kv_quant}}};
    case OpKind::kMoe:
      return {"moe_perf",
              {{"moe_dtype", op.quant},
               {"hidden_size", Str(op.hidden)},
               {"inter_size", Str(op.inter)},
               {"topk", Str(op.topk)},
               {"num_experts", Str(op.experts)},
               {"moe_tp_size", Str(op.moe_tp)},
               {"moe_ep_size", Str(op.moe_ep)},
               {"distribution", op.distribution}}};
    case OpKind::kNccl:
      return {"nccl_perf", {{"op_name", op.collective}, {"nccl_dtype", op.comm_dtype}, {"num_gpus", Str(op.gpus)}}};
    case OpKind::kCustomAllReduce:
      return {"custom_allreduce_perf", {{"allreduce_dtype", op.comm_dtype}, {"num_gpus", Str(op.gpus)}}};
    case OpKind::kElementwise:
    case OpKind::kEmbedding:
      // No measured op (Gated DeltaNet's gated norm, relu2): the memory formula, no table.
      if (op.measured_op.empty()) return {model::OpKindName(op.kind), {}};
      return {"elementwise_perf", {{"op_name", op.measured_op}, {"hidden_size", Str(op.measured_width)}}};
    case OpKind::kTable: {  // a declared table: the op's fixed key columns
      OpLookup l{op.table, {}};
      for (const auto& [column, value] : op.table_key.items()) l.key.emplace_back(column, ToString(value));
      return l;
    }
    default: {
      // An op kind this function has no key for yet: the table "<kind>_perf" when
      // one is declared (gaps then name the table alone), else the kind's name
      // (p2p: no table).
      const std::string table = std::string(model::OpKindName(op.kind)) + "_perf";
      return {tables::FindTableSpec(table) != nullptr ? table : std::string(model::OpKindName(op.kind)), {}};
    }
  }
}

std::vector<CoverageGap> LoadCoverageGaps(const std::string& file, const std::vector<std::string>& models) {
  YamlReader top(file, LoadYamlFile(file));
  top.AllowOnlyKeys({"gaps"});
  const YAML::Node list = top.node()["gaps"];
  if (!list.IsDefined() || !list.IsSequence())
    throw ConfigError(top.Where("gaps"), "missing or not a list", "gaps: [{model, table, key, issue, reason}, ...]");
  std::vector<CoverageGap> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string path = "gaps[" + std::to_string(i) + "]";
    if (!list[i].IsMap())
      throw ConfigError(YamlWhere(file, list[i], path), "not a mapping", "{model, table, key, issue, reason}");
    YamlReader r(file, list[i], path);
    r.AllowOnlyKeys({"model", "engines", "unsupported", "table", "key", "issue", "reason"});
    CoverageGap g;
    g.line = r.Where().line;
    g.model = r.RequiredString("model");
    bool bundled = false;
    for (const std::string& m : models) bundled = bundled || Lower(m) == Lower(g.model);
    if (!bundled)
      throw ConfigError(r.Where("model"), "'" + g.model + "' is not a bundled model", "an HF id of models/");
    g.engines = r.StringList("engines");
    for (const std::string& e : g.engines)
      if (e != "trtllm" && e != "vllm" && e != "sglang")
        throw ConfigError(r.Where("engines"), "unknown engine '" + e + "'", "trtllm, vllm or sglang");
    g.unsupported = r.OptionalBool("unsupported", false);
    g.table = r.OptionalString("table", "");
    if (g.unsupported == !g.table.empty())
      throw ConfigError(r.Where(), g.unsupported ? "both unsupported and table" : "neither table nor unsupported",
                        "table: <name> (a lookup that misses) or unsupported: true (the model cannot be estimated)");
    if (!g.table.empty() && tables::FindTableSpec(g.table) == nullptr)
      throw ConfigError(r.Where("table"), "unknown table '" + g.table + "'", "a table of tables/table_spec.cpp");
    if (r.Has("key")) {
      if (g.unsupported) throw ConfigError(r.Where("key"), "a key with unsupported: true", "a key only with table");
      const YAML::Node k = list[i]["key"];
      if (!k.IsMap()) throw ConfigError(r.Where("key"), "not a mapping", "{column: value, ...}");
      const tables::TableSpec* spec = tables::FindTableSpec(g.table);
      for (const auto& kv : k) {
        const std::string column = kv.first.as<std::string>();
        const std::string value = YamlToString(file, kv.second, path + ".key." + column);
        bool declared = column == "op_name";
        if (spec != nullptr)
          for (const auto& c : spec->key_columns) declared = declared || c.name == column;
        if (!declared)
          throw ConfigError(YamlWhere(file, kv.first, path + ".key." + column),
                            "'" + column + "' is not a key column of " + g.table,
                            spec ? "op_name or one of " + KeyNames(*spec) : "a declared table (tables/table_spec.cpp)");
        g.key.emplace_back(column, value);
      }
    }
    g.issue = r.OptionalInt("issue", 0);
    if (r.Has("issue") && g.issue < 1) throw ConfigError(r.Where("issue"), "not a positive number", "an issue number");
    g.reason = r.OptionalString("reason", "");
    if (g.issue == 0 && g.reason.empty())
      throw ConfigError(r.Where(), "neither issue nor reason", "the issue that tracks the gap, or why it is accepted");
    for (const CoverageGap& o : out)
      if (Lower(o.model) == Lower(g.model) && o.engines == g.engines && o.unsupported == g.unsupported &&
          o.table == g.table && o.key == g.key)
        throw ConfigError(r.Where(), "the same gap as line " + std::to_string(o.line), "each gap once");
    out.push_back(std::move(g));
  }
  return out;
}

std::size_t CoverageReport::Undeclared() const {
  return static_cast<std::size_t>(
      std::count_if(misses.begin(), misses.end(), [](const CoverageMiss& m) { return m.gap < 0; }));
}

CoverageReport RunCoverage(const systems::SystemSpec& spec, const CoverageOptions& options) {
  CoverageReport r;
  r.system = spec.name;
  r.gpus = std::max(1, spec.node.gpus_per_node);
  r.gaps = options.gaps;
  serve::DatabaseOptions dbo = options.data;
  dbo.mode = perfdb::DatabaseMode::kSilicon;
  std::map<std::set<serve::TableNeed>, std::unique_ptr<serve::Database>> dbs;
  MissSink sink(r.misses);

  const std::vector<std::string> models = model::BundledModels(options.models_dir);
  r.models = models.size();
  for (const std::string& id : models) {
    const model::ModelConfig loaded = model::LoadModel(id, options.models_dir);
    for (model::Engine e : {model::Engine::kTrtllm, model::Engine::kVllm, model::Engine::kSglang}) {
      const std::string engine = model::EngineName(e);
      if (const std::string why = model::FamilyOf(loaded).Unsupported(loaded); !why.empty()) {
        sink.Add(id, engine, "", "", OpLookup{}, loaded.architecture + ": " + why);
        continue;
      }
      serve::Deployment d(loaded, spec);
      SearchInputs in;
      in.engine = e;
      in.total_gpus = r.gpus;
      std::set<serve::TableNeed> needs;
      try {
        needs = SearchNeeds(d, in);
      } catch (const UsageError& ex) {
        sink.Add(id, engine, "", "", OpLookup{}, ex.what());
        continue;
      }
      auto& db = dbs[needs];
      if (!db) db = serve::Database::Open(spec, dbo, needs);
      if (r.data.empty()) r.data = db->source();
      d.UseData(*db);
      const model::ModelConfig& m = d.model();
      const model::OpListOptions oo = serve::OpOptionsFor(e, spec);
      std::map<std::string, std::size_t> rejected;
      const std::vector<model::ParallelConfig> pars = EnumerateParallel(m, e, r.gpus, &rejected);
      if (pars.empty()) {
        sink.Add(id, engine, "", "", OpLookup{},
                 "no parallel configuration on " + Str(r.gpus) + " GPUs" +
                     (rejected.empty() ? std::string() : ": " + rejected.begin()->first));
        continue;
      }
      for (const model::ParallelConfig& p : pars) {
        ++r.configs;
        const model::OpList ops = d.Ops(p, oo);
        const std::string config = p.ToString();
        std::set<std::string> seen;  // one miss per op and configuration
        auto run = [&](const std::vector<model::Op>& list, const serve::PassShape& shape) {
          for (const model::Op& op : list) {
            if (seen.count(op.name)) continue;
            ++r.lookups;
            try {
              // A table servecast cannot collect yet answers from its roofline
              // (EstimatorRead::uncollected): not a measurement, so a miss here.
              const serve::OpCost c = serve::EvaluateOp(op, *db, shape);
              if (c.source == "roofline") {
                seen.insert(op.name);
                sink.Add(id, engine, config, op.name, LookupOf(op), c.detail);
              }
            } catch (const perfdb::MissingDataError& miss) {
              seen.insert(op.name);
              sink.Add(id, engine, config, op.name, LookupOf(op), miss.what());
            }
          }
        };
        for (std::int64_t b : r.batches) {
          const ProbePasses probe = ProbeAt(b, r.isl, r.osl);
          run(ops.context, probe.context);
          run(ops.generation, probe.generation);
        }
      }
    }
  }

  // Declarations: a miss is declared when, on every engine it misses on, some gap matches it.
  std::vector<bool> used(r.gaps.size(), false);
  for (CoverageMiss& m : r.misses) {
    int first = -1;
    bool all = true;
    for (const std::string& engine : m.engines) {
      int match = -1;
      for (std::size_t g = 0; g < r.gaps.size() && match < 0; ++g)
        if (GapMatches(r.gaps[g], m, engine)) match = static_cast<int>(g);
      if (match < 0) {
        all = false;
        continue;
      }
      used[static_cast<std::size_t>(match)] = true;
      if (first < 0) first = match;
    }
    m.gap = all ? first : -1;
  }
  for (std::size_t g = 0; g < r.gaps.size(); ++g)
    if (!used[g]) r.stale.push_back(static_cast<int>(g));
  std::sort(r.misses.begin(), r.misses.end(), [](const CoverageMiss& a, const CoverageMiss& b) {
    return std::tie(a.model, a.table, a.key) < std::tie(b.model, b.table, b.key);
  });
  return r;
}

}  // namespace servecast::search
