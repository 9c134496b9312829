#include "collect/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "collect_test_util.h"
#include "core/error.h"
#include "core/fs.h"

namespace servecast::collect {
namespace {

using namespace servecast::collect::testing;

// 3 m x 2 n x 2 profiles = 12 cases.
const char* kGrid = R"(op: tgemm
sweeps:
  - backends: [test]
    axes:
      m: [1, 2, 3]
      n: [8, 16]
    profiles:
      - {gemm_dtype: bfloat16, k: 32}
      - {gemm_dtype: fp8, k: 64}
)";

std::string Grid(const std::string& op) {
  std::string s = kGrid;
  s.replace(s.find("tgemm"), 5, op);
  return s;
}

std::set<std::string> FullGridIds(const std::string& op = "tgemm") {
  std::set<std::string> ids;
  for (std::int64_t m : {1, 2, 3})
    for (std::int64_t n : {8, 16}) {
      ids.insert(GemmId(op, "bfloat16", m, n, 32));
      ids.insert(GemmId(op, "fp8", m, n, 64));
    }
  return ids;
}

std::set<std::string> IdSet(const std::vector<Case>& cases) {
  auto ids = Ids(cases);
  return {ids.begin(), ids.end()};
}

std::vector<const DroppedCase*> DroppedAt(const Plan& plan, const std::string& stage) {
  std::vector<const DroppedCase*> out;
  for (const auto& d : plan.dropped)
    if (d.stage == stage) out.push_back(&d);
  return out;
}

class PlanTest : public ::testing::Test {
 protected:
  Plan Build(const PlanOptions& opt, const RuntimeInfo& rt = TestRuntime()) { return BuildPlan(*registry_, opt, rt); }
  CasesDir cases_;
  std::unique_ptr<Registry> registry_ = MakeRegistry(std::vector<std::string>{"tgemm"});
};

TEST_F(PlanTest, AxesCrossProfilesIsTheFullCartesianProduct) {
  cases_.BaseOp("tgemm.yaml", kGrid);
  Plan plan = Build(Options(cases_, {"tgemm"}));
  EXPECT_EQ(plan.backend, "test");
  EXPECT_EQ(plan.ops, std::vector<std::string>{"tgemm"});
  ASSERT_EQ(plan.cases.size(), 12u);
  EXPECT_EQ(IdSet(plan.cases), FullGridIds());
  const StageCounts& c = plan.counts.at("tgemm");
  EXPECT_EQ(c.raw, 12);
  EXPECT_EQ(c.selected, 12);
  EXPECT_EQ(c.after_skips, 12);
  EXPECT_EQ(c.after_maturity, 12);
  EXPECT_EQ(c.supported, 12);
  EXPECT_EQ(c.after_shard, 12);
  EXPECT_EQ(c.final, 12);
  EXPECT_EQ(plan.supported_total, 12);
  EXPECT_TRUE(plan.dropped.empty());
}

TEST_F(PlanTest, CaseParamsAreKeyColumnsInTableOrderThenTheRestByName) {
  cases_.BaseOp("tgemm.yaml", R"(op: tgemm
sweeps:
  - backends: [test]
    fixed: {zeta: 1, k: 128, alpha: x, gemm_dtype: bfloat16}
    axes:
      n: [8]
      m: [4]
)");
  Plan plan = Build(Options(cases_));
  ASSERT_EQ(plan.cases.size(), 1u);
  const Case& c = plan.cases[0];
  EXPECT_EQ(c.op, "tgemm");
  EXPECT_EQ(c.id, "tgemm:gemm_dtype=bfloat16,m=4,n=8,k=128,alpha=x,zeta=1");
  EXPECT_EQ(c.id, MakeCaseId("tgemm", c.params));
  EXPECT_EQ(c.params.Str("alpha"), "x");
  EXPECT_EQ(c.params.Int("zeta"), 1);
  EXPECT_EQ(c.owner, "tgemm.yaml:3");
}

TEST_F(PlanTest, FixedValuesAndValueTypes) {
  cases_.BaseOp("tgemm.yaml", R"(op: tgemm
sweeps:
  - backends: [test]
    fixed: {gemm_dtype: bfloat16, k: 128, scale: 0.5}
    axes:
      m: [1, 2]
      n: 8
)");
  Plan plan = Build(Options(cases_));
  ASSERT_EQ(plan.cases.size(), 2u);
  for (const auto& c : plan.cases) {
    EXPECT_EQ(c.params.Str("gemm_dtype"), "bfloat16");
    EXPECT_EQ(c.params.Int("k"), 128);
    EXPECT_EQ(c.params.Int("n"), 8);  // a scalar axis is a one-value list
    EXPECT_EQ(TypeOf(c.params.Get("scale")), ValueType::kDouble);
  }
  EXPECT_EQ(IdSet(plan.cases), (std::set<std::string>{GemmId("tgemm", "bfloat16", 1, 8, 128, ",scale=0.5"),
                                                      GemmId("tgemm", "bfloat16", 2, 8, 128, ",scale=0.5")}));
}

TEST_F(PlanTest, WhereFiltersKeepOnlyMatchingCases) {
  cases_.BaseOp("tgemm.yaml", R"(op: tgemm
sweeps:
  - backends: [test]
    axes:
      m: [1, 2, 3]
      n: [8, 16]
    profiles:
      - {gemm_dtype: bfloat16, k: 32}
      - {gemm_dtype: fp8, k: 64}
    where:
      - m * n <= 16
      - gemm_dtype == "bfloat16" || k > 100
)");
  Plan plan = Build(Options(cases_));
  EXPECT_EQ(IdSet(plan.cases),
            (std::set<std::string>{GemmId("tgemm", "bfloat16", 1, 8, 32), GemmId("tgemm", "bfloat16", 1, 16, 32),
                                   GemmId("tgemm", "bfloat16", 2, 8, 32)}));
  EXPECT_EQ(plan.counts.at("tgemm").raw, 3);  // where filters shape the grid itself
}

TEST_F(PlanTest, WhereWithAnUnknownParameterIsConfigError) {
  cases_.BaseOp("tgemm.yaml", R"(op: tgemm
sweeps:
  - backends: [test]
    fixed: {gemm_dtype: bfloat16, k: 32, n: 8, m: 1}
    where: "num_tokens > 4"
)");
  std::string msg = ThrownMessage<ConfigError>([&] { Build(Options(cases_)); });
  EXPECT_TRUE(HasText(msg, "tgemm.yaml:3"));
  EXPECT_TRUE(HasText(msg, "unknown parameter 'num_tokens'"));
}

TEST_F(PlanTest, IdenticalCasesFromTwoSweepsAreDeduplicated) {
  const char* sweep = R"(op: tgemm
sweeps:
  - backends: [test]
    fixed: {gemm_dtype: bfloat16, n: 8, k: 32}
    axes:
      m: %s
)";
  auto with = [&](const std::string& ms) {
    std::string s = sweep;
    s.replace(s.find("%s"), 2, ms);
    return s;
  };
  cases_.BaseOp("a.yaml", with("[1, 2]"));
  cases_.BaseOp("b.yaml", with("[2, 3]"));
  Plan plan = Build(Options(cases_));
  EXPECT_EQ(Ids(plan.cases),
            (std::vector<std::string>{GemmId("tgemm", "bfloat16", 1, 8, 32), GemmId("tgemm", "bfloat16", 2, 8, 32),
                                      GemmId("tgemm", "bfloat16", 3, 8, 32)}));
  EXPECT_EQ(plan.counts.at("tgemm").raw, 3);
  EXPECT_EQ(plan.cases[1].owner, "a.yaml:3");  // the first sweep owns a shared case
  EXPECT_EQ(plan.cases[2].owner, "b.yaml:3");
}

