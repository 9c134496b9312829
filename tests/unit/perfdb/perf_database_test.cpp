#include "perfdb/perf_database.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "../core/core_test_util.h"
#include "core/error.h"
#include "core/table_file.h"
#include "shared_data.h"

namespace servecast::perfdb {
namespace {

using servecast::testing::HasText;
using servecast::testing::TempDir;
using servecast::testing::ThrownMessage;
using servecast::testing::WriteText;

// Files of a hand-built data tree (parent folders are created).
void Put(const std::string& path, const std::string& text) { WriteText(path, text); }

const char* kGemmHeader = "gemm_dtype,m,n,k,latency\n";

// Latency of the row with key (bf16, m, 1, 1) and the version its source lives in.
struct Hit {
  double latency = -1;
  std::string version;
  SourceKind kind = SourceKind::kPrimary;
};
Hit Lookup(const LoadedTable& t, std::int64_t m) {
  std::size_t cm = t.table.ColumnIndex("m"), cl = t.table.ColumnIndex("latency");
  for (std::size_t r = 0; r < t.table.num_rows(); ++r)
    if (t.table.GetInt(r, cm) == m) {
      const TableSource& s = t.sources[t.row_source[r]];
      return {t.table.GetDouble(r, cl), s.version, s.kind};
    }
  return {};
}

std::string GemmRows(std::vector<std::pair<int, double>> rows) {
  std::string s = kGemmHeader;
  for (auto [m, lat] : rows) s += "bf16," + std::to_string(m) + ",1,1," + std::to_string(lat) + "\n";
  return s;
}

TEST(KeyColumnsTest, KnownAndGenericTables) {
  Table gemm({{"framework", ValueType::kString},
              {"gemm_dtype", ValueType::kString},
              {"m", ValueType::kInt64},
              {"n", ValueType::kInt64},
              {"k", ValueType::kInt64},
              {"latency", ValueType::kDouble}});
  EXPECT_EQ(KeyColumns("gemm_perf", gemm), (std::vector<std::string>{"gemm_dtype", "m", "n", "k"}));
  Table nccl({{"version", ValueType::kString},
              {"op_name", ValueType::kString},
              {"kernel_source", ValueType::kString},
              {"nccl_dtype", ValueType::kString},
              {"num_gpus", ValueType::kInt64},
              {"message_size", ValueType::kInt64},
              {"latency", ValueType::kDouble},
              {"power_w", ValueType::kDouble}});
  EXPECT_EQ(KeyColumns("nccl_perf", nccl),
            (std::vector<std::string>{"op_name", "nccl_dtype", "num_gpus", "message_size"}));
  Table elem({{"device", ValueType::kString},
              {"op_name", ValueType::kString},
              {"dtype", ValueType::kString},
              {"num_tokens", ValueType::kInt64},
              {"latency_p10", ValueType::kDouble},
              {"samples", ValueType::kInt64},
              {"rsd", ValueType::kDouble},
              {"timing", ValueType::kString},
              {"l2", ValueType::kString},
              {"clock_mhz_before", ValueType::kInt64},
              {"throttled", ValueType::kInt64}});
  // Declared tables are keyed as declared (hidden_size is a key even where a file lacks it).
  EXPECT_EQ(KeyColumns("elementwise_perf", elem),
            (std::vector<std::string>{"op_name", "dtype", "num_tokens", "hidden_size"}));
  EXPECT_EQ(KeyColumns("context_attention_perf", elem).size(), 9u);
}

TEST(PerfDatabaseTest, NewestVersionSkipsMarkerOnlyAndUnparsable) {
  TempDir root;
  Put(root.File("s/gemm/trtllm/1.3.0rc20/gemm_perf.csv"), GemmRows({{1, 1.0}}));
  Put(root.File("s/gemm/trtllm/1.3.0/gemm_perf.csv"), GemmRows({{1, 2.0}}));
  Put(root.File("s/gemm/trtllm/1.3.0.post1/collection_meta.yaml"), "schema_version: 1\n");  // marker only
  Put(root.File("s/gemm/trtllm/1.4.0/reuse.yaml"),
      "schema_version: 1\nreuse:\n- table: gemm_perf\n  from_version: 1.3.0\n  reason: r\n  approved_by: x\n");
  Put(root.File("s/gemm/trtllm/nightly/gemm_perf.csv"), GemmRows({{1, 9.0}}));
  PerfDatabase db = PerfDatabase::Open({root.path()}, "s", "trtllm");
  EXPECT_EQ(db.version(), "1.3.0");
  const LoadedTable& t = db.Table("gemm_perf");
  Hit h = Lookup(t, 1);
  EXPECT_DOUBLE_EQ(h.latency, 2.0);
  EXPECT_EQ(h.version, "1.3.0");
  EXPECT_EQ(h.kind, SourceKind::kPrimary);
  // Older siblings (1.3.0rc20; "nightly" sorts lowest) were read but supplied nothing.
  ASSERT_EQ(t.sources.size(), 3u);
  EXPECT_EQ(t.sources[1].version, "1.3.0rc20");
  EXPECT_EQ(t.sources[2].version, "nightly");
  EXPECT_EQ(t.shadowed_rows, 2u);
  EXPECT_EQ(&db.Table("gemm_perf"), &t);  // cached

  // A marker-only version may still be asked for explicitly: its reuse.yaml donors serve it.
  PerfDatabase marker = PerfDatabase::Open({root.path()}, "s", "trtllm", "1.4.0");
  Hit hm = Lookup(marker.Table("gemm_perf"), 1);
  EXPECT_EQ(hm.version, "1.3.0");
  EXPECT_EQ(hm.kind, SourceKind::kReuse);
}

TEST(PerfDatabaseTest, ReuseDonorFillsButNeverOverrides) {
  TempDir root;
  Put(root.File("s/gemm/vllm/0.22.0/gemm_perf.csv"), GemmRows({{1, 1.0}, {2, 1.0}}));
  Put(root.File("s/gemm/vllm/0.22.0/reuse.yaml"),
      "schema_version: 1\nreuse:\n- table: gemm_perf\n  from_version: 0.24.0\n  reason: same kernels\n"
      "  approved_by: owner\n");
  Put(root.File("s/gemm/vllm/0.24.0/gemm_perf.csv"), GemmRows({{2, 5.0}, {3, 5.0}}));
  Put(root.File("s/gemm/vllm/0.19.0/gemm_perf.csv"), GemmRows({{3, 7.0}, {4, 7.0}}));
  PerfDatabase db = PerfDatabase::Open({root.path()}, "s", "vllm", "0.22.0");
  const LoadedTable& t = db.Table("gemm_perf");
  EXPECT_EQ(t.table.num_rows(), 4u);
  EXPECT_DOUBLE_EQ(Lookup(t, 1).latency, 1.0);
  EXPECT_DOUBLE_EQ(Lookup(t, 2).latency, 1.0);  // primary wins over the donor
  EXPECT_EQ(Lookup(t, 2).version, "0.22.0");
  EXPECT_DOUBLE_EQ(Lookup(t, 3).latency, 5.0);  // donor (declared, even though newer) wins over older sibling
  EXPECT_EQ(Lookup(t, 3).kind, SourceKind::kReuse);
  EXPECT_DOUBLE_EQ(Lookup(t, 4).latency, 7.0);
  EXPECT_EQ(Lookup(t, 4).kind, SourceKind::kOlderSibling);
  ASSERT_EQ(t.sources.size(), 3u);
  EXPECT_TRUE(HasText(t.sources[1].reason, "owner"));
  EXPECT_EQ(t.sources[0].rows_used, 2u);
  EXPECT_EQ(t.sources[1].rows_used, 1u);
  EXPECT_EQ(t.sources[2].rows_used, 1u);
  // 0.24.0 is newer and not declared anywhere else: the newest database never takes
  // rows from it for older versions, and it has no older source for m=1 either.
  PerfDatabase newest = PerfDatabase::Open({root.path()}, "s", "vllm");
  EXPECT_EQ(newest.version(), "0.24.0");
  EXPECT_DOUBLE_EQ(Lookup(newest.Table("gemm_perf"), 1).latency, 1.0);  // from 0.22.0, older
}

// Slices merge over the sources by the same rules as the whole table: together
// they are exactly its rows, sources and shadowing, in Parquet and in CSV.
TEST(PerfDatabaseTest, SlicesPartitionTheMergedTable) {
  for (const char* ext : {".csv", ".parquet"}) {
    SCOPED_TRACE(ext);
    TempDir root;
    auto put = [&](const std::string& dir, const std::string& csv) {
      Put(root.File(dir + "/gemm_perf.csv"), csv);
      if (std::string(ext) == ".parquet") {
        Table t = Table::ReadCsv(root.File(dir + "/gemm_perf.csv"));
        std::filesystem::remove(root.File(dir + "/gemm_perf.csv"));
        TableWriteOptions o;
        o.parquet.group_by = {"gemm_dtype"};
        WriteTableFile(t, root.File(dir + "/gemm_perf.parquet"), o);
      }
    };
    put("s/gemm/vllm/0.22.0", std::string(kGemmHeader) + "fp8,1,1,1,0.5\nbf16,1,1,1,1.0\nbf16,2,1,1,1.0\nbf16,2,1,1,9.0\n");
    put("s/gemm/vllm/0.19.0", std::string(kGemmHeader) + "bf16,2,1,1,7.0\nbf16,3,1,1,7.0\nint8,3,1,1,2.0\n");
    // Another collector's meta (AIC's shape): the repeated bf16 key of 0.22.0 is kept-first.
    Put(root.File("s/gemm/vllm/0.22.0/collection_meta.yaml"), "schema_version: 1\nprovenance: collected\n");
    PerfDatabase db = PerfDatabase::Open({root.path()}, "s", "vllm", "0.22.0");
    const LoadedTable& whole = db.Table("gemm_perf");
    EXPECT_EQ(db.SliceValues("gemm_perf", "gemm_dtype"), (std::vector<std::string>{"fp8", "bf16", "int8"}));
    std::size_t rows = 0, shadowed = 0, dropped = 0;
    const std::size_t cd = whole.table.ColumnIndex("gemm_dtype");
    for (const std::string d : {"fp8", "bf16", "int8"}) {
      const LoadedTable& part = db.Table("gemm_perf", RowSlice{"gemm_dtype", d});
      // Row by row: the slice is the whole table's rows of that dtype, in order,
      // each from the same source.
      std::vector<std::size_t> want;
      for (std::size_t r = 0; r < whole.table.num_rows(); ++r)
        if (whole.table.GetString(r, cd) == d) want.push_back(r);
      ASSERT_EQ(part.table.num_rows(), want.size()) << d;
      for (std::size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(part.table.Row(i), whole.table.Row(want[i])) << d << " row " << i;
        EXPECT_EQ(part.sources[part.row_source[i]].file, whole.sources[whole.row_source[want[i]]].file);
      }
      EXPECT_EQ(part.table.columns(), whole.table.columns());
      EXPECT_EQ(part.key_columns, whole.key_columns);
      ASSERT_EQ(part.sources.size(), whole.sources.size());
      rows += part.table.num_rows();
      shadowed += part.shadowed_rows;
      dropped += part.duplicate_rows_dropped;
      for (std::size_t r = 0; r < part.table.num_rows(); ++r)
        EXPECT_EQ(part.table.GetString(r, part.table.ColumnIndex("gemm_dtype")), d);
    }
    EXPECT_EQ(rows, whole.table.num_rows());
    EXPECT_EQ(shadowed, whole.shadowed_rows);
    EXPECT_EQ(dropped, whole.duplicate_rows_dropped);
    const LoadedTable& bf16 = db.Table("gemm_perf", RowSlice{"gemm_dtype", "bf16"});
    EXPECT_DOUBLE_EQ(Lookup(bf16, 2).latency, 1.0);  // the primary's first row wins, as in the whole table
    EXPECT_EQ(Lookup(bf16, 3).version, "0.19.0");
    EXPECT_EQ(&db.Table("gemm_perf", RowSlice{"gemm_dtype", "bf16"}), &bf16);  // cached
    EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { db.Table("gemm_perf", RowSlice{"latency", "x"}); }),
                        "slice column 'latency' is not a string column"));
  }
  // A slice across the key (a metadata column) would merge differently: refused.
  TempDir root;
  Put(root.File("s/gemm/vllm/1.0/gemm_perf.csv"), "kernel_source,gemm_dtype,m,n,k,latency\nx,bf16,1,1,1,1.0\n");
  PerfDatabase db = PerfDatabase::Open({root.path()}, "s", "vllm");
  EXPECT_TRUE(HasText(ThrownMessage<Error>([&] { db.Table("gemm_perf", RowSlice{"kernel_source", "x"}); }),
                      "gemm_perf: slice column 'kernel_source' is not a key column (keys: gemm_dtype, m, n, k)"));
}

