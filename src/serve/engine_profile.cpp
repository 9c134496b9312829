#include "serve/engine_profile.h"

#include <filesystem>

#include "core/error.h"
#include "core/yaml_util.h"

namespace servecast::serve {

double MemoryProfile::ActivationCoefficient(model::Family family, int tp) const {
  const std::string key = family == model::Family::kDense ? "dense" : "moe";
  auto it = activation_coefficients.find(key);
  if (it == activation_coefficients.end() || it->second.empty())
    throw ConfigError("engine profile has no activation coefficients for the " + key + " family");
  const int bucket = std::min(tp, 8);
  auto b = it->second.upper_bound(bucket);
  if (b == it->second.begin()) return b->second;
  return std::prev(b)->second;
}

EngineProfile LoadEngineProfile(const std::string& path) {
  YamlReader root(path, LoadYamlFile(path));
  root.AllowOnlyKeys({"schema_version", "engine", "memory"});
  if (root.RequiredInt("schema_version") != 1)
    throw ConfigError(root.Where("schema_version"), "unsupported schema_version", "1");
  EngineProfile p;
  p.source_file = path;
  try {
    p.engine = model::ParseEngine(root.RequiredString("engine"));
  } catch (const UsageError& e) {
    throw ConfigError(root.Where("engine"), e.what(), "trtllm, vllm or sglang");
  }
  YamlReader mem = root.Child("memory");
  mem.AllowOnlyKeys({"activation_coefficients", "activation_floor_bytes", "activation_factor", "other_bytes_factor",
                     "kv_budget"});
  YamlReader coef = mem.Child("activation_coefficients");
  coef.AllowOnlyKeys({"dense", "moe"});
  for (const char* fam : {"dense", "moe"}) {
    YamlReader f = coef.Child(fam);
    for (const auto& kv : f.node()) {
      const std::int64_t tp = YamlToInt(path, kv.first, std::string("activation_coefficients.") + fam);
      const double c = YamlToDouble(path, kv.second, std::string("activation_coefficients.") + fam);
      if (tp < 1 || c <= 0)
        throw ConfigError(YamlWhere(path, kv.second, std::string("activation_coefficients.") + fam),
                          "bad coefficient", "a tp bucket >= 1 mapped to a positive number");
      p.memory.activation_coefficients[fam][static_cast<int>(tp)] = c;
    }
  }
  p.memory.activation_floor_bytes = mem.RequiredDouble("activation_floor_bytes");
  p.memory.activation_factor = mem.RequiredDouble("activation_factor");
  p.memory.other_bytes_factor = mem.RequiredDouble("other_bytes_factor");
  YamlReader kv = mem.Child("kv_budget");
  kv.AllowOnlyKeys({"rule", "fraction", "reserved", "tolerance"});
  const std::string rule = kv.RequiredString("rule");
  if (rule == "of_free")
    p.memory.kv_budget.rule = KvBudgetRule::kOfFree;
  else if (rule == "of_total")
    p.memory.kv_budget.rule = KvBudgetRule::kOfTotal;
  else
    throw ConfigError(kv.Where("rule"), "unknown KV budget rule '" + rule + "'", "of_free or of_total");
  p.memory.kv_budget.fraction = kv.RequiredDouble("fraction");
  p.memory.kv_budget.reserved = kv.RequiredDouble("reserved");
  p.memory.kv_budget.tolerance = kv.RequiredDouble("tolerance");
  for (double f : {p.memory.kv_budget.fraction, p.memory.kv_budget.reserved, p.memory.kv_budget.tolerance})
    if (f < 0 || f > 1) throw ConfigError(kv.Where(), "KV budget fractions must lie in [0, 1]");
  return p;
}

EngineProfile LoadEngineProfileByName(const std::string& engines_dir, model::Engine engine) {
  const std::string path = (std::filesystem::path(engines_dir) / (std::string(model::EngineName(engine)) + ".yaml")).string();
  if (!std::filesystem::exists(path))
    throw ConfigError("engine profile " + path + " not found (set --engines-dir or SERVECAST_HOME)");
  return LoadEngineProfile(path);
}

}  // namespace servecast::serve