TEST_F(PlanTest, TwoInvocationsWithOneTableKeyIsAnErrorNamingBothOwners) {
  cases_.BaseOp("a.yaml", R"(op: tgemm
sweeps:
  - backends: [test]
    fixed: {gemm_dtype: bfloat16, m: 1, n: 8, k: 32, algo: 1}
)");
  cases_.BaseOp("b.yaml", R"(op: tgemm
description: the same GEMM with another algorithm
sweeps:
  - backends: [test]
    fixed: {gemm_dtype: bfloat16, m: 1, n: 8, k: 32, algo: 2}
)");
  std::string msg = ThrownMessage<ConfigError>([&] { Build(Options(cases_)); });
  EXPECT_TRUE(HasText(msg, "'" + GemmId("tgemm", "bfloat16", 1, 8, 32, ",algo=1") + "' (from a.yaml:3)"));
  EXPECT_TRUE(HasText(msg, "'" + GemmId("tgemm", "bfloat16", 1, 8, 32, ",algo=2") + "' (from b.yaml:4)"));
  EXPECT_TRUE(HasText(msg, "gemm_perf"));
}

TEST_F(PlanTest, AParameterGivenTwiceIsConfigError) {
  cases_.BaseOp("tgemm.yaml", R"(op: tgemm
sweeps:
  - backends: [test]
    fixed: {gemm_dtype: bfloat16, m: 1, n: 8, k: 32}
    axes:
      m: [1, 2]
)");
  std::string msg = ThrownMessage<ConfigError>([&] { Build(Options(cases_)); });
  EXPECT_TRUE(HasText(msg, "tgemm.yaml:3: key 'm': parameter given twice"));
}