// Rows the table's declaration refuses never reach an answer: the load fails with
// the file, the line (CSV) or row (Parquet) and the column, whole table or slice.
TEST(PerfDatabaseTest, BadRowsAreRefusedWhenTheTableLoads) {
  struct Case {
    std::string row;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"bf16,4,1,1,-0.5", "column 'latency' is -0.5 (table gemm_perf); expected a finite latency > 0 (ms)"},
      {"bf16,4,1,1,nan", "column 'latency' is nan"},
      {"bf16,4,1,1,inf", "column 'latency' is inf"},
      {"bf16,4,1,1,0", "column 'latency' is 0"},
      {"bf16,-1024,1,1,1.0", "column 'm' is -1024 (table gemm_perf); expected an integer >= 1 (a key of gemm_perf)"},
      {"bf16,1024.7,1,1,1.0", "column 'm' is 1024.7"},
      {"bf16,4,0,1,1.0", "column 'n' is 0"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.row);
    TempDir root;
    const std::string csv = root.File("s/gemm/vllm/1.0/gemm_perf.csv");
    Put(csv, std::string(kGemmHeader) + "bf16,1,1,1,1.0\n\nfp8,2,1,1,1.0\n" + c.row + "\n");
    PerfDatabase db = PerfDatabase::Open({root.path()}, "s", "vllm");
    const std::string whole = ThrownMessage<DataError>([&] { db.Table("gemm_perf"); });
    EXPECT_TRUE(HasText(whole, csv + ":5: " + c.message)) << whole;  // line 5: the blank line counts
    const std::string part = ThrownMessage<DataError>([&] { db.Table("gemm_perf", RowSlice{"gemm_dtype", "bf16"}); });
    EXPECT_TRUE(HasText(part, csv + ":5: " + c.message)) << part;
    // The same row in Parquet is named by its row.
    Table t = Table::ReadCsv(csv);
    std::filesystem::remove(csv);
    TableWriteOptions o;
    o.parquet.group_by = {"gemm_dtype"};
    WriteTableFile(t, root.File("s/gemm/vllm/1.0/gemm_perf.parquet"), o);
    PerfDatabase pq = PerfDatabase::Open({root.path()}, "s", "vllm");
    const std::string p = ThrownMessage<DataError>([&] { pq.Table("gemm_perf", RowSlice{"gemm_dtype", "bf16"}); });
    EXPECT_TRUE(HasText(p, "gemm_perf.parquet: row 2: " + c.message)) << p;  // grouped: bf16 rows first
    // A slice without the bad row is not read from it and answers.
    EXPECT_EQ(pq.Table("gemm_perf", RowSlice{"gemm_dtype", "fp8"}).table.num_rows(), 1u);
  }
  // computescale_perf declares 0 legal (a clamped difference of two timings).
  TempDir root;
  Put(root.File("s/quantize/vllm/1.0/computescale_perf.csv"), "quant_dtype,m,k,latency\nfp8,1,32,0\n");
  PerfDatabase db = PerfDatabase::Open({root.path()}, "s", "vllm");
  EXPECT_EQ(db.Table("computescale_perf").table.num_rows(), 1u);
}

