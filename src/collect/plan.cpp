#include "collect/plan.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <set>
#include <unordered_map>
#include <variant>

#include "core/error.h"
#include "core/hash.h"
#include "core/yaml_util.h"

namespace servecast::collect {
namespace {

namespace fs = std::filesystem;

Value ScalarValue(const std::string& file, const YAML::Node& n, const std::string& key) {
  if (!n.IsScalar()) throw ConfigError(YamlWhere(file, n, key), "not a scalar", "a number or a string");
  const std::string& s = n.Scalar();
  std::int64_t iv;
  auto res = std::from_chars(s.data(), s.data() + s.size(), iv);
  if (!s.empty() && res.ec == std::errc() && res.ptr == s.data() + s.size()) return iv;
  // A decimal number; strtod's hexadecimal forms (0x10) stay text, so that a
  // message quotes what the file says.
  const bool hex = s.find_first_of("xX") != std::string::npos;
  char* end = nullptr;
  double dv = std::strtod(s.c_str(), &end);
  if (!s.empty() && !hex && end == s.c_str() + s.size()) return dv;
  return s;
}

// `lines`, when given, receives the line of each value.
std::vector<Value> ValueList(const std::string& file, const YAML::Node& n, const std::string& key,
                             std::vector<int>* lines = nullptr) {
  std::vector<Value> out;
  if (n.IsScalar()) {
    if (lines) lines->push_back(YamlWhere(file, n).line);
    return {ScalarValue(file, n, key)};
  }
  if (!n.IsSequence() || n.size() == 0)
    throw ConfigError(YamlWhere(file, n, key), "not a non-empty list", "a list of values");
  for (const auto& item : n) {
    out.push_back(ScalarValue(file, item, key));
    if (lines) lines->push_back(YamlWhere(file, item).line);
  }
  return out;
}

// One correlated tuple of structural parameters.
using Profile = std::vector<std::pair<std::string, Value>>;
// The parameter names a sweep or a model's op gives, each with the line of its
// first mention (checked against the op's declaration when the plan is built).
using KeyLines = std::map<std::string, int>;

void NoteKey(KeyLines& lines, const std::string& file, const YAML::Node& key_node, const std::string& name) {
  lines.emplace(name, YamlWhere(file, key_node).line);
}

// The line of each value of each profile, of the axes' values, of the fixed values:
// where a bad value is named (CheckPlanValues).
using ValueLines = std::vector<std::vector<int>>;

std::vector<Profile> ReadProfiles(const std::string& file, const YAML::Node& n, const std::string& key,
                                  KeyLines& lines, ValueLines& value_lines) {
  std::vector<Profile> out;
  if (!n.IsDefined() || n.IsNull()) return out;
  if (!n.IsSequence()) throw ConfigError(YamlWhere(file, n, key), "not a list", "a list of mappings");
  for (const auto& item : n) {
    if (!item.IsMap()) throw ConfigError(YamlWhere(file, item, key), "profile is not a mapping", "{name: value, ...}");
    Profile p;
    std::vector<int> at;
    for (const auto& kv : item) {
      std::string name = kv.first.as<std::string>();
      NoteKey(lines, file, kv.first, name);
      p.emplace_back(name, ScalarValue(file, kv.second, key + "." + name));
      at.push_back(YamlWhere(file, kv.second).line);
    }
    out.push_back(std::move(p));
    value_lines.push_back(std::move(at));
  }
  return out;
}

struct Sweep {
  std::string file;
  int line = 0;
  std::string op;
  std::vector<std::string> backends;
  std::vector<std::pair<std::string, std::vector<Value>>> axes;
  std::vector<Profile> profiles;
  Profile fixed;
  std::vector<Expr> where;
  bool model_shapes = false;
  KeyLines key_lines;  // of axes, profiles and fixed
  ValueLines axis_lines, profile_lines;  // per axis / profile, the line of each value
  std::vector<int> fixed_lines;          // per fixed value
};

struct ModelShapes {
  std::string file;
  std::string model;
  std::vector<std::string> aliases;
  std::map<std::string, std::vector<Profile>> profiles;  // op -> profiles
  std::map<std::string, KeyLines> key_lines;              // op -> its profiles' names
  std::map<std::string, ValueLines> profile_lines;        // op -> the line of each profile value
};

std::vector<std::string> SortedYamlFiles(const std::string& dir) {
  std::vector<std::string> files;
  if (!fs::is_directory(dir)) return files;
  for (const auto& e : fs::directory_iterator(dir)) {
    auto ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".yaml" || ext == ".yml")) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<Sweep> LoadBaseOps(const std::string& dir) {
  std::vector<Sweep> sweeps;
  for (const auto& file : SortedYamlFiles(dir)) {
    YamlReader top(file, LoadYamlFile(file));
    top.AllowOnlyKeys({"op", "description", "sweeps"});
    std::string op = top.RequiredString("op");
    YAML::Node list = top.node()["sweeps"];
    if (!list.IsDefined() || !list.IsSequence())
      throw ConfigError(top.Where("sweeps"), "missing or not a list", "a list of sweeps");
    int idx = 0;
    for (const auto& sn : list) {
      std::string path = "sweeps[" + std::to_string(idx++) + "]";
      YamlReader s(file, sn, path);
      s.AllowOnlyKeys({"backends", "axes", "profiles", "fixed", "where", "model_shapes", "description"});
      Sweep sw;
      sw.file = file;
      sw.line = YamlWhere(file, sn).line;
      sw.op = op;
      sw.backends = s.StringList("backends");
      if (sw.backends.empty()) throw ConfigError(s.Where("backends"), "missing", "a list of backends (cpu, cuda)");
      if (s.Has("axes")) {
        for (const auto& kv : sn["axes"]) {
          std::string name = kv.first.as<std::string>();
          NoteKey(sw.key_lines, file, kv.first, name);
          sw.axis_lines.emplace_back();
          sw.axes.emplace_back(name, ValueList(file, kv.second, path + ".axes." + name, &sw.axis_lines.back()));
        }
      }
      sw.profiles = ReadProfiles(file, sn["profiles"], path + ".profiles", sw.key_lines, sw.profile_lines);
      if (s.Has("fixed")) {
        if (!sn["fixed"].IsMap()) throw ConfigError(s.Where("fixed"), "not a mapping", "{name: value}");
        for (const auto& kv : sn["fixed"]) {
          std::string name = kv.first.as<std::string>();
          NoteKey(sw.key_lines, file, kv.first, name);
          sw.fixed.emplace_back(name, ScalarValue(file, kv.second, path + ".fixed." + name));
          sw.fixed_lines.push_back(YamlWhere(file, kv.second).line);
        }
      }
      for (const auto& text : s.StringList("where")) {
        try {
          sw.where.push_back(Expr::Parse(text));
        } catch (const Error& e) {
          throw ConfigError(s.Where("where"), e.what(), "a valid expression");
        }
      }
      sw.model_shapes = s.OptionalBool("model_shapes", false);
      sweeps.push_back(std::move(sw));
    }
  }
  return sweeps;
}

std::vector<ModelShapes> LoadModels(const std::string& dir) {
  std::vector<ModelShapes> models;
  for (const auto& file : SortedYamlFiles(dir)) {
    YamlReader top(file, LoadYamlFile(file));
    top.AllowOnlyKeys({"model", "aliases", "description", "ops"});
    ModelShapes m;
    m.file = file;
    m.model = top.RequiredString("model");
    m.aliases = top.StringList("aliases");
    YAML::Node ops = top.node()["ops"];
    if (!ops.IsDefined() || !ops.IsMap())
      throw ConfigError(top.Where("ops"), "missing or not a mapping", "ops: {<op>: {profiles: [...]}}");
    for (const auto& kv : ops) {
      std::string op = kv.first.as<std::string>();
      YamlReader o(file, kv.second, "ops." + op);
      o.AllowOnlyKeys({"profiles"});
      m.profiles[op] =
          ReadProfiles(file, kv.second["profiles"], "ops." + op + ".profiles", m.key_lines[op], m.profile_lines[op]);
    }
    models.push_back(std::move(m));
  }
  return models;
}

// Orders case parameters: table key columns first (in table order), then the rest by name.
Params OrderParams(const Op& op, const Profile& raw) {
  Params out;
  for (const auto& col : op.table().key_columns)
    for (const auto& [k, v] : raw)
      if (k == col.name) out.Set(k, v);
  Profile rest;
  for (const auto& [k, v] : raw)
    if (!out.Has(k)) rest.emplace_back(k, v);
  std::sort(rest.begin(), rest.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [k, v] : rest) out.Set(k, v);
  return out;
}

struct Candidate {
  Case c;
  std::set<std::string> models;  // models whose shapes produced it
  bool from_base = false;
};

// A value a plan gives a key column of the op's table, against the column's
// declaration: the type (an integer key takes a whole number, not 1.5, 1e+23 or
// "sixteen"), finite, and at least the key's minimum. Each value is checked where
// it is written (file and line of the value, in a base-ops or a model file) when the
// plan loads, instead of failing (or worse, running) case by case.
void CheckKeyValue(const Op& op, const std::string& name, const Value& v, const std::string& file, int line) {
  const TableSpec& t = op.table();
  for (const auto& col : t.key_columns) {
    if (col.name != name) continue;
    const std::string got = ToString(v);
    auto fail = [&](const std::string& what, const std::string& expected) {
      throw ConfigError(SourceLocation{file, line, col.name}, "value " + what, expected + " (a key of " + t.name + ")");
    };
    if (col.type == ValueType::kString) {
      if (!std::holds_alternative<std::string>(v)) fail(got + " is a number", "a name");
    } else if (col.type == ValueType::kInt64) {
      if (!std::holds_alternative<std::int64_t>(v)) fail("'" + got + "' is not an integer", "an integer");
      if (std::get<std::int64_t>(v) < t.KeyMinimum(col.name))
        fail(got + " is below the minimum", "an integer >= " + std::to_string(t.KeyMinimum(col.name)));
    } else {
      const bool numeric = std::holds_alternative<std::int64_t>(v) || std::holds_alternative<double>(v);
      if (!numeric || (std::holds_alternative<double>(v) && !std::isfinite(std::get<double>(v))))
        fail("'" + got + "' is not a finite number", "a finite number");
    }
  }
}

void CheckProfileValues(const Op& op, const std::string& file, const std::vector<Profile>& profiles,
                        const ValueLines& lines) {
  for (std::size_t p = 0; p < profiles.size(); ++p)
    for (std::size_t i = 0; i < profiles[p].size(); ++i)
      CheckKeyValue(op, profiles[p][i].first, profiles[p][i].second, file, lines[p][i]);
}

// Every parameter a plan gives an op is one the op declares (its required and
// optional parameters and its table's key columns): a misspelt or foreign name would
// otherwise ride along in the case id, unread. ConfigError with the file, the
// line of the first unknown name and the name.
void RefuseUnknownParams(const Op& op, const std::string& file, const KeyLines& lines) {
  std::set<std::string> known;
  for (const auto& p : op.required_params()) known.insert(p);
  for (const auto& p : op.optional_params()) known.insert(p);
  for (const auto& c : op.table().KeyColumnNames()) known.insert(c);
  const std::pair<const std::string, int>* first = nullptr;
  for (const auto& kv : lines)
    if (!known.count(kv.first) && (!first || kv.second < first->second)) first = &kv;
  if (!first) return;
  std::string have;
  for (const auto& k : known) have += (have.empty() ? "" : ", ") + k;
  throw ConfigError(SourceLocation{file, first->second, first->first},
                    "op '" + op.name() + "' has no parameter '" + first->first + "'", "one of: " + have);
}

// The cases a sweep crosses to with the given profiles, before `where:` (the
// product of the axes a profile does not fix, summed over the profiles),
// saturating at INT64_MAX; `axes` gets the axis sizes of the largest profile in
// words ("m 10000 x n 10000").
std::int64_t Crossing(const Sweep& sw, const std::vector<Profile>& profiles, std::string& axes) {
  const std::vector<Profile> profs = profiles.empty() ? std::vector<Profile>{Profile{}} : profiles;
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  std::int64_t total = 0, largest = -1;
  for (const auto& prof : profs) {
    std::int64_t n = 1;
    std::string words;
    for (const auto& [name, values] : sw.axes) {
      bool named = false;
      for (const auto& kv : prof) named = named || kv.first == name;
      if (named) continue;
      const auto size = static_cast<std::int64_t>(values.size());
      n = size != 0 && n > kMax / size ? kMax : n * size;
      words += (words.empty() ? "" : " x ") + name + " " + std::to_string(size);
    }
    if (n > largest) {
      largest = n;
      axes = words.empty() ? "no axes" : words;
    }
    total = total > kMax - n ? kMax : total + n;
  }
  return total;
}

// Expands a sweep, crossed with the given profiles, into cases.
void Expand(const Sweep& sw, const Op& op, const std::vector<Profile>& profiles, const std::string& owner,
            const std::string& model, std::vector<Candidate>& out) {
  std::vector<Profile> profs = profiles.empty() ? std::vector<Profile>{Profile{}} : profiles;
  for (const auto& prof : profs) {
    // A profile fixes the parameters it names: an axis of the same name is not
    // crossed for it (model shapes replace a sweep's n/k axes, for example).
    std::vector<std::size_t> axes;
    for (std::size_t a = 0; a < sw.axes.size(); ++a) {
      bool named = false;
      for (const auto& kv : prof) named = named || kv.first == sw.axes[a].first;
      if (!named) axes.push_back(a);
    }
    std::vector<std::size_t> idx(axes.size(), 0);
    for (;;) {
      Profile raw = sw.fixed;
      for (const auto& kv : prof) raw.push_back(kv);
      for (std::size_t i = 0; i < axes.size(); ++i)
        raw.emplace_back(sw.axes[axes[i]].first, sw.axes[axes[i]].second[idx[i]]);
      // A name given twice (profile and axis) is a plan error.
      for (std::size_t i = 0; i < raw.size(); ++i)
        for (std::size_t j = i + 1; j < raw.size(); ++j)
          if (raw[i].first == raw[j].first)
            throw ConfigError(SourceLocation{sw.file, sw.line, raw[i].first},
                              "parameter given twice (in fixed and in a profile or axis)",
                              "each parameter once per case");
      Params params = OrderParams(op, raw);
      for (const auto& need : op.required_params())
        if (!params.Has(need))
          throw ConfigError(SourceLocation{sw.file, sw.line, need},
                            "op '" + op.name() + "' needs parameter '" + need + "' (from " + owner + ")",
                            "it in axes, profiles or fixed");
      bool keep = true;
      for (const auto& w : sw.where) {
        try {
          keep = keep && w.Test(params);
        } catch (const Error& e) {
          throw ConfigError(SourceLocation{sw.file, sw.line, "where"}, e.what(), "parameters the case has");
        }
        if (!keep) break;
      }
      if (keep) {
        Candidate cand;
        cand.c.op = op.name();
        cand.c.params = params;
        cand.c.id = MakeCaseId(op.name(), params);
        cand.c.owner = owner;
        if (model.empty()) cand.from_base = true;
        else cand.models.insert(model);
        out.push_back(std::move(cand));
      }
      std::size_t a = 0;
      for (; a < idx.size(); ++a) {
        if (++idx[a] < sw.axes[axes[a]].second.size()) break;
        idx[a] = 0;
      }
      if (a == idx.size()) break;
    }
  }
}

bool MatchesModel(const ModelShapes& m, const std::string& name) {
  if (m.model == name) return true;
  for (const auto& a : m.aliases)
    if (a == name) return true;
  return fs::path(m.file).stem().string() == name;
}

}  // namespace

bool InShard(std::size_t index, int shard_index, int shard_count) {
  return shard_count <= 1 || static_cast<int>(index % static_cast<std::size_t>(shard_count)) == shard_index;
}

std::vector<SkipRule> LoadSkips(const std::string& path) {
  std::vector<SkipRule> rules;
  if (!fs::exists(path)) return rules;
  YamlReader top(path, LoadYamlFile(path));
  top.AllowOnlyKeys({"skips"});
  YAML::Node list = top.node()["skips"];
  if (!list.IsDefined() || list.IsNull()) return rules;
  if (!list.IsSequence()) throw ConfigError(top.Where("skips"), "not a list", "a list of skip entries");
  int idx = 0;
  for (const auto& n : list) {
    std::string path_key = "skips[" + std::to_string(idx++) + "]";
    YamlReader r(path, n, path_key);
    r.AllowOnlyKeys({"op", "backend", "when", "sm", "reason", "source"});
    SkipRule rule;
    rule.where = YamlWhere(path, n).ToString();
    rule.op = r.RequiredString("op");
    rule.backend = r.OptionalString("backend", "");
    rule.reason = r.RequiredString("reason");
    rule.source = r.RequiredString("source");
    if (rule.reason.empty()) throw ConfigError(r.Where("reason"), "empty", "why the case must not run");
    if (rule.source.empty()) throw ConfigError(r.Where("source"), "empty", "what proves it");
    if (r.Has("when")) {
      try {
        rule.when = Expr::Parse(r.RequiredString("when"));
      } catch (const Error& e) {
        throw ConfigError(r.Where("when"), e.what(), "a valid expression");
      }
    }
    if (r.Has("sm")) {
      YAML::Node sm = n["sm"];
      if (!sm.IsSequence() || sm.size() != 2)
        throw ConfigError(r.Where("sm"), "not a [min, max] pair", "[min_sm, max_sm], 0 for unbounded");
      rule.min_sm = static_cast<int>(YamlToInt(path, sm[0], path_key + ".sm"));
      rule.max_sm = static_cast<int>(YamlToInt(path, sm[1], path_key + ".sm"));
    }
    if (!rule.when && rule.min_sm == 0 && rule.max_sm == 0)
      throw ConfigError(r.Where(), "skip entry without a predicate would skip the whole op",
                        "a narrow 'when' expression or an 'sm' range");
    rules.push_back(std::move(rule));
  }
  return rules;
}

namespace {

std::string JoinNames(const std::vector<std::string>& names) {
  std::string have;
  for (const auto& n : names) have += (have.empty() ? "" : ", ") + n;
  return have;
}

// The backend and the ops asked for, each one the registry knows.
void ResolveOps(const Registry& registry, const PlanOptions& opt, Plan& plan) {
  plan.backend = opt.backend;
  if (!registry.FindBackend(opt.backend))
    throw UsageError("unknown backend '" + opt.backend + "'; expected one of: " + JoinNames(registry.BackendNames()));
  std::vector<std::string> all_ops = registry.OpNames(opt.backend);
  plan.ops = opt.ops.empty() ? all_ops : opt.ops;
  for (const auto& op : plan.ops)
    if (!registry.FindOp(opt.backend, op))
      throw UsageError("unknown op '" + op + "' for backend '" + opt.backend +
                       "'; expected one of: " + JoinNames(all_ops));
}

// The case-plan folder: base sweeps, model shapes and skips.
struct CasePlan {
  std::vector<Sweep> sweeps;
  std::vector<ModelShapes> models;
  std::vector<SkipRule> skips;
};

CasePlan LoadCasePlan(const PlanOptions& opt) {
  if (!fs::is_directory(opt.cases_dir + "/base_ops"))
    throw UsageError("--cases " + opt.cases_dir +
                     ": no base_ops/ folder there; expected a case-plan folder (base_ops/*.yaml, "
                     "models/*.yaml, skips.yaml), e.g. the installation's cases/");
  CasePlan cp;
  cp.sweeps = LoadBaseOps(opt.cases_dir + "/base_ops");
  cp.models = LoadModels(opt.cases_dir + "/models");
  cp.skips = LoadSkips(opt.cases_dir + "/skips.yaml");
  return cp;
}

// --model names a models/ file; every model file's ops and values are the registry's.
void CheckModels(const Registry& registry, const PlanOptions& opt, const std::vector<ModelShapes>& models) {
  for (const auto& name : opt.models) {
    bool found = false;
    for (const auto& m : models) found = found || MatchesModel(m, name);
    if (!found) {
      std::string have;
      for (const auto& m : models) have += (have.empty() ? "" : ", ") + m.model;
      throw UsageError("unknown model '" + name + "' (no file in " + opt.cases_dir +
                       "/models matches it); known: " + (have.empty() ? "none" : have));
    }
  }
  for (const auto& m : models)
    for (const auto& [op, _] : m.profiles) {
      bool any = false;
      for (const auto& b : registry.BackendNames()) any = any || registry.FindOp(b, op);
      if (!any)
        throw ConfigError(SourceLocation{m.file, 0, "ops." + op}, "no backend registers op '" + op + "'", "a known op");
      if (const Op* o = registry.FindOp(opt.backend, op)) {
        RefuseUnknownParams(*o, m.file, m.key_lines.at(op));
        CheckProfileValues(*o, m.file, m.profiles.at(op), m.profile_lines.at(op));
      }
    }
}

// Backends a case plan may name: those registered, and cuda, which a build
// without CUDA does not register.
std::set<std::string> KnownBackends(const Registry& registry) {
  std::set<std::string> known_backends{"cpu", "cuda"};
  for (const auto& b : registry.BackendNames()) known_backends.insert(b);
  return known_backends;
}

void CheckSkips(const Registry& registry, const std::vector<SkipRule>& skips,
                const std::set<std::string>& known_backends) {
  for (const auto& rule : skips) {
    if (!rule.backend.empty() && !known_backends.count(rule.backend))
      throw ConfigError(rule.where + ": unknown backend '" + rule.backend + "'");
    if (!rule.backend.empty() && registry.FindBackend(rule.backend) && !registry.FindOp(rule.backend, rule.op))
      throw ConfigError(rule.where + ": backend '" + rule.backend + "' has no op '" + rule.op + "'");
  }
}

using RawGrid = std::map<std::string, std::vector<Candidate>>;

// Stage 1: raw grid = base sweeps plus model shapes, per wanted op. Every sweep of
// the backend is checked, wanted or not: a typo in op: is found on any run.
RawGrid ExpandSweeps(const Registry& registry, const PlanOptions& opt, const CasePlan& cp,
                     const std::set<std::string>& known_backends, const std::set<std::string>& wanted) {
  RawGrid raw;
  std::int64_t crossed = 0;  // raw cases of the wanted sweeps so far
  for (const auto& sw : cp.sweeps) {
    for (const auto& b : sw.backends)
      if (!known_backends.count(b)) {
        std::string have;
        for (const auto& k : known_backends) have += (have.empty() ? "" : ", ") + k;
        throw ConfigError(SourceLocation{sw.file, sw.line, "backends"}, "unknown backend '" + b + "'",
                          "one of: " + have);
      }
    if (std::find(sw.backends.begin(), sw.backends.end(), opt.backend) == sw.backends.end()) continue;
    Op* op = registry.FindOp(opt.backend, sw.op);
    if (!op)
      throw ConfigError(SourceLocation{sw.file, sw.line, "backends"},
                        "backend '" + opt.backend + "' has no op '" + sw.op + "'", "an op the backend registers");
    RefuseUnknownParams(*op, sw.file, sw.key_lines);
    for (std::size_t a = 0; a < sw.axes.size(); ++a)
      for (std::size_t i = 0; i < sw.axes[a].second.size(); ++i)
        CheckKeyValue(*op, sw.axes[a].first, sw.axes[a].second[i], sw.file, sw.axis_lines[a][i]);
    for (std::size_t i = 0; i < sw.fixed.size(); ++i)
      CheckKeyValue(*op, sw.fixed[i].first, sw.fixed[i].second, sw.file, sw.fixed_lines[i]);
    CheckProfileValues(*op, sw.file, sw.profiles, sw.profile_lines);
    if (!wanted.count(sw.op)) continue;
    std::string owner = fs::path(sw.file).filename().string() + ":" + std::to_string(sw.line);
    // The raw grid is counted in closed form before it is built: a plan past
    // kMaxPlanCases is refused at the sweep that crosses the limit, in no time.
    const auto count = [&](const std::vector<Profile>& profiles, const std::string& with) {
      std::string axes;
      const std::int64_t n = Crossing(sw, profiles, axes);
      crossed += std::min(n, kMaxPlanCases + 1);  // crossed <= kMaxPlanCases before: no overflow
      if (crossed > kMaxPlanCases)
        throw ConfigError(SourceLocation{sw.file, sw.line, "axes"},
                          "this sweep" + with + " crosses to " +
                              (n == std::numeric_limits<std::int64_t>::max() ? "more than 2^63" : std::to_string(n)) +
                              " cases (" + axes + "), taking the plan past its limit of " +
                              std::to_string(kMaxPlanCases) + " cases (counted before where:, skips and --limit)",
                          "fewer axis values, or fewer ops per run (--ops)");
    };
    count(sw.profiles, "");
    Expand(sw, *op, sw.profiles, owner, "", raw[sw.op]);
    if (sw.model_shapes) {
      for (const auto& m : cp.models) {
        auto it = m.profiles.find(sw.op);
        if (it == m.profiles.end() || it->second.empty()) continue;
        count(it->second, " with the shapes of " + fs::path(m.file).filename().string());
        Expand(sw, *op, it->second, fs::path(m.file).filename().string(), m.model, raw[sw.op]);
      }
    }
  }
  return raw;
}

// De-duplicates on the case identity, merging model ownership; two different
// invocations that map to one table key are a plan error.
std::vector<Candidate> UniqueCandidates(const std::string& op_name, const Op& op, std::vector<Candidate>& raw) {
  std::vector<Candidate> uniq;
  std::unordered_map<std::string, std::size_t> by_id;
  for (auto& cand : raw) {
    auto it = by_id.find(cand.c.id);
    if (it == by_id.end()) {
      by_id[cand.c.id] = uniq.size();
      uniq.push_back(std::move(cand));
    } else {
      Candidate& have = uniq[it->second];
      have.models.insert(cand.models.begin(), cand.models.end());
      have.from_base = have.from_base || cand.from_base;
    }
  }
  std::unordered_map<std::string, std::size_t> by_key;
  for (std::size_t i = 0; i < uniq.size(); ++i) {
    std::string key = op_name;
    for (const auto& col : op.table().key_columns) key += "|" + ToString(uniq[i].c.params.Get(col.name));
    auto [it, fresh] = by_key.emplace(key, i);
    if (!fresh) {
      const Case& a = uniq[it->second].c;
      const Case& b = uniq[i].c;
      throw ConfigError("plan error: cases '" + a.id + "' (from " + a.owner + ") and '" + b.id + "' (from " + b.owner +
                        ") write the same " + op.table().name + " key; expected each table key to have one invocation");
    }
  }
  return uniq;
}

// Stage 2: model selection and case filters. Collects every case's parameter
// names into `param_names` (for --case-filter keys no case has).
std::vector<Candidate> SelectCandidates(const PlanOptions& opt, const std::vector<ModelShapes>& models,
                                        std::vector<Candidate>& uniq, std::set<std::string>& param_names) {
  std::vector<Candidate> selected;
  for (auto& cand : uniq) {
    bool keep = true;
    if (!opt.models.empty()) {
      keep = false;
      for (const auto& m : models)
        for (const auto& name : opt.models)
          if (MatchesModel(m, name) && cand.models.count(m.model)) keep = true;
    }
    for (const auto& item : cand.c.params.items()) param_names.insert(item.first);
    std::map<std::string, bool> by_filter_key;
    for (const auto& [k, v] : opt.case_filters) {
      const Value* have = cand.c.params.Find(k);
      bool match = have && ToString(*have) == v;
      by_filter_key[k] = by_filter_key[k] || match;
    }
    for (const auto& [_, ok] : by_filter_key) keep = keep && ok;
    if (keep) selected.push_back(std::move(cand));
  }
  return selected;
}

// Stage 3: skips.yaml.
std::vector<Case> ApplySkips(const std::string& op_name, const PlanOptions& opt, const RuntimeInfo& rt,
                             const std::vector<SkipRule>& skips, std::vector<Candidate>& selected, Plan& plan) {
  std::vector<Case> after_skips;
  for (auto& cand : selected) {
    const SkipRule* hit = nullptr;
    for (const auto& rule : skips) {
      if (rule.op != op_name) continue;
      if (!rule.backend.empty() && rule.backend != opt.backend) continue;
      if (rule.min_sm && rt.sm < rule.min_sm) continue;
      if (rule.max_sm && rt.sm > rule.max_sm) continue;
      bool match = true;
      if (rule.when) {
        try {
          match = rule.when->Test(cand.c.params);
        } catch (const Error& e) {
          throw ConfigError(rule.where + ": " + e.what());
        }
      }
      if (match) {
        hit = &rule;
        break;
      }
    }
    if (hit)
      plan.dropped.push_back({cand.c, "skips", hit->reason + " (source: " + hit->source + ")"});
    else
      after_skips.push_back(std::move(cand.c));
  }
  return after_skips;
}

// Stage 4: maturity markers.
std::vector<Case> ApplyMaturity(const std::string& op_name, const Op& op, const PlanOptions& opt,
                                std::vector<Case>& after_skips, Plan& plan) {
  std::vector<Case> mature;
  for (auto& c : after_skips) {
    if (op.unverified() && !opt.include_unverified)
      plan.dropped.push_back({c, "maturity", "op '" + op_name + "' is marked unverified (use --include-unverified)"});
    else
      mature.push_back(std::move(c));
  }
  return mature;
}

// Stage 5: runtime requirements.
std::vector<Case> ApplyRequirements(const Op& op, const RuntimeInfo& rt, std::vector<Case>& mature, Plan& plan) {
  std::vector<Case> supported;
  auto reqs = op.requirements();
  std::vector<std::optional<Expr>> req_when;
  for (const auto& r : reqs)
    req_when.push_back(r.applies_when.empty() ? std::nullopt : std::optional(Expr::Parse(r.applies_when)));
  for (auto& c : mature) {
    std::optional<std::string> unmet;
    for (std::size_t i = 0; i < reqs.size() && !unmet; ++i)
      if (!req_when[i] || req_when[i]->Test(c.params)) unmet = reqs[i].Check(rt, c.params);
    if (unmet)
      plan.dropped.push_back({c, "requirements", *unmet});
    else
      supported.push_back(std::move(c));
  }
  return supported;
}

// A filter on a parameter no case of the planned ops has is a typo, not an empty selection.
void CheckCaseFilters(const PlanOptions& opt, const std::set<std::string>& param_names) {
  for (const auto& [k, v] : opt.case_filters)
    if (!param_names.count(k) && !param_names.empty()) {
      std::string known;
      for (const auto& n : param_names) known += (known.empty() ? "" : ", ") + n;
      throw UsageError("--case-filter " + k + "=" + v + ": no case of the planned ops has a parameter '" + k +
                       "'; their parameters: " + known);
    }
}

using CasesByOp = std::map<std::string, std::vector<Case>>;

// The plan hash over the supported plan, shard-independent; returns the sorted IDs.
std::vector<std::string> HashSupported(const PlanOptions& opt, const CasesByOp& supported_by_op, Plan& plan) {
  std::vector<std::string> ids;
  for (const auto& [_, cases] : supported_by_op)
    for (const auto& c : cases) ids.push_back(c.id);
  std::sort(ids.begin(), ids.end());
  Sha256 h;
  h.Update(opt.backend + "\n");
  for (const auto& id : ids) {
    h.Update(id);
    h.Update("\n");
  }
  plan.plan_hash = h.HexDigest();
  plan.supported_total = static_cast<std::int64_t>(ids.size());
  return ids;
}

// Stage 6: shard, by position in the sorted supported plan; stage 7: shuffle and
// limit, per op.
void ShardShuffleLimit(const PlanOptions& opt, const std::vector<std::string>& ids, CasesByOp& supported_by_op,
                       Plan& plan) {
  std::unordered_map<std::string, std::size_t> pos;
  for (std::size_t i = 0; i < ids.size(); ++i) pos[ids[i]] = i;
  for (const auto& op_name : plan.ops) {
    StageCounts& cnt = plan.counts[op_name];
    std::vector<Case> mine;
    for (auto& c : supported_by_op[op_name])
      if (InShard(pos[c.id], opt.shard_index, opt.shard_count)) mine.push_back(std::move(c));
    cnt.after_shard = static_cast<std::int64_t>(mine.size());
    if (opt.shuffle) {
      SplitMix64 rng(opt.seed ^ Fnv1a64(op_name));
      for (std::size_t i = mine.size(); i > 1; --i) std::swap(mine[i - 1], mine[rng.Below(i)]);
    }
    if (opt.limit >= 0 && static_cast<std::int64_t>(mine.size()) > opt.limit)
      mine.resize(static_cast<std::size_t>(opt.limit));
    cnt.final = static_cast<std::int64_t>(mine.size());
    for (auto& c : mine) plan.cases.push_back(std::move(c));
  }
}

}  // namespace

Plan BuildPlan(const Registry& registry, const PlanOptions& opt, const RuntimeInfo& rt) {
  Plan plan;
  ResolveOps(registry, opt, plan);
  const std::set<std::string> wanted(plan.ops.begin(), plan.ops.end());
  const CasePlan cp = LoadCasePlan(opt);
  CheckModels(registry, opt, cp.models);
  const std::set<std::string> known_backends = KnownBackends(registry);
  CheckSkips(registry, cp.skips, known_backends);
  RawGrid raw = ExpandSweeps(registry, opt, cp, known_backends, wanted);

  CasesByOp supported_by_op;
  std::set<std::string> param_names;  // of every raw case, for --case-filter keys no case has
  for (const auto& op_name : plan.ops) {
    const Op& op = *registry.FindOp(opt.backend, op_name);
    StageCounts& cnt = plan.counts[op_name];
    std::vector<Candidate> uniq = UniqueCandidates(op_name, op, raw[op_name]);
    cnt.raw = static_cast<std::int64_t>(uniq.size());
    std::vector<Candidate> selected = SelectCandidates(opt, cp.models, uniq, param_names);
    cnt.selected = static_cast<std::int64_t>(selected.size());
    std::vector<Case> after_skips = ApplySkips(op_name, opt, rt, cp.skips, selected, plan);
    cnt.after_skips = static_cast<std::int64_t>(after_skips.size());
    std::vector<Case> mature = ApplyMaturity(op_name, op, opt, after_skips, plan);
    cnt.after_maturity = static_cast<std::int64_t>(mature.size());
    supported_by_op[op_name] = ApplyRequirements(op, rt, mature, plan);
    cnt.supported = static_cast<std::int64_t>(supported_by_op[op_name].size());
  }
  CheckCaseFilters(opt, param_names);

  const std::vector<std::string> ids = HashSupported(opt, supported_by_op, plan);
  for (const auto& op_name : plan.ops)
    for (const auto& c : supported_by_op[op_name]) plan.supported.push_back(c);
  ShardShuffleLimit(opt, ids, supported_by_op, plan);
  return plan;
}

}  // namespace servecast::collect
