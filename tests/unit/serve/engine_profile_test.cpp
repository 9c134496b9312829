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
  EXPECT_DOUBLE_EQ(t.memory.ActivationCoefficient("dense", 1), 11);
  EXPECT_DOUBLE_EQ(t.memory.ActivationCoefficient("dense", 2), 6.5);
  EXPECT_DOUBLE_EQ(t.memory.ActivationCoefficient("moe", 4), 10);
  EXPECT_DOUBLE_EQ(t.memory.ActivationCoefficient("moe", 16), 10);  // min(tp, 8)
  EXPECT_DOUBLE_EQ(t.memory.ActivationCoefficient("dense", 3), 6.5);  // bucket <= 3
  const EngineProfile v = LoadEngineProfileByName(kEngines, model::Engine::kVllm);
  EXPECT_EQ(v.memory.kv_budget.rule, KvBudgetRule::kOfTotal);
  const EngineProfile s = LoadEngineProfileByName(kEngines, model::Engine::kSglang);
  EXPECT_DOUBLE_EQ(s.memory.activation_factor, 1.15);
  EXPECT_DOUBLE_EQ(s.memory.other_bytes_factor, 1.2);
  EXPECT_DOUBLE_EQ(s.memory.ActivationCoefficient("dense", 1), 14);
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

// A valid trtllm profile with `queue_line` replacing its ttft_queue line and `agg_extra` after max_num_tokens.
std::string QueueProfile(const std::string& queue_line, const std::string& agg_extra = "") {
  std::ifstream in(kEngines + "/trtllm.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto at = text.find("  ttft_queue:");
  text = text.substr(0, at) + queue_line + text.substr(text.find('\n', at));
  const auto mnt = text.find('\n', text.find("  max_num_tokens:"));
  return text.substr(0, mnt + 1) + agg_extra + text.substr(mnt + 1);
}

TEST(EngineProfile, SglangDefaultsQueueBehindPrefillsAicKeepsItsFactor) {
  const EngineProfile s = LoadEngineProfileByName(kEngines, model::Engine::kSglang);
  EXPECT_EQ(s.agg.queue_rule, AggProfile::QueueRule::kPrefillQueue);
  EXPECT_DOUBLE_EQ(s.agg.queue_share, 0.1);
  EXPECT_EQ(s.agg.default_ctx_tokens, 8192);
  EXPECT_DOUBLE_EQ(s.agg.QueueFactor(512, 60), 1.0);  // no factor: the wait is added
  const EngineProfile a = LoadEngineProfileByName(kEngines, model::Engine::kSglang, "aic");
  EXPECT_EQ(a.agg.queue_rule, AggProfile::QueueRule::kLinear);
  EXPECT_EQ(a.agg.default_ctx_tokens, 0);  // optional key, absent from AIC's files: C = isl
  EXPECT_DOUBLE_EQ(a.agg.QueueFactor(8, 23), 3.0);  // min(2 + (23 - 3) x 0.05, 4)
  EXPECT_DOUBLE_EQ(a.agg.QueueWaitMs(512, 1000, 1000, 10), 0.0);
}

TEST(EngineProfile, PrefillQueueWaitIsShareOfOtherPrompts) {
  AggProfile a;
  a.queue_rule = AggProfile::QueueRule::kPrefillQueue;
  a.queue_share = 0.1;
  // 0.1 x (161 - 1) others x 1000 / 8000 of a 100 ms step each = 16 x 12.5 = 200 ms
  EXPECT_DOUBLE_EQ(a.QueueWaitMs(161, 1000, 8000, 100), 200.0);
  // chunked prompt (isl 16000 > C 8192): each waiting prompt costs 16000 / 8192 steps
  EXPECT_DOUBLE_EQ(a.QueueWaitMs(11, 16000, 8192, 40), 0.1 * 10 * 16000.0 / 8192.0 * 40);
  EXPECT_DOUBLE_EQ(a.QueueWaitMs(1, 1000, 8000, 100), 0.0);  // alone: nobody ahead
  a.queue_share = 0;
  EXPECT_DOUBLE_EQ(a.QueueWaitMs(161, 1000, 8000, 100), 0.0);
}

TEST(EngineProfile, DefaultCtxTokensInWholePromptsUpToTheBatch) {
  AggProfile a;
  EXPECT_EQ(a.CtxTokens(1000, 64), 1000);  // no default budget: isl (AIC's convention)
  a.default_ctx_tokens = 8192;
  EXPECT_EQ(a.CtxTokens(1000, 160), 8000);  // 8 whole prompts fit
  EXPECT_EQ(a.CtxTokens(1000, 3), 3000);    // only 3 requests to prefill
  EXPECT_EQ(a.CtxTokens(1000, 1), 1000);
  EXPECT_EQ(a.CtxTokens(8000, 20), 8000);   // one prompt per step
  EXPECT_EQ(a.CtxTokens(8192, 20), 8192);
  EXPECT_EQ(a.CtxTokens(16000, 4), 8192);   // chunked prefill: the budget
}

TEST(EngineProfile, PrefillQueueRuleParses) {
  const EngineProfile p = LoadEngineProfile(WriteProfile(
      "prefill_queue.yaml",
      QueueProfile("  ttft_queue: {rule: prefill_queue, share: 0.25}\n", "  default_ctx_tokens: 4096\n")));
  EXPECT_EQ(p.agg.queue_rule, AggProfile::QueueRule::kPrefillQueue);
  EXPECT_DOUBLE_EQ(p.agg.queue_share, 0.25);
  EXPECT_EQ(p.agg.default_ctx_tokens, 4096);
  ExpectConfigError(
      WriteProfile("pq_slope.yaml", QueueProfile("  ttft_queue: {rule: prefill_queue, share: 0.1, slope: 1}\n")),
      "slope");
  ExpectConfigError(WriteProfile("pq_share.yaml", QueueProfile("  ttft_queue: {rule: prefill_queue, share: 1.5}\n")),
                    "share");
  ExpectConfigError(WriteProfile("pq_rule.yaml", QueueProfile("  ttft_queue: {rule: erlang, share: 0.1}\n")),
                    "prefill_queue");
  ExpectConfigError(WriteProfile("pq_budget.yaml", QueueProfile("  ttft_queue: {rule: prefill_queue, share: 0.1}\n",
                                                                "  default_ctx_tokens: -1\n")),
                    "default_ctx_tokens");
}

TEST(EngineProfile, MissingFileNamesIt) {
  EXPECT_THROW(LoadEngineProfileByName("/nonexistent/engines", model::Engine::kVllm), ConfigError);
}

}  // namespace
}  // namespace servecast::serve