TEST(PerfDatabaseTest, WithoutTheSharedLayerOnlyThePrimaryVersionIsRead) {
  TempDir root;
  Put(root.File("s/gemm/vllm/0.22.0/gemm_perf.csv"), GemmRows({{1, 1.0}, {2, 1.0}}));
  Put(root.File("s/gemm/vllm/0.22.0/reuse.yaml"),
      "schema_version: 1\nreuse:\n- table: gemm_perf\n  from_version: 0.24.0\n  reason: same kernels\n"
      "  approved_by: owner\n");
  Put(root.File("s/gemm/vllm/0.24.0/gemm_perf.csv"), GemmRows({{2, 5.0}, {3, 5.0}}));
  Put(root.File("s/gemm/vllm/0.19.0/gemm_perf.csv"), GemmRows({{3, 7.0}, {4, 7.0}}));
  OpenOptions options;
  options.shared_layer = false;  // EMPIRICAL and SOL modes
  PerfDatabase db = PerfDatabase::Open({root.path()}, "s", "vllm", "0.22.0", options);
  const LoadedTable& t = db.Table("gemm_perf");
  EXPECT_EQ(t.table.num_rows(), 2u);  // neither the donor nor the older version
  ASSERT_EQ(t.sources.size(), 1u);
  EXPECT_EQ(t.sources[0].kind, SourceKind::kPrimary);
}