TEST_F(PlanTest, AProfileReplacesTheAxesItNames) {
  // n and k are axes; a profile naming n and k fixes them instead of being crossed with them.
  cases_.BaseOp("tgemm.yaml", R"(op: tgemm
sweeps:
  - backends: [test]
    fixed: {gemm_dtype: bfloat16}
    axes:
      m: [1, 2]
      n: [8, 16]
      k: [32]
    profiles:
      - {}
      - {n: 24, k: 2048}
)");
  Plan plan = Build(Options(cases_));
  EXPECT_EQ(IdSet(plan.cases), (std::set<std::string>{
                                   GemmId("tgemm", "bfloat16", 1, 8, 32),
                                   GemmId("tgemm", "bfloat16", 2, 8, 32),
                                   GemmId("tgemm", "bfloat16", 1, 16, 32),
                                   GemmId("tgemm", "bfloat16", 2, 16, 32),
                                   GemmId("tgemm", "bfloat16", 1, 24, 2048),
                                   GemmId("tgemm", "bfloat16", 2, 24, 2048),
                               }));
}

TEST_F(PlanTest, MissingRequiredParameterIsConfigErrorNamingIt) {
  cases_.BaseOp("tgemm.yaml", R"(op: tgemm
sweeps:
  - backends: [test]
    fixed: {gemm_dtype: bfloat16, m: 1, n: 8}
)");
  std::string msg = ThrownMessage<ConfigError>([&] { Build(Options(cases_)); });
  EXPECT_TRUE(HasText(msg, "tgemm.yaml:3: key 'k'"));
  EXPECT_TRUE(HasText(msg, "op 'tgemm' needs parameter 'k'"));
}

TEST_F(PlanTest, MisspelledSweepKeyIsConfigErrorWithItsLine) {
  cases_.BaseOp("tgemm.yaml", R"(op: tgemm
sweeps:
  - backends: [test]
    fixed: {gemm_dtype: bfloat16, m: 1, n: 8, k: 32}
    wehre: m > 1
)");
  std::string msg = ThrownMessage<ConfigError>([&] { Build(Options(cases_)); });
  EXPECT_TRUE(HasText(msg, "tgemm.yaml:5: key 'sweeps[0].wehre': unknown key"));
}

TEST_F(PlanTest, SweepsForOtherBackendsAreIgnored) {
  cases_.BaseOp("tgemm.yaml", R"(op: tgemm
sweeps:
  - backends: [cuda]
    fixed: {gemm_dtype: fp8, m: 1, n: 8, k: 32}
  - backends: [cpu, test]
    fixed: {gemm_dtype: bfloat16, m: 1, n: 8, k: 32}
)");
  Plan plan = Build(Options(cases_));
  EXPECT_EQ(Ids(plan.cases), std::vector<std::string>{GemmId("tgemm", "bfloat16", 1, 8, 32)});
}

