// Engine profiles from engines/*.yaml (src/serve/engine_profile.h).
#include "serve/engine_profile.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"

namespace servecast::serve {
namespace {

const std::string kEngines = std::string(SERVECAST_SOURCE_DIR) + "/engines";

std::string WriteProfile(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / "servecast_engine_profile_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream(path) << text;
  return path;
}

// A valid trtllm profile with `memory_tail` replacing the kv_budget line.
std::string Profile(const std::string& kv_line, const std::string& extra = "") {
  std::ifstream in(kEngines + "/trtllm.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto at = text.find("  kv_budget:");
  const auto end = text.find('\n', at);
  return text.substr(0, at) + kv_line + text.substr(end) + extra;
}

TEST(EngineProfile, ShippedProfilesLoad) {
  const EngineProfile t = LoadEngineProfileByName(kEngines, model::Engine::kTrtllm);
  EXPECT_EQ(t.engine, model::Engine::kTrtllm);
  EXPECT_EQ(t.memory.kv_budget.rule, KvBudgetRule::kOfFree);
  EXPECT_DOUBLE_EQ(t.memory.kv_budget.fraction, 0.9);
  EXPECT_DOUBLE_EQ(t.memory.kv_budget.reserved, 0.015);
  EXPECT_DOUBLE_EQ(t.memory.activation_floor_bytes, 70.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(t.memory.ActivationCoefficient(model::Family::kDense, 1), 11);
  EXPECT_DOUBLE_EQ(t.memory.ActivationCoefficient(model::Family::kDense, 2), 6.5);
  EXPECT_DOUBLE_EQ(t.memory.ActivationCoefficient(model::Family::kMoe, 4), 10);
  EXPECT_DOUBLE_EQ(t.memory.ActivationCoefficient(model::Family::kMoe, 16), 10);  // min(tp, 8)
  EXPECT_DOUBLE_EQ(t.memory.ActivationCoefficient(model::Family::kDense, 3), 6.5);  // bucket <= 3
  const EngineProfile v = LoadEngineProfileByName(kEngines, model::Engine::kVllm);
  EXPECT_EQ(v.memory.kv_budget.rule, KvBudgetRule::kOfTotal);
  const EngineProfile s = LoadEngineProfileByName(kEngines, model::Engine::kSglang);
  EXPECT_DOUBLE_EQ(s.memory.activation_factor, 1.15);
  EXPECT_DOUBLE_EQ(s.memory.other_bytes_factor, 1.2);
  EXPECT_DOUBLE_EQ(s.memory.ActivationCoefficient(model::Family::kDense, 1), 14);
}

void ExpectConfigError(const std::string& path, const std::string& fragment) {
  try {
    LoadEngineProfile(path);
    ADD_FAILURE() << "expected a ConfigError for " << path;
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << "no file in: " << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << "no '" << fragment << "' in: " << what;
  }
}

TEST(EngineProfile, UnknownKeyNamesFileAndLine) {
  const std::string path = WriteProfile("unknown_key.yaml", Profile("  kv_budget: {rule: of_free, fraction: 0.9, reserved: 0.015, tolerance: 0.02}", "bogus_section: 1\n"));
  ExpectConfigError(path, "bogus_section");
  try {
    LoadEngineProfile(path);
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":"), std::string::npos) << e.what();  // file:line
  }
}

TEST(EngineProfile, BadKvRule) {
  const std::string path =
      WriteProfile("bad_rule.yaml", Profile("  kv_budget: {rule: of_half, fraction: 0.9, reserved: 0.015, tolerance: 0.02}"));
  ExpectConfigError(path, "of_half");
  try {
    LoadEngineProfile(path);
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":"), std::string::npos) << e.what();
  }
}

TEST(EngineProfile, KvFractionOutOfRange) {
  const std::string path =
      WriteProfile("bad_fraction.yaml", Profile("  kv_budget: {rule: of_free, fraction: 1.5, reserved: 0.015, tolerance: 0.02}"));
  ExpectConfigError(path, "[0, 1]");
}

TEST(EngineProfile, MissingFileNamesIt) {
  EXPECT_THROW(LoadEngineProfileByName("/nonexistent/engines", model::Engine::kVllm), ConfigError);
}

}  // namespace
}  // namespace servecast::serve