TEST(PerfDatabaseTest, OlderSiblingsNearestFirstNeverNewer) {
  TempDir root;
  Put(root.File("s/gemm/trtllm/1.0.0/gemm_perf.csv"), GemmRows({{1, 10.0}, {2, 10.0}, {3, 10.0}}));
  Put(root.File("s/gemm/trtllm/1.1.0rc1/gemm_perf.csv"), GemmRows({{1, 11.0}, {2, 11.0}}));
  Put(root.File("s/gemm/trtllm/1.1.0/gemm_perf.csv"), GemmRows({{1, 12.0}}));
  Put(root.File("s/gemm/trtllm/1.2.0/gemm_perf.csv"), GemmRows({{1, 13.0}, {4, 13.0}}));
  PerfDatabase db = PerfDatabase::Open({root.path()}, "s", "trtllm", "1.1.0");
  const LoadedTable& t = db.Table("gemm_perf");
  EXPECT_DOUBLE_EQ(Lookup(t, 1).latency, 12.0);
  EXPECT_DOUBLE_EQ(Lookup(t, 2).latency, 11.0);  // 1.1.0rc1 is nearer than 1.0.0
  EXPECT_DOUBLE_EQ(Lookup(t, 3).latency, 10.0);
  EXPECT_LT(Lookup(t, 4).latency, 0);  // 1.2.0 is newer: never used
  EXPECT_EQ(t.table.num_rows(), 3u);
}

TEST(PerfDatabaseTest, CommTakesOlderVersionsOnlyWhenTheVersionHasNone) {
  TempDir root;
  const std::string hdr = "op_name,allreduce_dtype,num_gpus,message_size,latency\n";
  Put(root.File("s/comm/trtllm/1.0.0/custom_allreduce_perf.csv"),
      hdr + "all_reduce,bfloat16,2,128,1.0\nall_reduce,bfloat16,2,512,1.5\n");
  Put(root.File("s/comm/trtllm/1.1.0/custom_allreduce_perf.csv"), hdr + "all_reduce,bfloat16,2,256,2.0\n");
  Put(root.File("s/comm/trtllm/1.1.0/reuse.yaml"),
      "schema_version: 1\nreuse:\n- table: custom_allreduce_perf\n  from_version: 1.0.0\n  reason: r\n"
      "  approved_by: x\n");
  Put(root.File("s/gemm/trtllm/1.2.0/gemm_perf.csv"), GemmRows({{1, 1.0}}));
  PerfDatabase db = PerfDatabase::Open({root.path()}, "s", "trtllm", "1.1.0");
  const LoadedTable& t = db.Table("custom_allreduce_perf");
  EXPECT_EQ(t.family, "comm");
  ASSERT_EQ(t.table.num_rows(), 1u);  // own comm table: no reuse, no older sibling
  EXPECT_EQ(t.sources.size(), 1u);
  // At 1.2.0 (newest, no comm dir) older versions serve it, nearest first (AIC:
  // vllm 0.22.0 reads 0.19.0's custom all-reduce, trtllm 1.3.0rc15 rc10's then rc5's).
  PerfDatabase newest = PerfDatabase::Open({root.path()}, "s", "trtllm");
  EXPECT_EQ(newest.version(), "1.2.0");
  const LoadedTable& n = newest.Table("custom_allreduce_perf");
  ASSERT_EQ(n.sources.size(), 2u);
  EXPECT_EQ(n.sources[0].version, "1.1.0");
  EXPECT_EQ(n.sources[0].kind, SourceKind::kOlderSibling);
  EXPECT_EQ(n.sources[1].version, "1.0.0");
  EXPECT_EQ(n.table.num_rows(), 3u);  // 256 from 1.1.0; 128 and 512 from 1.0.0
  // Without the shared layer (EMPIRICAL, SOL) only the active version is read.
  OpenOptions own;
  own.shared_layer = false;
  PerfDatabase active = PerfDatabase::Open({root.path()}, "s", "trtllm", "", own);
  std::string msg = ThrownMessage<MissingDataError>([&] { active.Table("custom_allreduce_perf"); });
  EXPECT_TRUE(HasText(msg, "1.0.0, 1.1.0"));
  EXPECT_TRUE(HasText(msg, "only when the requested version has no comm table"));
}