const char* kModelSweeps = R"(op: tgemm
sweeps:
  - backends: [test]
    model_shapes: true
    axes:
      m: [1, 2]
    profiles:
      - {gemm_dtype: bfloat16, n: 8, k: 32}
  - backends: [test]
    axes:
      m: [5]
    profiles:
      - {gemm_dtype: bfloat16, n: 8, k: 32}
)";
const char* kAlpha = R"(model: Alpha-7B
aliases: [alpha7b]
ops:
  tgemm:
    profiles:
      - {gemm_dtype: bfloat16, n: 4096, k: 4096}
      - {gemm_dtype: bfloat16, n: 8, k: 32}
)";
const char* kBeta = R"(model: Beta
ops:
  tgemm:
    profiles:
      - {gemm_dtype: fp8, n: 1024, k: 2048}
)";

class ModelPlanTest : public PlanTest {
 protected:
  void SetUp() override {
    cases_.BaseOp("tgemm.yaml", kModelSweeps);
    cases_.Model("alpha.yaml", kAlpha);
    cases_.Model("beta.yaml", kBeta);
  }
  Plan WithModels(std::vector<std::string> models) {
    PlanOptions opt = Options(cases_);
    opt.models = std::move(models);
    return Build(opt);
  }
};

TEST_F(ModelPlanTest, ModelShapesJoinOnlySweepsThatAskForThem) {
  Plan plan = Build(Options(cases_));
  EXPECT_EQ(IdSet(plan.cases), (std::set<std::string>{
                                   GemmId("tgemm", "bfloat16", 1, 8, 32),
                                   GemmId("tgemm", "bfloat16", 2, 8, 32),
                                   GemmId("tgemm", "bfloat16", 5, 8, 32),  // the second sweep's own profile
                                   GemmId("tgemm", "bfloat16", 1, 4096, 4096),
                                   GemmId("tgemm", "bfloat16", 2, 4096, 4096),
                                   GemmId("tgemm", "fp8", 1, 1024, 2048),
                                   GemmId("tgemm", "fp8", 2, 1024, 2048),
                               }));
  EXPECT_EQ(plan.counts.at("tgemm").raw, 7);
  for (const auto& c : plan.cases) {
    if (c.params.Int("n") == 4096) {
      EXPECT_EQ(c.owner, "alpha.yaml");
    }
  }
}

TEST_F(ModelPlanTest, ModelSelectionKeepsTheCasesTheModelNeeds) {
  const std::set<std::string> alpha = {
      GemmId("tgemm", "bfloat16", 1, 8, 32), GemmId("tgemm", "bfloat16", 2, 8, 32),  // shared with the base sweep
      GemmId("tgemm", "bfloat16", 1, 4096, 4096), GemmId("tgemm", "bfloat16", 2, 4096, 4096)};
  Plan plan = WithModels({"Alpha-7B"});
  EXPECT_EQ(IdSet(plan.cases), alpha);
  EXPECT_EQ(plan.counts.at("tgemm").raw, 7);
  EXPECT_EQ(plan.counts.at("tgemm").selected, 4);
  // An alias and the file name select the same model.
  EXPECT_EQ(IdSet(WithModels({"alpha7b"}).cases), alpha);
  EXPECT_EQ(IdSet(WithModels({"alpha"}).cases), alpha);

  EXPECT_EQ(IdSet(WithModels({"Beta"}).cases),
            (std::set<std::string>{GemmId("tgemm", "fp8", 1, 1024, 2048), GemmId("tgemm", "fp8", 2, 1024, 2048)}));
  EXPECT_EQ(WithModels({"Alpha-7B", "Beta"}).cases.size(), 6u);
}

TEST_F(ModelPlanTest, UnknownModelIsUsageError) {
  std::string msg = ThrownMessage<UsageError>([&] { WithModels({"Gamma"}); });
  EXPECT_TRUE(HasText(msg, "unknown model 'Gamma'"));
  EXPECT_TRUE(HasText(msg, "Alpha-7B, Beta"));
}

TEST_F(PlanTest, ModelFileForAnUnknownOpIsConfigError) {
  cases_.BaseOp("tgemm.yaml", kGrid);
  cases_.Model("m.yaml", "model: M\nops:\n  no_such_op:\n    profiles:\n      - {m: 1}\n");
  std::string msg = ThrownMessage<ConfigError>([&] { Build(Options(cases_)); });
  EXPECT_TRUE(HasText(msg, "m.yaml"));
  EXPECT_TRUE(HasText(msg, "no backend registers op 'no_such_op'"));
}

