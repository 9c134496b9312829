// Declarative golden estimates (docs/estimator.md; design/STYLE.md "Tests"):
// every tests/goldens/static/*.yaml names a model, a fixture system, fixture perf
// tables and a workload, and lists fields of `servecast estimate --json` with
// hand-derived values. This runner runs the real binary once per file and checks
// every `expect` entry.
//
// File format:
//   model:  a path under the source tree (tests/goldens/models/<name>) or a bundled id
//   system: a spec under tests/goldens/systems/
//   data:   BACKEND/VERSION under tests/goldens/data/ (optional: SOL mode reads none)
//   args:   {flag: value} passed as --flag value (backend, database-mode, batch, isl, ...)
//   expect: list of {path, value, rtol (default 1e-9), atol (default 0)}
//           path: dotted fields of the JSON output; [i] indexes an array, [name]
//           picks the element whose "name" is `name` (context.ops[context_qkv_gemm].latency_ms).
//           value: a number (within tolerance), a bool or a string (equal).

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "process.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const std::string kGoldenBin = SERVECAST_BIN;
const std::string kGoldenSource = SERVECAST_SOURCE_DIR;
const std::string kGoldens = kGoldenSource + "/tests/goldens";

std::vector<std::string> GoldenFiles() {
  std::vector<std::string> out;
  const fs::path dir = fs::path(kGoldens) / "static";
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".yaml") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Follows a dotted path with [index] / [name] selectors; null when a step is missing.
const Json* Follow(const Json& root, const std::string& path, std::string& why) {
  const Json* cur = &root;
  std::stringstream ss(path);
  std::string seg;
  while (std::getline(ss, seg, '.')) {
    std::string field = seg, sel;
    const auto br = seg.find('[');
    if (br != std::string::npos) {
      field = seg.substr(0, br);
      sel = seg.substr(br + 1, seg.size() - br - 2);
    }
    if (!field.empty()) {
      if (!cur->is_object() || !cur->contains(field)) {
        why = "no field '" + field + "'";
        return nullptr;
      }
      cur = &(*cur)[field];
    }
    if (br == std::string::npos) continue;
    if (!cur->is_array()) {
      why = "'" + field + "' is not an array";
      return nullptr;
    }
    const bool numeric = !sel.empty() && std::all_of(sel.begin(), sel.end(), ::isdigit);
    if (numeric) {
      const std::size_t i = std::stoul(sel);
      if (i >= cur->size()) {
        why = "index " + sel + " beyond the " + std::to_string(cur->size()) + " elements of '" + field + "'";
        return nullptr;
      }
      cur = &(*cur)[i];
    } else {
      const Json* hit = nullptr;
      std::string names;
      for (const Json& e : *cur) {
        if (e.is_object() && e.contains("name")) {
          names += (names.empty() ? "" : ", ") + e["name"].get<std::string>();
          if (e["name"] == sel) hit = &e;
        }
      }
      if (!hit) {
        why = "no element named '" + sel + "' in '" + field + "' (names: " + names + ")";
        return nullptr;
      }
      cur = hit;
    }
  }
  return cur;
}

class GoldenStatic : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenStatic, MatchesHandDerivation) {
  const std::string name = GetParam();
  const std::string file = kGoldens + "/static/" + name + ".yaml";
  const YAML::Node g = YAML::LoadFile(file);
  ASSERT_TRUE(g["model"] && g["system"] && g["expect"]) << file << ": needs model, system and expect";

  std::string model = g["model"].as<std::string>();
  if (fs::exists(fs::path(kGoldenSource) / model)) model = (fs::path(kGoldenSource) / model).string();
  std::vector<std::string> argv = {kGoldenBin, "estimate", "--json", "--model", model, "--system",
                                   g["system"].as<std::string>(), "--systems", kGoldens + "/systems",
                                   "--data-root", kGoldens + "/data", "--engines", kGoldenSource + "/engines",
                                   "--models", kGoldenSource + "/models"};
  if (g["data"]) {
    argv.push_back("--data");
    argv.push_back(g["data"].as<std::string>());
  }
  if (g["args"]) {
    for (const auto& kv : g["args"]) {
      argv.push_back("--" + kv.first.as<std::string>());
      argv.push_back(kv.second.as<std::string>());
    }
  }
  std::string cmdline;
  for (const auto& a : argv) cmdline += (cmdline.empty() ? "" : " ") + a;

  const ProcessResult r = RunProcess(argv, 120);
  ASSERT_EQ(r.exit_code, 0) << name << ": " << cmdline << "\n--- stderr\n" << r.err << "\n--- stdout\n" << r.out;
  Json out;
  try {
    out = Json::parse(r.out);
  } catch (const std::exception& e) {
    FAIL() << name << ": stdout is not one JSON document (" << e.what() << ")\n" << r.out;
  }

  int checked = 0;
  for (const auto& e : g["expect"]) {
    ASSERT_TRUE(e["path"] && e["value"]) << file << ": every expect entry needs path and value";
    const std::string path = e["path"].as<std::string>();
    std::string why;
    const Json* got = Follow(out, path, why);
    if (!got) {
      ADD_FAILURE() << "[" << name << "] " << path << ": " << why;
      continue;
    }
    ++checked;
    const YAML::Node v = e["value"];
    const std::string text = v.as<std::string>();
    if (text == "true" || text == "false") {
      EXPECT_TRUE(got->is_boolean() && got->get<bool>() == (text == "true"))
          << "[" << name << "] " << path << ": expected " << text << ", got " << got->dump();
      continue;
    }
    double expected = 0;
    bool is_number = true;
    try {
      expected = v.as<double>();
    } catch (const YAML::Exception&) {
      is_number = false;
    }
    if (!is_number) {
      EXPECT_TRUE(got->is_string() && got->get<std::string>() == text)
          << "[" << name << "] " << path << ": expected \"" << text << "\", got " << got->dump();
      continue;
    }
    if (!got->is_number()) {
      ADD_FAILURE() << "[" << name << "] " << path << ": expected " << text << ", got " << got->dump();
      continue;
    }
    const double rtol = e["rtol"] ? e["rtol"].as<double>() : 1e-9;
    const double atol = e["atol"] ? e["atol"].as<double>() : 0.0;
    const double actual = got->get<double>();
    const double tol = atol + rtol * std::abs(expected);
    EXPECT_LE(std::abs(actual - expected), tol)
        << "[" << name << "] " << path << ": expected " << std::setprecision(12) << expected << ", got " << actual
        << " (rel. error " << (expected != 0 ? (actual - expected) / expected : actual) << ", rtol " << rtol
        << ")\n  command: " << cmdline;
  }
  EXPECT_GT(checked, 0) << name << ": no expect entry was checked";
}

INSTANTIATE_TEST_SUITE_P(Goldens, GoldenStatic, ::testing::ValuesIn(GoldenFiles()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           std::replace_if(n.begin(), n.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return n;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GoldenStatic);

}  // namespace
}  // namespace servecast::testing