TEST(PerfDatabaseTest, NcclDeclaredVersionThenOneccl) {
  TempDir root;
  const std::string hdr = "version,op_name,kernel_source,nccl_dtype,num_gpus,message_size,latency\n";
  Put(root.File("s/comm/nccl/2.26.2/nccl_perf.csv"), hdr + "2.26.2,all_gather,NCCL,half,2,256,1.0\n");
  Put(root.File("s/comm/nccl/2.29.2/nccl_perf.csv"),
      hdr + "2.29.2,all_gather,NCCL,half,2,256,2.0\n2.29.2,all_gather,NCCL,half,2,512,2.0\n");
  Put(root.File("s/gemm/trtllm/1.0.0/gemm_perf.csv"), GemmRows({{1, 1.0}}));
  OpenOptions declared;
  declared.preferred_nccl_version = "2.26.2";
  EXPECT_EQ(PerfDatabase::Open({root.path()}, "s", "trtllm", "", declared).Table("nccl_perf").table.num_rows(), 1u);
  declared.preferred_nccl_version = "2.23";  // declared but absent, no OneCCL: the newest NCCL
  EXPECT_EQ(PerfDatabase::Open({root.path()}, "s", "trtllm", "", declared).Table("nccl_perf").table.num_rows(), 2u);

  // An XPU system: no NCCL table at all (AIC's b60 declares NCCL 2.23 and reads OneCCL).
  TempDir xpu;
  Put(xpu.File("x/comm/oneccl/2021.17.2/oneccl_perf.csv"), hdr + "2021.17.2,all_gather,oneCCL,half,2,256,3.0\n");
  Put(xpu.File("x/gemm/vllm/0.12.0/gemm_perf.csv"), GemmRows({{1, 1.0}}));
  OpenOptions b60;
  b60.preferred_nccl_version = "2.23";
  b60.oneccl_version = "2021.17.2";
  const LoadedTable& t = PerfDatabase::Open({xpu.path()}, "x", "vllm", "", b60).Table("nccl_perf");
  ASSERT_EQ(t.sources.size(), 1u);
  EXPECT_EQ(t.sources[0].backend, "oneccl");
  EXPECT_EQ(t.table.num_rows(), 1u);
}

TEST(PerfDatabaseTest, NcclIsSystemWide) {
  TempDir root;
  const std::string hdr = "version,op_name,kernel_source,nccl_dtype,num_gpus,message_size,latency\n";
  Put(root.File("s/comm/nccl/2.26.2/nccl_perf.csv"), hdr + "2.26.2,all_gather,NCCL,half,2,256,1.0\n");
  Put(root.File("s/comm/nccl/2.29.2/nccl_perf.csv"),
      hdr + "2.29.2,all_gather,NCCL,half,2,256,2.0\n2.29.2,all_gather,NCCL,half,2,512,2.0\n");
  Put(root.File("s/gemm/trtllm/1.0.0/gemm_perf.csv"), GemmRows({{1, 1.0}}));
  PerfDatabase db = PerfDatabase::Open({root.path()}, "s", "trtllm");
  const LoadedTable& t = db.Table("nccl_perf");
  EXPECT_EQ(t.table.num_rows(), 2u);  // newest nccl only, never merged with 2.26.2
  EXPECT_EQ(t.sources.at(0).version, "2.29.2");
  PerfDatabase pinned = PerfDatabase::Open({root.path()}, "s", "trtllm", "", OpenOptions{"2.26.2"});
  EXPECT_EQ(pinned.Table("nccl_perf").table.num_rows(), 1u);
}

TEST(PerfDatabaseTest, MultipleRootsUnion) {
  TempDir a, b;
  Put(a.File("s/gemm/cuda/13.0-x/gemm_perf.csv"), GemmRows({{1, 1.0}}));
  Put(b.File("s/gemm/cuda/13.0-x/gemm_perf.csv"), GemmRows({{1, 9.0}, {2, 2.0}}));
  Put(b.File("s/elementwise/cuda/13.0-x/elementwise_perf.csv"),
      "op_name,dtype,num_tokens,hidden_size,latency\nsilu,bf16,1,64,0.1\n");
  PerfDatabase db = PerfDatabase::Open({a.path(), b.path()}, "s", "cuda");
  const LoadedTable& t = db.Table("gemm_perf");
  EXPECT_EQ(t.table.num_rows(), 2u);
  EXPECT_DOUBLE_EQ(Lookup(t, 1).latency, 1.0);  // first root first
  EXPECT_DOUBLE_EQ(Lookup(t, 2).latency, 2.0);
  EXPECT_EQ(db.Table("elementwise_perf").table.num_rows(), 1u);
  EXPECT_EQ(db.TableNames(), (std::vector<std::string>{"elementwise_perf", "gemm_perf"}));
}

TEST(PerfDatabaseTest, AttentionWindowSizeOptionalAndColumnsByName) {
  TempDir root;
  // Primary without window_size; older sibling with it and another column order.
  Put(root.File("s/attention/be/2.0/context_attention_perf.csv"),
      "batch_size,isl,num_heads,num_key_value_heads,head_dim,attn_dtype,kv_cache_dtype,step,latency\n"
      "1,128,8,8,128,bfloat16,bfloat16,0,0.5\n");
  Put(root.File("s/attention/be/1.0/context_attention_perf.csv"),
      "latency,step,kv_cache_dtype,attn_dtype,window_size,head_dim,num_key_value_heads,num_heads,isl,batch_size\n"
      "0.9,0,bfloat16,bfloat16,0,128,8,8,128,1\n"
      "0.7,0,bfloat16,bfloat16,0,128,8,8,256,1\n"
      "0.8,0,bfloat16,bfloat16,64,128,8,8,128,1\n");
  PerfDatabase db = PerfDatabase::Open({root.path()}, "s", "be");
  const LoadedTable& t = db.Table("context_attention_perf");
  ASSERT_EQ(t.table.num_rows(), 3u);
  std::size_t cw = t.table.ColumnIndex("window_size"), ci = t.table.ColumnIndex("isl"),
              cl = t.table.ColumnIndex("latency");
  EXPECT_EQ(t.table.GetInt(0, cw), 0);
  EXPECT_DOUBLE_EQ(t.table.GetDouble(0, cl), 0.5);  // the (isl 128, window 0) key from the primary
  EXPECT_EQ(t.table.GetInt(1, ci), 256);
  EXPECT_DOUBLE_EQ(t.table.GetDouble(1, cl), 0.7);
  EXPECT_EQ(t.table.GetInt(2, cw), 64);
  EXPECT_EQ(t.shadowed_rows, 1u);
}