TEST_F(PlanTest, CaseFiltersOrWithinAKeyAndAcrossKeys) {
  cases_.BaseOp("tgemm.yaml", kGrid);
  PlanOptions opt = Options(cases_);
  opt.case_filters = {{"m", "1"}, {"gemm_dtype", "fp8"}, {"m", "2"}};
  Plan plan = Build(opt);
  EXPECT_EQ(IdSet(plan.cases),
            (std::set<std::string>{GemmId("tgemm", "fp8", 1, 8, 64), GemmId("tgemm", "fp8", 1, 16, 64),
                                   GemmId("tgemm", "fp8", 2, 8, 64), GemmId("tgemm", "fp8", 2, 16, 64)}));
  EXPECT_EQ(plan.counts.at("tgemm").raw, 12);
  EXPECT_EQ(plan.counts.at("tgemm").selected, 4);

  opt.case_filters = {{"n", "99"}};
  EXPECT_TRUE(Build(opt).cases.empty());
  // A parameter no case has is a typo, named with the parameters there are.
  opt.case_filters = {{"no_such_param", "1"}};
  try {
    Build(opt);
    ADD_FAILURE() << "a filter on an unknown parameter was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no case of the planned ops has a parameter 'no_such_param'"),
              std::string::npos)
        << e.what();
  }
}

const char* kSkips = R"(skips:
  - op: tgemm
    when: "m == 1 && gemm_dtype == 'fp8'"
    reason: fp8 kernel rejects m=1
    source: https://example.invalid/issues/1
  - op: tgemm
    sm: [80, 89]
    when: n == 16
    reason: broken on sm80-89
    source: test log
  - op: tgemm
    backend: cpu
    when: m == 2
    reason: other backend only
    source: test
  - op: other_op
    when: m == 3
    reason: another op
    source: test
)";

TEST_F(PlanTest, SkipsDropMatchingCasesWithReasonAndSource) {
  cases_.BaseOp("tgemm.yaml", kGrid);
  cases_.Skips(kSkips);
  Plan plan = Build(Options(cases_));  // SM 90: only the first rule applies
  auto skipped = DroppedAt(plan, "skips");
  ASSERT_EQ(skipped.size(), 2u);
  for (const auto* d : skipped) {
    EXPECT_EQ(d->c.params.Int("m"), 1);
    EXPECT_EQ(d->c.params.Str("gemm_dtype"), "fp8");
    EXPECT_EQ(d->reason, "fp8 kernel rejects m=1 (source: https://example.invalid/issues/1)");
  }
  EXPECT_EQ(plan.cases.size(), 10u);
  EXPECT_EQ(plan.counts.at("tgemm").after_skips, 10);
  for (const auto& c : plan.cases) EXPECT_FALSE(c.params.Int("m") == 1 && c.params.Str("gemm_dtype") == "fp8");
}

TEST_F(PlanTest, SkipSmRangeAppliesOnlyInsideIt) {
  cases_.BaseOp("tgemm.yaml", kGrid);
  cases_.Skips(kSkips);
  Plan ada = Build(Options(cases_), TestRuntime(89));
  // Rule 1 (2 cases) plus rule 2 (all 6 with n = 16, one of them already skipped).
  EXPECT_EQ(DroppedAt(ada, "skips").size(), 7u);
  EXPECT_EQ(ada.cases.size(), 5u);
  for (const auto& c : ada.cases) EXPECT_EQ(c.params.Int("n"), 8);
  EXPECT_EQ(DroppedAt(Build(Options(cases_), TestRuntime(80)), "skips").size(), 7u);
  EXPECT_EQ(DroppedAt(Build(Options(cases_), TestRuntime(79)), "skips").size(), 2u);
  EXPECT_EQ(DroppedAt(Build(Options(cases_), TestRuntime(90)), "skips").size(), 2u);
}

