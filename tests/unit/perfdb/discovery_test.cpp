#include "perfdb/discovery.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "../core/core_test_util.h"
#include "core/error.h"
#include "shared_data.h"

namespace servecast::perfdb {
namespace {

using servecast::testing::HasText;
using servecast::testing::TempDir;
using servecast::testing::ThrownMessage;
using servecast::testing::WriteText;

// Files of a hand-built data tree (parent folders are created).
void Put(const std::string& path, const std::string& text) { WriteText(path, text); }

TEST(VersionDirOrderTest, Pep440Order) {
  EXPECT_TRUE(VersionDirLess("1.3.0rc20", "1.3.0"));
  EXPECT_TRUE(VersionDirLess("1.3.0", "1.3.0.post1"));
  EXPECT_TRUE(VersionDirLess("1.3.0rc5", "1.3.0rc20"));  // numeric, not text order
  EXPECT_TRUE(VersionDirLess("0.5.6.post2", "0.5.9"));
  EXPECT_TRUE(VersionDirLess("0.9.0", "0.22.0"));
  EXPECT_FALSE(VersionDirLess("1.3.0", "1.3.0rc20"));
  EXPECT_EQ(CompareVersionDirs("1.3.0", "1.3.0"), 0);
}

TEST(VersionDirOrderTest, UnparsableSortsLowest) {
  EXPECT_FALSE(LeadingVersion("latest").has_value());
  EXPECT_TRUE(VersionDirLess("latest", "0.0.1"));
  EXPECT_TRUE(VersionDirLess("latest", "13.0-cublaslt13.1"));
  EXPECT_FALSE(VersionDirLess("0.0.1", "latest"));
  EXPECT_TRUE(VersionDirLess("abc", "xyz"));  // both unparsable: by text
}

TEST(VersionDirOrderTest, StackVersionsOrderByLeadingNumberThenParts) {
  const std::string a = "13.0-cublaslt13.1-cudnn9.14-nccl2.28";
  ASSERT_TRUE(LeadingVersion(a).has_value());
  EXPECT_EQ(*LeadingVersion(a), Version::Parse("13.0"));
  EXPECT_TRUE(VersionDirLess("12.9-cublaslt12.9-cudnn9.10-nccl2.26", a));
  EXPECT_TRUE(VersionDirLess(a, "13.1-cublaslt13.0-cudnn9.14-nccl2.28"));
  EXPECT_TRUE(VersionDirLess(a, "13.0-cublaslt13.2-cudnn9.14-nccl2.28"));
  EXPECT_TRUE(VersionDirLess("13.0-cublaslt13.1-cudnn9.9-nccl2.28", a));  // 9.9 < 9.14
  EXPECT_TRUE(VersionDirLess("13.0", a));
}

TEST(ReuseYamlTest, ReadsEntries) {
  TempDir dir;
  Put(dir.File("reuse.yaml"),
      "schema_version: 1\nreuse:\n- table: gemm_perf\n  from_version: 0.24.0\n  reason: same kernels\n"
      "  approved_by: someone\n- table: moe_perf\n  from_version: 0.19.0\n");
  auto entries = ReadReuseYaml(dir.File("reuse.yaml"));
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].table, "gemm_perf");
  EXPECT_EQ(entries[0].from_version, "0.24.0");
  EXPECT_EQ(entries[0].reason, "same kernels");
  EXPECT_EQ(entries[0].approved_by, "someone");
  EXPECT_EQ(entries[1].table, "moe_perf");
  EXPECT_EQ(entries[1].approved_by, "");
}

TEST(ReuseYamlTest, MissingFieldIsConfigErrorWithLocation) {
  TempDir dir;
  Put(dir.File("reuse.yaml"), "schema_version: 1\nreuse:\n- table: gemm_perf\n");
  std::string msg = ThrownMessage<ConfigError>([&] { ReadReuseYaml(dir.File("reuse.yaml")); });
  EXPECT_TRUE(HasText(msg, "from_version"));
  EXPECT_TRUE(HasText(msg, "reuse.yaml"));
}

TEST(ReuseYamlTest, ReferenceFilesParse) {
  const std::string root = std::string(SERVECAST_SHARED_DIR) + "/reference/aic-parquet";
  SERVECAST_NEED_SHARED(std::filesystem::exists(root), "no reference tree at " + root);
  int files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (e.path().filename() != "reuse.yaml") continue;
    ++files;
    auto entries = ReadReuseYaml(e.path().string());
    EXPECT_FALSE(entries.empty()) << e.path();
    for (const auto& r : entries) {
      EXPECT_TRUE(r.table.ends_with("_perf")) << e.path();
      EXPECT_TRUE(LeadingVersion(r.from_version).has_value()) << e.path();
      EXPECT_FALSE(r.approved_by.empty()) << e.path();
    }
  }
  EXPECT_GT(files, 0);
}