TEST(PerfDatabaseTest, NonKeyColumnAbsentFromASourceReadsAsNaN) {
  TempDir root;
  Put(root.File("s/gemm/be/2.0/gemm_perf.csv"), "gemm_dtype,m,n,k,latency,power\nbf16,1,1,1,1.0,300\n");
  Put(root.File("s/gemm/be/1.0/gemm_perf.csv"), GemmRows({{2, 2.0}}));
  PerfDatabase db = PerfDatabase::Open({root.path()}, "s", "be");
  const LoadedTable& t = db.Table("gemm_perf");
  ASSERT_EQ(t.table.num_rows(), 2u);
  std::size_t cp = t.table.ColumnIndex("power");
  EXPECT_EQ(t.table.columns()[cp].type, ValueType::kDouble);  // int column widened to hold NaN
  EXPECT_DOUBLE_EQ(t.table.GetDouble(0, cp), 300.0);
  EXPECT_TRUE(std::isnan(t.table.GetDouble(1, cp)));
}

// A key repeated inside one file is an error (file, both lines, the key) unless
// the folder's collection_meta.yaml was written by another collector (AIC's
// trees repeat keys; the first row wins there, as in AIC).
// The 1-based row of `file` (as written, in its row groups' order) holding bf16,
// m, latency.
std::size_t RowOf(const std::string& file, double latency, std::int64_t m) {
  const Table t = LoadTableFile(file);
  for (std::size_t r = 0; r < t.num_rows(); ++r)
    if (t.GetString(r, t.ColumnIndex("gemm_dtype")) == "bf16" && t.GetInt(r, t.ColumnIndex("m")) == m &&
        t.GetDouble(r, t.ColumnIndex("latency")) == latency)
      return r + 1;
  return 0;
}

TEST(PerfDatabaseTest, DuplicateKeysInOneFileAreRefused) {
  TempDir root;
  Put(root.File("s/gemm/be/1.0/gemm_perf.csv"), GemmRows({{2, 1.0}, {1, 1.0}, {1, 3.0}}));
  PerfDatabase db = PerfDatabase::Open({root.path()}, "s", "be");
  const std::string msg = ThrownMessage<DataError>([&] { db.Table("gemm_perf"); });
  EXPECT_TRUE(HasText(msg, root.File("s/gemm/be/1.0/gemm_perf.csv") + ":4: duplicate key gemm_dtype=bf16, m=1, n=1, k=1"))
      << msg;
  EXPECT_TRUE(HasText(msg, "lines 3 and 4")) << msg;
  // The same in a slice, numbered in the whole file.
  const std::string sliced = ThrownMessage<DataError>([&] { db.Table("gemm_perf", RowSlice{"gemm_dtype", "bf16"}); });
  EXPECT_TRUE(HasText(sliced, "lines 3 and 4")) << sliced;
  // servecast's own meta: still refused.
  Put(root.File("s/gemm/be/1.0/collection_meta.yaml"), "schema_version: 1\nservecast:\n  version: 0.1.0\n");
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { PerfDatabase::Open({root.path()}, "s", "be").Table("gemm_perf"); }),
                      "duplicate key"));
}

// In Parquet the rows are named by their index in the file, a slice's too (the
// row groups it skips count).
TEST(PerfDatabaseTest, DuplicateKeysInAParquetSliceNameTheFileRows) {
  TempDir root;
  Put(root.File("t.csv"), std::string(kGemmHeader) + "fp8,1,1,1,0.5\nbf16,1,1,1,1.0\nbf16,2,1,1,1.0\nfp8,2,1,1,0.5\n"
                                                      "bf16,2,1,1,9.0\n");
  TableWriteOptions o;
  o.parquet.group_by = {"gemm_dtype"};
  WriteTableFile(Table::ReadCsv(root.File("t.csv")), root.File("s/gemm/be/1.0/gemm_perf.parquet"), o);
  PerfDatabase db = PerfDatabase::Open({root.path()}, "s", "be");
  const std::string whole = ThrownMessage<DataError>([&] { db.Table("gemm_perf"); });
  EXPECT_TRUE(HasText(whole, "gemm_perf.parquet: duplicate key gemm_dtype=bf16, m=2, n=1, k=1")) << whole;
  const std::string sliced = ThrownMessage<DataError>([&] { db.Table("gemm_perf", RowSlice{"gemm_dtype", "bf16"}); });
  EXPECT_TRUE(HasText(sliced, "rows " + std::to_string(RowOf(root.File("s/gemm/be/1.0/gemm_perf.parquet"), 1.0, 2)) +
                                  " and " +
                                  std::to_string(RowOf(root.File("s/gemm/be/1.0/gemm_perf.parquet"), 9.0, 2))))
      << sliced;
  EXPECT_EQ(HasText(whole, "rows "), true) << whole;
  // The fp8 slice has no repeat: it loads.
  EXPECT_EQ(db.Table("gemm_perf", RowSlice{"gemm_dtype", "fp8"}).table.num_rows(), 2u);
}