TEST_F(PlanTest, SkipEntriesNeedReasonAndSource) {
  cases_.BaseOp("tgemm.yaml", kGrid);
  cases_.Skips("skips:\n  - op: tgemm\n    when: m == 1\n    source: test\n");
  std::string msg = ThrownMessage<ConfigError>([&] { Build(Options(cases_)); });
  EXPECT_TRUE(HasText(msg, "skips.yaml:2: key 'skips[0].reason': missing key"));

  cases_.Skips("skips:\n  - op: tgemm\n    when: m == 1\n    reason: because\n");
  msg = ThrownMessage<ConfigError>([&] { Build(Options(cases_)); });
  EXPECT_TRUE(HasText(msg, "skips.yaml:2: key 'skips[0].source': missing key"));

  cases_.Skips("skips:\n  - op: tgemm\n    when: m == 1\n    reason: ''\n    source: test\n");
  msg = ThrownMessage<ConfigError>([&] { Build(Options(cases_)); });
  EXPECT_TRUE(HasText(msg, "skips[0].reason"));
  EXPECT_TRUE(HasText(msg, "empty"));
}

TEST_F(PlanTest, SkipEntryWithoutPredicateOrWithBadFieldsIsRefused) {
  cases_.BaseOp("tgemm.yaml", kGrid);
  cases_.Skips("skips:\n  - op: tgemm\n    reason: all of it\n    source: test\n");
  EXPECT_TRUE(HasText(ThrownMessage<ConfigError>([&] { Build(Options(cases_)); }), "without a predicate"));

  cases_.Skips("skips:\n  - op: tgemm\n    when: m == 1\n    reason: r\n    source: s\n    sm: [80]\n");
  EXPECT_TRUE(HasText(ThrownMessage<ConfigError>([&] { Build(Options(cases_)); }), "[min, max]"));

  cases_.Skips("skips:\n  - op: tgemm\n    when: m ==\n    reason: r\n    source: s\n");
  EXPECT_TRUE(HasText(ThrownMessage<ConfigError>([&] { Build(Options(cases_)); }), "skips[0].when"));

  cases_.Skips("skips:\n  - op: tgemm\n    whne: m == 1\n    reason: r\n    source: s\n");
  EXPECT_TRUE(
      HasText(ThrownMessage<ConfigError>([&] { Build(Options(cases_)); }), "skips.yaml:3: key 'skips[0].whne'"));
}

TEST(LoadSkipsTest, AbsentFileHasNoRulesAndFieldsAreRead) {
  TempDir dir;
  EXPECT_TRUE(LoadSkips(dir.File("skips.yaml")).empty());
  WriteFileAtomic(dir.File("skips.yaml"), kSkips);
  auto rules = LoadSkips(dir.File("skips.yaml"));
  ASSERT_EQ(rules.size(), 4u);
  EXPECT_EQ(rules[0].op, "tgemm");
  EXPECT_EQ(rules[0].backend, "");
  EXPECT_TRUE(rules[0].when.has_value());
  EXPECT_EQ(rules[0].source, "https://example.invalid/issues/1");
  EXPECT_EQ(rules[1].min_sm, 80);
  EXPECT_EQ(rules[1].max_sm, 89);
  EXPECT_EQ(rules[2].backend, "cpu");
  EXPECT_TRUE(HasText(rules[1].where, "skips.yaml:6"));
}

TEST_F(PlanTest, UnverifiedOpIsDroppedUnlessIncluded) {
  std::vector<std::unique_ptr<Op>> ops;
  ops.push_back(std::make_unique<TestOp>("tgemm", /*unverified=*/true));
  registry_ = MakeRegistry(std::move(ops));
  cases_.BaseOp("tgemm.yaml", kGrid);
  Plan plan = Build(Options(cases_));
  EXPECT_TRUE(plan.cases.empty());
  auto dropped = DroppedAt(plan, "maturity");
  ASSERT_EQ(dropped.size(), 12u);
  EXPECT_TRUE(HasText(dropped[0]->reason, "unverified"));
  EXPECT_EQ(plan.counts.at("tgemm").after_skips, 12);
  EXPECT_EQ(plan.counts.at("tgemm").after_maturity, 0);

  PlanOptions opt = Options(cases_);
  opt.include_unverified = true;
  Plan all = Build(opt);
  EXPECT_EQ(all.cases.size(), 12u);
  EXPECT_TRUE(all.dropped.empty());
}