TEST(DataTreeTest, ScansLayoutAndUnionsRoots) {
  TempDir a, b;
  Put(a.File("sys1/gemm/be/1.0/gemm_perf.csv"), "gemm_dtype,m,n,k,latency\nbf16,1,2,3,0.5\n");
  Put(a.File("sys1/gemm/be/1.0/collection_meta.yaml"), "schema_version: 1\n");
  Put(a.File("sys1/gemm/be/1.1/reuse.yaml"),
      "schema_version: 1\nreuse:\n- table: gemm_perf\n  from_version: '1.0'\n  reason: r\n  approved_by: x\n");
  Put(b.File("sys1/gemm/be/1.0/gemm_perf.csv"), "gemm_dtype,m,n,k,latency\nbf16,9,9,9,0.5\n");
  Put(b.File("sys2/moe/be/2.0/moe_perf.csv"), "moe_dtype,num_tokens,latency\nfp8,1,0.1\n");
  Put(b.File("sys2/runs/notes.txt"), "a file at family level is ignored\n");

  DataTree tree = DataTree::Scan({a.path(), b.path(), a.File("does_not_exist")});
  EXPECT_EQ(tree.Systems(), (std::vector<std::string>{"sys1", "sys2"}));
  EXPECT_EQ(tree.Families("sys2"), (std::vector<std::string>{"moe"}));  // runs/ holds no version dir
  const VersionDir* d = tree.Find("sys1", "gemm", "be", "1.0");
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(d->paths.size(), 2u);
  ASSERT_TRUE(d->HasTable("gemm_perf"));
  ASSERT_EQ(d->tables.at("gemm_perf").size(), 2u);
  EXPECT_TRUE(HasText(d->tables.at("gemm_perf")[0], a.path()));  // root order
  EXPECT_TRUE(d->has_collection_meta);
  EXPECT_FALSE(d->marker_only());
  const VersionDir* m = tree.Find("sys1", "gemm", "be", "1.1");
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->marker_only());
  EXPECT_TRUE(m->has_reuse_yaml);
  ASSERT_EQ(m->reuse.size(), 1u);
  EXPECT_EQ(tree.BackendVersions("sys1", "be", true), (std::vector<std::string>{"1.0"}));
  EXPECT_EQ(tree.BackendVersions("sys1", "be", false), (std::vector<std::string>{"1.0", "1.1"}));
  ASSERT_EQ(tree.problems().size(), 1u);
  EXPECT_TRUE(HasText(tree.problems()[0], "does_not_exist"));
}

TEST(DataTreeTest, VersionsSortedAndUnparsableReported) {
  TempDir a;
  for (std::string v : {"1.3.0", "1.3.0rc20", "weird", "1.3.0.post1", "1.2.0"})
    Put(a.File("s/gemm/trtllm/" + v + "/gemm_perf.csv"), "gemm_dtype,m,n,k,latency\nbf16,1,1,1,1.0\n");
  DataTree tree = DataTree::Scan({a.path()});
  std::vector<std::string> order;
  for (const VersionDir* d : tree.Versions("s", "gemm", "trtllm")) order.push_back(d->version);
  EXPECT_EQ(order, (std::vector<std::string>{"weird", "1.2.0", "1.3.0rc20", "1.3.0", "1.3.0.post1"}));
  ASSERT_EQ(tree.problems().size(), 1u);
  EXPECT_TRUE(HasText(tree.problems()[0], "'weird'"));
}

TEST(DataTreeTest, MalformedReuseYamlIsReportedNotFatalToTheScan) {
  TempDir a;
  Put(a.File("s/gemm/be/1.0/reuse.yaml"), "reuse: [ {table: gemm_perf} ]\n");
  DataTree tree = DataTree::Scan({a.path()});
  const VersionDir* d = tree.Find("s", "gemm", "be", "1.0");
  ASSERT_NE(d, nullptr);
  EXPECT_FALSE(d->reuse_error.empty());
  EXPECT_EQ(tree.problems().size(), 1u);
}

TEST(LoadTableFileTest, CsvAndUnknownExtension) {
  TempDir a;
  Put(a.File("t.csv"), "gemm_dtype,m,n,k,latency\nbf16,1,2,3,0.5\nfp8,4,5,6,0.25\n");
  Table t = LoadTableFile(a.File("t.csv"));
  EXPECT_EQ(t.num_rows(), 2u);
  EXPECT_EQ(t.GetInt(1, t.ColumnIndex("k")), 6);
  Put(a.File("t.json"), "{}");
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { LoadTableFile(a.File("t.json")); }), ".csv or .parquet"));
}

}  // namespace
}  // namespace servecast::perfdb
