#include "cli/exp_cmd.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "cli/default_cmd.h"
#include "core/error.h"
#include "core/yaml_util.h"
#include "perfdb/perf_database.h"

namespace servecast::cli {

CLI::App* AddExpCommand(CLI::App& app, ExpArgs& a) {
  auto* c = app.add_subcommand("exp",
                               "run several `default` searches from a YAML file and compare their chosen "
                               "deployments (AIC's exp)");
  c->add_option("file,--yaml-path", a.file,
                "YAML: experiments: [{name: N, <default flag>: value, ...}], optional defaults: {<flag>: value} "
                "(flags without --, '-' or '_')")
      ->required();
  c->add_option("--save-dir", a.save_dir,
                "write each experiment's reports under <dir>/<name>/ (as default --save-dir)");
  c->add_flag("--json", a.json, "print one JSON document and nothing else");
  return c;
}

namespace {

using Json = nlohmann::ordered_json;

struct Experiment {
  std::string name;
  int line = 0;
  std::vector<std::string> argv;  // "servecast", "default", flags...
};

// `key: value` of the file as command-line words of `default` (checked against
// its options, so that an unknown key names its line).
void AddFlag(const std::string& file, const YAML::Node& key, const YAML::Node& value, const std::string& exp,
             CLI::App* def, std::vector<std::string>& argv) {
  std::string name = key.as<std::string>();
  for (char& ch : name)
    if (ch == '_') ch = '-';
  const std::string flag = "--" + name;
  const SourceLocation where = YamlWhere(file, key);
  const CLI::Option* opt = def->get_option_no_throw(flag);
  if (!opt || name == "help")
    throw ConfigError(where, "experiment '" + exp + "': unknown key '" + key.as<std::string>() +
                                 "' (the keys are the flags of servecast default, without --)");
  if (name == "json")
    throw ConfigError(where, "experiment '" + exp + "': json is exp's own flag (servecast exp --json)");
  auto scalar = [&](const YAML::Node& v) {
    if (!v.IsScalar())
      throw ConfigError(YamlWhere(file, v), "experiment '" + exp + "': " + name + ": expected a value");
    return v.as<std::string>();
  };
  if (opt->get_type_size() == 0) {  // a flag: true gives it, false leaves it out
    const std::string v = scalar(value);
    if (v == "true")
      argv.push_back(flag);
    else if (v != "false")
      throw ConfigError(YamlWhere(file, value), "experiment '" + exp + "': " + name + ": expected true or false");
    return;
  }
  if (value.IsSequence()) {
    for (const YAML::Node& v : value) argv.insert(argv.end(), {flag, scalar(v)});
    return;
  }
  argv.insert(argv.end(), {flag, scalar(value)});
}

std::vector<Experiment> ReadExperiments(const std::string& file) {
  const YAML::Node doc = LoadYamlFile(file);
  if (!doc.IsMap() || !doc["experiments"] || !doc["experiments"].IsSequence() || doc["experiments"].size() == 0)
    throw ConfigError(YamlWhere(file, doc),
                      "expected a mapping with experiments: a list of {name: ..., <default flag>: value}");
  for (const auto& kv : doc)
    if (kv.first.as<std::string>() != "experiments" && kv.first.as<std::string>() != "defaults")
      throw ConfigError(YamlWhere(file, kv.first),
                        "unknown key '" + kv.first.as<std::string>() + "' (expected experiments, defaults)");
  CLI::App probe;
  DefaultArgs probe_args;
  CLI::App* def = AddDefaultCommand(probe, probe_args);
  const YAML::Node defaults = doc["defaults"];
  if (defaults && !defaults.IsMap()) throw ConfigError(YamlWhere(file, defaults), "defaults: expected a mapping");
  std::vector<Experiment> out;
  std::set<std::string> names;
  for (const YAML::Node& e : doc["experiments"]) {
    if (!e.IsMap() || !e["name"] || !e["name"].IsScalar())
      throw ConfigError(YamlWhere(file, e), "an experiment is a mapping with name: and the flags of servecast default");
    Experiment x;
    x.name = e["name"].as<std::string>();
    x.line = static_cast<int>(e.Mark().line) + 1;
    if (x.name.empty() || x.name.find_first_of("/\\") != std::string::npos || x.name == "." || x.name == "..")
      throw ConfigError(YamlWhere(file, e["name"]), "experiment name '" + x.name + "': expected a plain name");
    if (!names.insert(x.name).second)
      throw ConfigError(YamlWhere(file, e["name"]), "experiment name '" + x.name + "' given twice");
    x.argv = {"servecast", "default"};
    std::set<std::string> own;
    for (const auto& kv : e) {
      if (kv.first.as<std::string>() == "name") continue;
      std::string k = kv.first.as<std::string>();
      for (char& ch : k)
        if (ch == '_') ch = '-';
      own.insert(k);
      AddFlag(file, kv.first, kv.second, x.name, def, x.argv);
    }
    if (defaults)
      for (const auto& kv : defaults) {
        std::string k = kv.first.as<std::string>();
        for (char& ch : k)
          if (ch == '_') ch = '-';
        if (!own.count(k)) AddFlag(file, kv.first, kv.second, x.name, def, x.argv);
      }
    out.push_back(std::move(x));
  }
  return out;
}

// The chosen deployment of one run's JSON (backend auto: the picked engine's).
const Json* Chosen(const Json& j, const Json** report) {
  *report = &j;
  if (j.contains("engines")) {
    for (const Json& e : j["engines"])
      if (!j["pick"].is_null() && e.value("engine", "") == j["pick"].get<std::string>()) *report = &e;
  }
  const Json& r = **report;
  if (!r.contains("chosen") || r["chosen"].is_null()) return nullptr;
  return &r["chosen"];
}

std::string Row(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Row(const char* fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  return line;
}

}  // namespace

int RunExp(const ExpArgs& a, const std::function<std::string(const std::string&)>& find) {
  const std::vector<Experiment> exps = ReadExperiments(a.file);
  // Every experiment's flags are checked before any runs.
  std::vector<DefaultArgs> args(exps.size());
  for (std::size_t i = 0; i < exps.size(); ++i) {
    CLI::App app;
    AddDefaultCommand(app, args[i]);
    std::vector<const char*> argv;
    for (const std::string& w : exps[i].argv) argv.push_back(w.c_str());
    try {
      app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::ParseError& e) {
      throw UsageError(a.file + ":" + std::to_string(exps[i].line) + ": experiment '" + exps[i].name +
                       "': " + e.what());
    }
    args[i].json = a.json;
    if (args[i].save_dir.empty() && !a.save_dir.empty())
      args[i].save_dir = (std::filesystem::path(a.save_dir) / exps[i].name).string();
  }
  Json all = Json::array();
  std::vector<int> codes(exps.size(), 0);
  std::vector<std::string> errors(exps.size());
  std::vector<Json> reports(exps.size());
  for (std::size_t i = 0; i < exps.size(); ++i) {
    if (!a.json)
      std::printf("%s== experiment %s (%s:%d) ==\n", i ? "\n" : "", exps[i].name.c_str(), a.file.c_str(), exps[i].line);
    std::fflush(stdout);
    DefaultOutcome out;
    out.quiet_json = true;
    try {
      codes[i] = RunDefault(args[i], find, &out);
    } catch (const perfdb::MissingDataError& e) {
      errors[i] = std::string("no data: ") + e.what(), codes[i] = 1;
    } catch (const UsageError& e) {
      errors[i] = e.what(), codes[i] = 2;
    } catch (const ConfigError& e) {
      errors[i] = e.what(), codes[i] = 2;
    } catch (const DataError& e) {
      errors[i] = e.what(), codes[i] = 2;
    }
    std::fflush(stdout);
    if (!errors[i].empty())
      std::fprintf(stderr, "servecast: experiment %s: %s\n", exps[i].name.c_str(), errors[i].c_str());
    reports[i] = std::move(out.json);
  }
  // The best: the highest tokens/s/GPU among the chosen deployments meeting the limits.
  int best = -1;
  double best_v = -1, next_v = -1;
  std::string next_name;
  for (std::size_t i = 0; i < exps.size(); ++i) {
    const Json* rep = nullptr;
    const Json* c = errors[i].empty() && !reports[i].is_null() ? Chosen(reports[i], &rep) : nullptr;
    if (!c || !(*c)["meets_sla"].get<bool>()) continue;
    const double v = (*c)["tokens_per_s_gpu"].get<double>();
    if (v > best_v) {
      if (best >= 0) next_v = best_v, next_name = exps[static_cast<std::size_t>(best)].name;
      best_v = v, best = static_cast<int>(i);
    } else if (v > next_v) {
      next_v = v, next_name = exps[i].name;
    }
  }
  int code = 0;
  for (int c : codes) code = std::max(code, c);
  if (a.json) {
    for (std::size_t i = 0; i < exps.size(); ++i) {
      Json e = {{"name", exps[i].name}, {"line", exps[i].line}, {"exit_code", codes[i]}};
      if (!errors[i].empty())
        e["error"] = errors[i];
      else
        e["report"] = reports[i];
      all.push_back(std::move(e));
    }
    Json j = {{"file", a.file},
              {"experiments", all},
              {"best", best >= 0 ? Json(exps[static_cast<std::size_t>(best)].name) : Json(nullptr)}};
    std::printf("%s\n", j.dump(2).c_str());
    return code;
  }
  std::string t = "\nexperiments of " + a.file + ": the chosen deployment of each\n";
  t += Row("  %-20s  %-20s  %-7s  %4s  %-6s  %-36s  %12s  %13s  %8s  %7s  %s\n", "experiment", "system", "engine",
           "gpus", "mode", "parallel", "tokens/s/gpu", "tokens/s/user", "TTFT ms", "TPOT ms", "meets limits");
  for (std::size_t i = 0; i < exps.size(); ++i) {
    const Json* rep = nullptr;
    const Json* c = errors[i].empty() && !reports[i].is_null() ? Chosen(reports[i], &rep) : nullptr;
    if (!errors[i].empty()) {
      t += Row("  %-20s  error: %s\n", exps[i].name.c_str(), errors[i].c_str());
    } else if (!c) {
      t += Row("  %-20s  %-20s  %-7s  no deployment found (exit %d)\n", exps[i].name.c_str(),
               rep->value("system", "").c_str(), rep->value("engine", "").c_str(), codes[i]);
    } else {
      std::string system = rep->value("system", "");
      if (rep->contains("decode_system")) system += "+" + (*rep)["decode_system"].get<std::string>();
      t += Row("  %-20s  %-20s  %-7s  %4d  %-6s  %-36s  %12.1f  %13.1f  %8.1f  %7.2f  %s\n", exps[i].name.c_str(),
               system.c_str(), rep->value("engine", "").c_str(), (*rep)["total_gpus"].get<int>(),
               (*c)["mode"].get<std::string>().c_str(), (*c)["parallel"].get<std::string>().c_str(),
               (*c)["tokens_per_s_gpu"].get<double>(), (*c)["tokens_per_s_user"].get<double>(),
               (*c)["ttft_ms"].get<double>(), (*c)["tpot_ms"].get<double>(),
               (*c)["meets_sla"].get<bool>() ? "yes" : "no");
    }
  }
  if (best < 0) {
    t += "best: none (no experiment's chosen deployment meets its limits)\n";
  } else {
    t += "best: " + exps[static_cast<std::size_t>(best)].name +
         ", the highest tokens/s/gpu among those meeting their limits";
    if (next_v > 0) t += Row(" (%.2fx %s's, the next)", best_v / next_v, next_name.c_str());
    t += "\n";
  }
  std::printf("%s", t.c_str());
  return code;
}

}  // namespace servecast::cli