TEST(PerfDatabaseTest, DuplicateKeysOfAnotherCollectorKeepTheFirst) {
  TempDir root;
  Put(root.File("s/gemm/be/1.0/gemm_perf.csv"), GemmRows({{1, 1.0}, {1, 3.0}}));
  Put(root.File("s/gemm/be/1.0/collection_meta.yaml"), "schema_version: 1\nprovenance: collected\n");
  PerfDatabase db = PerfDatabase::Open({root.path()}, "s", "be");
  const LoadedTable& t = db.Table("gemm_perf");
  EXPECT_EQ(t.table.num_rows(), 1u);
  EXPECT_EQ(t.duplicate_rows_dropped, 1u);
  EXPECT_DOUBLE_EQ(Lookup(t, 1).latency, 1.0);
}

TEST(PerfDatabaseTest, MissingThingsNameWhatExists) {
  TempDir root;
  Put(root.File("s/gemm/be/1.0/gemm_perf.csv"), GemmRows({{1, 1.0}}));
  Put(root.File("s/moe/be/1.0/moe_perf.csv"), "moe_dtype,num_tokens,latency\nfp8,1,0.1\n");
  PerfDatabase db = PerfDatabase::Open({root.path()}, "s", "be");
  std::string msg = ThrownMessage<MissingDataError>([&] { db.Table("context_attention_perf"); });
  EXPECT_TRUE(HasText(msg, "context_attention_perf"));
  EXPECT_TRUE(HasText(msg, "gemm_perf, moe_perf"));
  EXPECT_TRUE(HasText(ThrownMessage<MissingDataError>([&] { PerfDatabase::Open({root.path()}, "x", "be"); }),
                      "systems with data: s"));
  EXPECT_TRUE(HasText(ThrownMessage<MissingDataError>([&] { PerfDatabase::Open({root.path()}, "s", "vllm"); }),
                      "backends with data: be"));
  EXPECT_TRUE(HasText(ThrownMessage<MissingDataError>([&] { PerfDatabase::Open({root.path()}, "s", "be", "2.0"); }),
                      "versions: 1.0"));
}

TEST(PerfDatabaseTest, ReuseOfAMissingDonorIsAnError) {
  TempDir root;
  Put(root.File("s/gemm/be/1.0/gemm_perf.csv"), GemmRows({{1, 1.0}}));
  Put(root.File("s/gemm/be/1.0/reuse.yaml"),
      "schema_version: 1\nreuse:\n- table: gemm_perf\n  from_version: 0.5.0\n  reason: r\n  approved_by: x\n");
  PerfDatabase db = PerfDatabase::Open({root.path()}, "s", "be");
  EXPECT_TRUE(HasText(ThrownMessage<ConfigError>([&] { db.Table("gemm_perf"); }), "0.5.0"));
}

TEST(PerfDatabaseTest, InventoryCountsRows) {
  TempDir root;
  Put(root.File("s/gemm/be/1.0/gemm_perf.csv"), GemmRows({{1, 1.0}, {2, 1.0}}));
  Put(root.File("s/gemm/be/1.1/reuse.yaml"),
      "schema_version: 1\nreuse:\n- table: gemm_perf\n  from_version: '1.0'\n  reason: r\n  approved_by: x\n");
  auto inv = Inventory(DataTree::Scan({root.path()}));
  ASSERT_EQ(inv.size(), 2u);
  EXPECT_EQ(inv[0].version, "1.0");
  ASSERT_EQ(inv[0].tables.size(), 1u);
  EXPECT_EQ(inv[0].tables[0].rows, 2);
  EXPECT_TRUE(inv[1].marker_only);
  EXPECT_EQ(inv[1].reuse.size(), 1u);
}

// servecast's own H200 data (Parquet, committed here) loads, the row count matches
// its collection_meta.yaml, and the GEMM slices listed from the footer are the
// dtypes of the rows, each row group holding one.
TEST(PerfDatabaseRealDataTest, ServecastH200Loads) {
  const std::string root = std::string(SERVECAST_SOURCE_DIR) + "/systems/data";
  ASSERT_TRUE(std::filesystem::exists(root + "/h200_sxm")) << "the bundled H200 data is part of the repository";
  PerfDatabase db = PerfDatabase::Open({root}, "h200_sxm", "cuda");
  EXPECT_EQ(db.version(), "13.0-cublaslt13.1-cudnn9.14-nccl2.28");
  for (const char* name : {"gemm_perf", "elementwise_perf", "computescale_perf"}) {
    const LoadedTable& t = db.Table(name);
    ASSERT_FALSE(t.sources.empty());
    std::string dir = std::filesystem::path(t.sources[0].file).parent_path().string();
    YAML::Node meta = YAML::LoadFile(dir + "/collection_meta.yaml");
    EXPECT_EQ(static_cast<long long>(t.table.num_rows()), meta["tables"][name]["rows"].as<long long>()) << name;
    EXPECT_EQ(t.duplicate_rows_dropped, 0u) << name;
    EXPECT_EQ(meta["tables"][name]["file"].as<std::string>(), std::string(name) + ".parquet");
    EXPECT_EQ(std::filesystem::path(t.sources[0].file).extension(), ".parquet");
  }
  const LoadedTable& whole = db.Table("gemm_perf");
  std::vector<std::string> dtypes;
  for (std::size_t r = 0; r < whole.table.num_rows(); ++r) {
    const std::string& d = whole.table.GetString(r, whole.table.ColumnIndex("gemm_dtype"));
    if (std::find(dtypes.begin(), dtypes.end(), d) == dtypes.end()) dtypes.push_back(d);
  }
  EXPECT_EQ(db.SliceValues("gemm_perf", "gemm_dtype"), dtypes);
  std::size_t rows = 0;
  for (const auto& d : dtypes) rows += db.Table("gemm_perf", RowSlice{"gemm_dtype", d}).table.num_rows();
  EXPECT_EQ(rows, whole.table.num_rows());
}