TEST_F(PlanTest, UnmetRequirementsDropCasesWithEvidence) {
  Requirement fp8_needs_v2;
  fp8_needs_v2.applies_when = "gemm_dtype == 'fp8'";
  fp8_needs_v2.library = "testlib";
  fp8_needs_v2.min_version = "2.0";
  std::vector<std::unique_ptr<Op>> ops;
  ops.push_back(std::make_unique<TestOp>("tgemm", false, std::vector<Requirement>{fp8_needs_v2}));
  registry_ = MakeRegistry(std::move(ops));
  cases_.BaseOp("tgemm.yaml", kGrid);

  Plan plan = Build(Options(cases_));  // testlib 1.5
  auto dropped = DroppedAt(plan, "requirements");
  ASSERT_EQ(dropped.size(), 6u);
  for (const auto* d : dropped) {
    EXPECT_EQ(d->c.params.Str("gemm_dtype"), "fp8");
    EXPECT_EQ(d->reason, "requires testlib >= 2.0; found 1.5");
  }
  EXPECT_EQ(plan.cases.size(), 6u);
  EXPECT_EQ(plan.counts.at("tgemm").after_maturity, 12);
  EXPECT_EQ(plan.counts.at("tgemm").supported, 6);
  EXPECT_EQ(plan.supported_total, 6);

  RuntimeInfo newer = TestRuntime();
  newer.libraries["testlib"] = "2.0.1";
  EXPECT_EQ(Build(Options(cases_), newer).cases.size(), 12u);
}

TEST(InShardTest, RoundRobinByPosition) {
  EXPECT_TRUE(InShard(5, 0, 1));
  EXPECT_TRUE(InShard(0, 0, 3));
  EXPECT_TRUE(InShard(4, 1, 3));
  EXPECT_FALSE(InShard(4, 0, 3));
  EXPECT_TRUE(InShard(5, 2, 3));
}

TEST_F(PlanTest, ShardsAreDisjointAndCoverThePlan) {
  cases_.BaseOp("tgemm.yaml", kGrid);
  Plan whole = Build(Options(cases_));
  std::set<std::string> seen;
  std::size_t total = 0;
  for (int i = 0; i < 5; ++i) {
    PlanOptions opt = Options(cases_);
    opt.shard_index = i;
    opt.shard_count = 5;
    Plan shard = Build(opt);
    total += shard.cases.size();
    for (const auto& id : Ids(shard.cases)) EXPECT_TRUE(seen.insert(id).second) << id << " is in two shards";
    EXPECT_EQ(shard.counts.at("tgemm").after_shard, static_cast<std::int64_t>(shard.cases.size()));
    EXPECT_EQ(shard.plan_hash, whole.plan_hash);
    EXPECT_EQ(Ids(shard.supported), Ids(whole.supported));  // every shard knows the full plan
    EXPECT_EQ(shard.supported_total, 12);
    EXPECT_GE(shard.cases.size(), 2u);  // 12 cases over 5 shards: 3, 3, 2, 2, 2
    EXPECT_LE(shard.cases.size(), 3u);
  }
  EXPECT_EQ(total, 12u);
  EXPECT_EQ(seen, IdSet(whole.cases));
}

TEST_F(PlanTest, ShuffleIsDeterministicBySeed) {
  cases_.BaseOp("tgemm.yaml", kGrid);
  PlanOptions opt = Options(cases_);
  Plan sorted = Build(opt);
  opt.shuffle = true;
  opt.seed = 42;
  Plan a = Build(opt), b = Build(opt);
  EXPECT_EQ(Ids(a.cases), Ids(b.cases));
  EXPECT_EQ(IdSet(a.cases), IdSet(sorted.cases));
  EXPECT_NE(Ids(a.cases), Ids(sorted.cases));
  opt.seed = 7;
  Plan c = Build(opt);
  EXPECT_NE(Ids(c.cases), Ids(a.cases));
  EXPECT_EQ(IdSet(c.cases), IdSet(sorted.cases));
  EXPECT_EQ(a.plan_hash, sorted.plan_hash);
  EXPECT_EQ(c.plan_hash, sorted.plan_hash);
}

