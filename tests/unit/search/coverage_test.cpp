// The coverage gate's parts (search/coverage.h): the lookup key of each op, the
// gaps file's strictness, and how misses and gaps match (every engine of a miss
// declared, stale gaps), on the golden tiny system and data.
#include "search/coverage.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "model/family.h"
#include "search/search.h"
#include "serve/session.h"
#include "tables/table_spec.h"

namespace servecast::search {
namespace {

namespace fs = std::filesystem;
const std::string kSrc = SERVECAST_SOURCE_DIR;

// Every op of every bundled model's one-node configurations names a declared
// table and only its key columns (op_name is the tables' prefix column), so a
// gap written against the table's keys can match it; op kinds without a table
// are named by their kind.
TEST(CoverageLookup, KeysAreTheTablesDeclaredKeyColumns) {
  const auto spec = systems::LoadSystemByName(kSrc + "/systems", "h200_sxm");
  std::size_t ops = 0;
  for (const std::string& id : model::BundledModels(kSrc + "/models")) {
    const model::ModelConfig m = model::LoadModel(id, kSrc + "/models");
    if (!model::FamilyOf(m).Unsupported(m).empty()) continue;
    for (model::Engine e : {model::Engine::kTrtllm, model::Engine::kVllm, model::Engine::kSglang}) {
      const serve::Deployment d(m, spec);
      for (const model::ParallelConfig& p : EnumerateParallel(d.model(), e, 8)) {
        const model::OpList list = d.Ops(p, serve::OpOptionsFor(e, spec));
        for (const auto* phase : {&list.context, &list.generation})
          for (const model::Op& op : *phase) {
            ++ops;
            const OpLookup l = LookupOf(op);
            SCOPED_TRACE(id + " " + op.name + " " + l.table);
            if (op.kind == model::OpKind::kP2P) {
              EXPECT_EQ(l.table, "p2p");
              continue;
            }
            if (op.kind == model::OpKind::kElementwise && op.measured_op.empty()) {  // the memory formula
              EXPECT_EQ(l.table, "elementwise");
              EXPECT_TRUE(l.key.empty());
              continue;
            }
            const tables::TableSpec* t = tables::FindTableSpec(l.table);
            ASSERT_NE(t, nullptr);
            const std::vector<std::string> keys = t->KeyColumnNames();
            // The kinds with a key of their own; any other kind names its table alone.
            using K = model::OpKind;
            for (K k : {K::kGemm, K::kContextAttention, K::kGenerationAttention, K::kMoe, K::kNccl, K::kCustomAllReduce,
                        K::kElementwise, K::kEmbedding})
              if (op.kind == k) {
                EXPECT_FALSE(l.key.empty());
              }
            for (const auto& [column, value] : l.key) {
              EXPECT_TRUE(column == "op_name" || std::find(keys.begin(), keys.end(), column) != keys.end()) << column;
              EXPECT_FALSE(value.empty()) << column;
            }
          }
      }
    }
  }
  EXPECT_GT(ops, 10000u);
}

TEST(CoverageLookup, MoeKeyText) {
  model::Op op;
  op.kind = model::OpKind::kMoe;
  op.quant = "w4a16_mxfp4";
  op.hidden = 2880;
  op.inter = 2880;
  op.topk = 4;
  op.experts = 128;
  op.moe_tp = 2;
  op.moe_ep = 4;
  op.distribution = "power_law_1.2";
  EXPECT_EQ(LookupOf(op).table, "moe_perf");
  EXPECT_EQ(LookupOf(op).KeyText(),
            "moe_dtype=w4a16_mxfp4, hidden_size=2880, inter_size=2880, topk=4, num_experts=128, moe_tp_size=2, "
            "moe_ep_size=4, distribution=power_law_1.2");
}

class GapsFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("servecast_coverage_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& text) {
    const std::string p = (dir_ / "gaps.yaml").string();
    std::ofstream(p) << text;
    return p;
  }
  fs::path dir_;
};

TEST_F(GapsFile, RepeatedGapAndKeyWithUnsupportedAreRefused) {
  const std::vector<std::string> models = {"tiny-moe"};
  const std::string entry = "  - model: tiny-moe\n    table: moe_perf\n    key: {moe_dtype: bfloat16}\n    issue: 7\n";
  const std::string file = Write("gaps:\n" + entry + entry);
  try {
    LoadCoverageGaps(file, models);
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(file + ":6"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("the same gap as line 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(LoadCoverageGaps(Write("gaps:\n  - model: tiny-moe\n    unsupported: true\n    key: {a: 1}\n"
                                      "    reason: r\n"),
                                models),
               ConfigError);
  EXPECT_THROW(LoadCoverageGaps(Write("gaps:\n  - model: tiny-moe\n    table: no_such_perf\n    reason: r\n"), models),
               ConfigError);
  const auto ok = LoadCoverageGaps(Write("gaps:\n" + entry), models);
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].line, 2);
  EXPECT_EQ(ok[0].issue, 7);
  EXPECT_EQ(ok[0].key, (std::vector<std::pair<std::string, std::string>>{{"moe_dtype", "bfloat16"}}));
}

// tiny-moe on the golden dense/1 data, which has no moe_perf: its expert lookups
// miss on every engine. A gap for one engine leaves the miss undeclared (and is
// used, so not stale); a gap for every engine declares it; a gap that matches
// nothing is stale.
TEST_F(GapsFile, MissesMatchGapsOnEveryEngine) {
  const auto spec = systems::LoadSystemByName(kSrc + "/tests/goldens/systems", "tiny_gpu");
  CoverageOptions o;
  o.models_dir = kSrc + "/tests/goldens/models";
  o.data.roots = {kSrc + "/tests/goldens/data"};
  o.data.backend = "dense";
  o.data.version = "1";
  const std::vector<std::string> models = model::BundledModels(o.models_dir);
  auto run = [&](const std::string& gaps) {
    o.gaps = LoadCoverageGaps(Write(gaps), models);
    return RunCoverage(spec, o);
  };
  const std::string stale = "  - model: tiny-dense\n    table: moe_perf\n    reason: never misses\n";
  CoverageReport r =
      run("gaps:\n  - model: tiny-moe\n    engines: [trtllm]\n    table: moe_perf\n    issue: 1\n" + stale);
  EXPECT_EQ(r.models, models.size());
  EXPECT_GT(r.configs, 0u);
  const auto moe = std::find_if(r.misses.begin(), r.misses.end(),
                                [](const CoverageMiss& m) { return m.model == "tiny-moe" && m.table == "moe_perf"; });
  ASSERT_NE(moe, r.misses.end());
  EXPECT_EQ(moe->engines, (std::set<std::string>{"sglang", "trtllm", "vllm"}));
  EXPECT_EQ(moe->gap, -1);  // declared for trtllm only
  EXPECT_TRUE(moe->ops.count("context_moe"));
  EXPECT_NE(moe->reason.find("moe"), std::string::npos) << moe->reason;
  EXPECT_EQ(r.stale, (std::vector<int>{1}));  // the trtllm gap matched; tiny-dense's did not
  EXPECT_FALSE(r.Pass());

  r = run("gaps:\n  - model: tiny-moe\n    table: moe_perf\n    issue: 1\n");
  const auto declared = std::find_if(r.misses.begin(), r.misses.end(), [](const CoverageMiss& m) {
    return m.model == "tiny-moe" && m.table == "moe_perf";
  });
  ASSERT_NE(declared, r.misses.end());
  EXPECT_EQ(declared->gap, 0);
  EXPECT_TRUE(r.stale.empty());
}

}  // namespace
}  // namespace servecast::search