std::string AicRoot() {
  return std::string(SERVECAST_SHARED_DIR) + "/reference/aic-parquet";
}

// AIC's tree loads unchanged; the GEMM table of TRT-LLM 1.3.0rc20 has the rows of
// the reference CSV dumps (35,700 bf16 + 35,700 fp8 + 29,268 fp8_block).
TEST(PerfDatabaseRealDataTest, AicH200TrtllmLoads) {
  SERVECAST_NEED_SHARED(std::filesystem::exists(AicRoot() + "/h200_sxm"), "no reference tree at " + AicRoot());
  PerfDatabase db = PerfDatabase::Open({AicRoot()}, "h200_sxm", "trtllm");
  EXPECT_EQ(db.version(), "1.3.0rc20");
  const LoadedTable& gemm = db.Table("gemm_perf");
  EXPECT_EQ(gemm.table.num_rows(), 100668u);
  EXPECT_EQ(gemm.sources.size(), 1u);
  EXPECT_EQ(gemm.duplicate_rows_dropped, 0u);
  std::map<std::string, std::size_t> per_dtype;
  std::size_t cd = gemm.table.ColumnIndex("gemm_dtype");
  for (std::size_t r = 0; r < gemm.table.num_rows(); ++r) ++per_dtype[gemm.table.GetString(r, cd)];
  EXPECT_EQ(per_dtype["bfloat16"], 35700u);
  EXPECT_EQ(per_dtype["fp8"], 35700u);
  EXPECT_EQ(per_dtype["fp8_block"], 29268u);
  // Attention: AIC's column order, keys by name; same counts as the CSV dumps.
  EXPECT_EQ(db.Table("context_attention_perf").table.num_rows(), 75837u);
  EXPECT_EQ(db.Table("generation_attention_perf").table.num_rows(), 52033u);
  EXPECT_EQ(db.Table("nccl_perf").sources.at(0).version, "2.29.2");
  EXPECT_EQ(db.Table("nccl_perf").table.num_rows(), 504u);
  EXPECT_EQ(db.Table("custom_allreduce_perf").table.num_rows(), 69u);
}

// vllm 0.22.0 on H200 declares 0.24.0 as donor of gemm_perf: its own rows come
// first, the donor fills the rest, older siblings after that.
TEST(PerfDatabaseRealDataTest, AicVllmReuseYaml) {
  SERVECAST_NEED_SHARED(std::filesystem::exists(AicRoot() + "/h200_sxm"), "no reference tree at " + AicRoot());
  PerfDatabase db = PerfDatabase::Open({AicRoot()}, "h200_sxm", "vllm", "0.22.0");
  const LoadedTable& t = db.Table("gemm_perf");
  ASSERT_GE(t.sources.size(), 2u);
  EXPECT_EQ(t.sources[0].kind, SourceKind::kPrimary);
  EXPECT_EQ(t.sources[1].kind, SourceKind::kReuse);
  EXPECT_EQ(t.sources[1].version, "0.24.0");
  for (std::size_t i = 2; i < t.sources.size(); ++i) {
    EXPECT_EQ(t.sources[i].kind, SourceKind::kOlderSibling);
    EXPECT_TRUE(VersionDirLess(t.sources[i].version, "0.22.0"));
    if (i > 2) {
      EXPECT_TRUE(VersionDirLess(t.sources[i].version, t.sources[i - 1].version));  // nearest first
    }
  }
  EXPECT_EQ(t.sources[0].rows_used + t.duplicate_rows_dropped, t.sources[0].rows_read);
  std::size_t used = 0;
  for (const auto& s : t.sources) used += s.rows_used;
  EXPECT_EQ(used, t.table.num_rows());
}

// Every table of every (system, backend) of AIC's tree resolves at the newest version.
TEST(PerfDatabaseRealDataTest, AicTreeResolvesEverywhere) {
  SERVECAST_NEED_SHARED(std::filesystem::exists(AicRoot()), "no reference tree at " + AicRoot());
  DataTree tree = DataTree::Scan({AicRoot()});
  int tables = 0;
  for (const auto& system : tree.Systems()) {
    for (const auto& backend : tree.Backends(system)) {
      PerfDatabase db = PerfDatabase::Open({AicRoot()}, system, backend);
      for (const auto& name : db.TableNames()) {
        try {
          const LoadedTable& t = db.Table(name);
          EXPECT_GT(t.table.num_rows(), 0u) << system << "/" << backend << " " << name;
          ++tables;
        } catch (const MissingDataError&) {
          // A table no source of this version resolves is missing by rule.
        }
      }
    }
  }
  EXPECT_GT(tables, 20);
}

}  // namespace
}  // namespace servecast::perfdb