TEST_F(PlanTest, LimitAppliesPerOp) {
  registry_ = MakeRegistry(std::vector<std::string>{"tgemm", "ugemm"});
  cases_.BaseOp("tgemm.yaml", kGrid);
  cases_.BaseOp("ugemm.yaml", Grid("ugemm"));
  PlanOptions opt = Options(cases_);
  Plan full = Build(opt);
  EXPECT_EQ(full.ops, (std::vector<std::string>{"tgemm", "ugemm"}));  // every registered op, sorted
  EXPECT_EQ(full.cases.size(), 24u);
  opt.limit = 2;
  opt.shuffle = true;
  Plan limited = Build(opt);
  ASSERT_EQ(limited.cases.size(), 4u);
  EXPECT_EQ(limited.cases[0].op, "tgemm");
  EXPECT_EQ(limited.cases[1].op, "tgemm");
  EXPECT_EQ(limited.cases[2].op, "ugemm");
  EXPECT_EQ(limited.cases[3].op, "ugemm");
  for (const auto& op : {"tgemm", "ugemm"}) {
    EXPECT_EQ(limited.counts.at(op).supported, 12);
    EXPECT_EQ(limited.counts.at(op).after_shard, 12);
    EXPECT_EQ(limited.counts.at(op).final, 2);
  }
  EXPECT_EQ(limited.supported.size(), 24u);  // --limit does not shrink the supported plan
  EXPECT_EQ(limited.plan_hash, full.plan_hash);
  opt.limit = 0;
  EXPECT_TRUE(Build(opt).cases.empty());
}

TEST_F(PlanTest, OpsOptionSelectsOps) {
  registry_ = MakeRegistry(std::vector<std::string>{"tgemm", "ugemm"});
  cases_.BaseOp("tgemm.yaml", kGrid);
  cases_.BaseOp("ugemm.yaml", Grid("ugemm"));
  Plan plan = Build(Options(cases_, {"ugemm"}));
  EXPECT_EQ(plan.ops, std::vector<std::string>{"ugemm"});
  EXPECT_EQ(IdSet(plan.cases), FullGridIds("ugemm"));
  EXPECT_EQ(plan.counts.count("tgemm"), 0u);
}

TEST_F(PlanTest, PlanHashIsStableAndTracksThePlan) {
  cases_.BaseOp("tgemm.yaml", kGrid);
  Plan a = Build(Options(cases_));
  Plan b = Build(Options(cases_));
  EXPECT_EQ(a.plan_hash, b.plan_hash);
  EXPECT_EQ(a.plan_hash.size(), 64u);
  EXPECT_EQ(a.plan_hash.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(Ids(a.cases), Ids(b.cases));  // deterministic order too

  PlanOptions sharded = Options(cases_);
  sharded.shard_index = 1;
  sharded.shard_count = 2;
  sharded.limit = 1;
  EXPECT_EQ(Build(sharded).plan_hash, a.plan_hash);

  std::string bigger = kGrid;
  bigger.replace(bigger.find("[1, 2, 3]"), 9, "[1, 2, 3, 4]");
  cases_.BaseOp("tgemm.yaml", bigger);
  EXPECT_NE(Build(Options(cases_)).plan_hash, a.plan_hash);
}

TEST_F(PlanTest, UnknownOpOrBackendIsUsageError) {
  cases_.BaseOp("tgemm.yaml", kGrid);
  std::string msg = ThrownMessage<UsageError>([&] { Build(Options(cases_, {"tgemm", "nope"})); });
  EXPECT_TRUE(HasText(msg, "unknown op 'nope' for backend 'test'; expected one of: tgemm"));
  PlanOptions opt = Options(cases_);
  opt.backend = "cuda";
  msg = ThrownMessage<UsageError>([&] { Build(opt); });
  EXPECT_TRUE(HasText(msg, "unknown backend 'cuda'; expected one of: test"));
}

TEST_F(PlanTest, EmptyCasesDirGivesAnEmptyPlan) {
  // A folder without base_ops/ is not a case plan (a wrong --cases); an empty base_ops/ is an empty plan.
  EXPECT_THROW(Build(Options(cases_)), UsageError);
  MakeDirs(cases_.path() + "/base_ops");
  Plan plan = Build(Options(cases_));
  EXPECT_TRUE(plan.cases.empty());
  EXPECT_EQ(plan.counts.at("tgemm").raw, 0);
  EXPECT_EQ(plan.supported_total, 0);
}

}  // namespace
}  // namespace servecast::collect
