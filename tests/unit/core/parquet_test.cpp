#include "core/parquet.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "core/thrift_compact.h"
#include "core_test_util.h"

namespace servecast {
namespace {

using testing::HasText;
using testing::TempDir;
using testing::ThrownMessage;
using VT = ValueType;
using Codec = ParquetWriteOptions::Codec;

const std::string kReference = std::string(SERVECAST_SHARED_DIR) + "/reference";

// Small files written by pyarrow 26 (store_schema=False) to cover what our writer
// does not produce: data pages v2, INT32 / FLOAT / BOOLEAN, OPTIONAL columns with
// nulls, the null type, PLAIN strings, several pages per chunk, nesting.
// Each holds the columns i32 [1, -2, INT32_MAX, INT32_MIN, 5], f32 [0.5, -1.25, 3, 1e10, -0],
// flag [T, F, T, T, F], s ["a", null, "héllo", "", null], nothing (null type), i64 [10..50].
const char* const kV2ZstdHex =
    "504152311506152c152c5c150a1500150a150015041500121c1804ffffff7f18040000008016002804ffffff7f1804000000"
    "8011110000000a0101000000feffffffffffff7f00000080050000001506152c152c5c150a1500150a150015041500121c18"
    "04f902155018040000a0bf16002804f902155018040000a0bf11110000000a010000003f0000a0bf00004040f90215500000"
    "00801506151015105c150a1500150a150615041500121c180101180100160028010118010011110000000a0102000000030d"
    "1504152615384c1506150012000028b52ffd201399000001000000610600000068c3a96c6c6f000000001506150c150c5c15"
    "0a1504150a151015041500121c3604280668c3a96c6c6f18001111000000030d020324001506150415045c150a150a150a15"
    "0015041500121c0000000a001506155415445c150a1500150a150015041500111c1808320000000000000018080a00000000"
    "00000016002808320000000000000018080a0000000000000011110000000a0128b52ffd2028bd0000800a0014001e002800"
    "32000000000000000454020003011504197c35001806736368656d61150c0015022502180369333200150825021803663332"
    "00150025021804666c616700150c250218017325004c1c0000001502250218076e6f7468696e676cbc000000150425021803"
    "69363400160a191c196c26001c150219250600191803693332150c160a16940116940126083c1804ffffff7f180400000080"
    "16002804ffffff7f180400000080111100191c150015001502003c29061926000a00000026001c1508192506001918036633"
    "32150c160a169401169401269c013c1804f902155018040000a0bf16002804f902155018040000a0bf111100191c15001500"
    "1502003c29061926000a00000026001c1500191506191804666c6167150c160a1660166026b0023c18010118010016002801"
    "01180100111100191c150015061502003c29061926000a00000026001c150c193500061019180173150c160a169a0116ac01"
    "26e4032690031c3604280668c3a96c6c6f1800111100192c15041500150200150015101502003c160e190619260406000000"
    "26001c1502192506001918076e6f7468696e67150c160a1634163426bc04491c150015001502003c290619260a0000000026"
    "001c150419250600191803693634150c160a16dc0116cc0126f0043c1808320000000000000018080a000000000000001600"
    "2808320000000000000018080a00000000000000111100191c150015001502003c29061926000a00000016b206160a260816"
    "b406002820706172717565742d6370702d6172726f772076657273696f6e2032362e302e31196c1c00001c00001c00001c00"
    "001c00001c0000005202000050415231";

const char* const kV1SnappyPlainHex =
    "504152311500153415382c150a1500150615061c1804ffffff7f18040000008016002804ffffff7f18040000008011110000"
    "001a64020000000a0101000000feffffffffffff7f00000080050000001500153415382c150a1500150615061c1804f90215"
    "5018040000a0bf16002804f902155018040000a0bf11110000001a64020000000a010000003f0000a0bf00004040f9021550"
    "000000801500150e15122c150a1500150615061c180101180100160028010118010011110000000718020000000a010d1500"
    "153215362c150a1500150615061c3604280668c3a96c6c6f18001111000000196002000000030d01000000610600000068c3"
    "a96c6c6f000000001500150c15102c150a1500150615061c0000000614020000000a001500155c154c2c150a150015061506"
    "1c1808320000000000000018080a0000000000000016002808320000000000000018080a0000000000000011110000002e1c"
    "020000000a010a0009010014090704001e0d083c280000000000000032000000000000001504197c35001806736368656d61"
    "150c001502250218036933320015082502180366333200150025021804666c616700150c250218017325004c1c0000001502"
    "250218076e6f7468696e676cbc00000015042502180369363400160a191c196c26001c150219250600191803693332150216"
    "0a16920116960126083c1804ffffff7f18040000008016002804ffffff7f180400000080111100191c150015001502003c29"
    "061926000a00000026001c1508192506001918036633321502160a169201169601269e013c1804f902155018040000a0bf16"
    "002804f902155018040000a0bf111100191c150015001502003c29061926000a00000026001c150019250600191804666c61"
    "671502160a1654165826b4023c1801011801001600280101180100111100191c150015001502003c29061926000a00000026"
    "001c150c19250600191801731502160a16741678268c033c3604280668c3a96c6c6f1800111100191c150015001502003c16"
    "0e19061926040600000026001c1502192506001918076e6f7468696e671502160a16321636268404491c150015001502003c"
    "290619260a0000000026001c1504192506001918036936341502160a16da0116ca0126ba043c180832000000000000001808"
    "0a0000000000000016002808320000000000000018080a00000000000000111100191c150015001502003c29061926000a00"
    "000016f805160a260816fc05002820706172717565742d6370702d6172726f772076657273696f6e2032362e302e31196c1c"
    "00001c00001c00001c00001c00001c0000004602000050415231";

const char* const kV2UncompressedDictHex =
    "504152311504152815284c150a150012000001000000feffffffffffff7f00000080050000001506150a150a5c1504150015"
    "04151015041500121c1804010000001804feffffff16002804010000001804feffffff111100000004010103021506150c15"
    "0c5c150415001504151015041500121c1804ffffff7f18040000008016002804ffffff7f1804000000801111000000040102"
    "030e001506150a150a5c150215001502151015041500121c1804050000001804050000001600280405000000180405000000"
    "111100000002010302041504152815284c150a15001200000000003f0000a0bf00004040f9021550000000801506150a150a"
    "5c150415001504151015041500121c18040000003f18040000a0bf160028040000003f18040000a0bf111100000004010103"
    "021506150c150c5c150415001504151015041500121c1804f902155018040000404016002804f90215501804000040401111"
    "000000040102030e001506150a150a5c150215001502151015041500121c1804000000001804000000801600280400000000"
    "180400000080111100000002010302041506151015105c150415001504150615041500121c18010118010016002801011801"
    "00111100000004010200000003011506151015105c150415001504150615041500121c180101180101160028010118010111"
    "1100000004010200000004011506151015105c150215001502150615041500121c1801001801001600280100180100111100"
    "000002010200000002001504152615264c1506150012000001000000610600000068c3a96c6c6f000000001506150a150a5c"
    "150415021504151015041500121c3602280161180161111100000003010102001506150c150c5c1504150015041510150415"
    "00121c3600280668c3a96c6c6f180011110000000401020309001506150615065c150215021502151015041500121c360200"
    "00000200021504150015004c150015001200001506150615065c150a150a150a151015041500121c0000000a000015041550"
    "15504c150a15001200000a0000000000000014000000000000001e0000000000000028000000000000003200000000000000"
    "1506150a150a5c150415001504151015041500121c1808140000000000000018080a00000000000000160028081400000000"
    "00000018080a00000000000000111100000004010103021506150c150c5c150415001504151015041500121c180828000000"
    "0000000018081e0000000000000016002808280000000000000018081e000000000000001111000000040102030e00150615"
    "0a150a5c150215001502151015041500121c1808320000000000000018083200000000000000160028083200000000000000"
    "18083200000000000000111100000002010302041504197c35001806736368656d61150c0015022502180369333200150825"
    "02180366333200150025021804666c616700150c250218017325004c1c0000001502250218076e6f7468696e676cbc000000"
    "15042502180369363400160a191c196c26001c150219350006101918036933321500160a169c03169c03264c26081c1804ff"
    "ffff7f18040000008016002804ffffff7f180400000080111100192c15041500150200150015101506003c29061926000a00"
    "000026001c150819350006101918036633321500160a169c03169c0326e80326a4031c1804f902155018040000a0bf160028"
    "04f902155018040000a0bf111100192c15041500150200150015101506003c29061926000a00000026001c15001915061918"
    "04666c61671500160a16a00216a00226c0063c1801011801001600280101180100111100191c150015061506003c29061926"
    "000a00000026001c150c1935000610191801731500160a16a20216a20226a20926e0081c3604280668c3a96c6c6f18001111"
    "00192c15041500150200150015101506003c160e19061926040600000026001c150219350006101918076e6f7468696e6715"
    "00160a16521652269e0b26820b292c15041500150200150015101502003c290619260a0000000026001c1504193500061019"
    "18036936341500160a16a40416a40426c00c26d40b1c1808320000000000000018080a000000000000001600280832000000"
    "0000000018080a00000000000000111100192c15041500150200150015101506003c29061926000a00000016f00f160a2608"
    "16f00f002820706172717565742d6370702d6172726f772076657273696f6e2032362e302e31196c1c00001c00001c00001c"
    "00001c00001c0000007f02000050415231";

const char* const kNumericNullsHex =
    "504152311504152015204c15041500120000000000000000f03f00000000000008401500151215122c15061510150615061c"
    "180800000000000008401808000000000000f03f1602280800000000000008401808000000000000f03f1111000000020000"
    "0003050103021504151015104c1502150012000001000000000000001500151215122c15061510150615061c180801000000"
    "0000000018080100000000000000160428080100000000000000180801000000000000001111000000020000000301010200"
    "1504193c35001806736368656d61150400150a2502180178001504250218016e001606191c192c26001c150a193500061019"
    "1801781500160616cc0116cc01264426081c180800000000000008401808000000000000f03f160228080000000000000840"
    "1808000000000000f03f111100192c15041500150200150015101502003c29061926020400000026001c1504193500061019"
    "18016e1500160616bc0116bc0126800226d4011c180801000000000000001808010000000000000016042808010000000000"
    "000018080100000000000000111100192c15041500150200150015101502003c290619260402000000168803160626081688"
    "03002820706172717565742d6370702d6172726f772076657273696f6e2032362e302e31192c1c00001c0000002701000050"
    "415231";

const char* const kNestedHex =
    "504152311504153015304c150615001200000100000000000000020000000000000003000000000000001500152015202c15"
    "061510150615061c180803000000000000001808010000000000000016002808030000000000000018080100000000000000"
    "1111000000020000000302020000000603020324001504194c35001806736368656d61150200350218016c150215064c3c00"
    "0000350418046c697374150200150425021807656c656d656e74001604191c191c26001c150419350006101938016c046c69"
    "737407656c656d656e741500160616ea0116ea01265426081c18080300000000000000180801000000000000001600280803"
    "0000000000000018080100000000000000111100192c15041500150200150015101502003c29260402194600000006000000"
    "16ea011604260816ea01002820706172717565742d6370702d6172726f772076657273696f6e2032362e302e31191c1c0000"
    "00e600000050415231";

std::string Unhex(const char* hex) {
  std::string out;
  for (std::size_t i = 0; hex[i] != '\0' && hex[i + 1] != '\0'; i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex + i, 2), nullptr, 16)));
  }
  return out;
}

bool SameBits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// Exact equality of two tables, doubles compared bit for bit (NaN included).
::testing::AssertionResult SameTable(const Table& a, const Table& b) {
  if (a.columns() != b.columns()) return ::testing::AssertionFailure() << "columns differ";
  if (a.num_rows() != b.num_rows()) {
    return ::testing::AssertionFailure() << "rows " << a.num_rows() << " vs " << b.num_rows();
  }
  for (std::size_t c = 0; c < a.num_columns(); ++c) {
    for (std::size_t r = 0; r < a.num_rows(); ++r) {
      bool same = a.columns()[c].type == VT::kDouble ? SameBits(a.GetDouble(r, c), b.GetDouble(r, c))
                                                     : a.Get(r, c) == b.Get(r, c);
      if (!same) {
        return ::testing::AssertionFailure() << "row " << r << " column " << a.columns()[c].name << ": "
                                             << ToString(a.Get(r, c)) << " vs " << ToString(b.Get(r, c));
      }
    }
  }
  return ::testing::AssertionSuccess();
}

Table MixedTable(std::size_t rows) {
  Table t({{"id", VT::kInt64}, {"latency", VT::kDouble}, {"dtype", VT::kString}, {"note", VT::kString}});
  const double specials[] = {0.0,
                             -0.0,
                             std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::denorm_min(),
                             std::numeric_limits<double>::max(),
                             0.1};
  const char* dtypes[] = {"bfloat16", "fp8", "fp8_block", ""};
  std::mt19937_64 rng(42);
  for (std::size_t r = 0; r < rows; ++r) {
    std::int64_t id = r % 5 == 0   ? std::numeric_limits<std::int64_t>::min() + static_cast<std::int64_t>(r)
                      : r % 5 == 1 ? std::numeric_limits<std::int64_t>::max() - static_cast<std::int64_t>(r)
                                   : static_cast<std::int64_t>(rng());
    double latency = r < 8 ? specials[r] : std::ldexp(static_cast<double>(rng() >> 11), -40);
    std::string note = r % 7 == 0 ? "" : r % 7 == 1 ? "héllo wörld ✓ 日本語" : "row " + std::to_string(r % 50);
    if (r % 97 == 3) note = std::string(3000, 'x') + std::to_string(r);
    t.AppendRow({id, latency, std::string(dtypes[(r / 3) % 4]), note});
  }
  return t;
}

// ------------------------------------------------------------------ reference data

TEST(ParquetTest, ReadsEveryReferenceFile) {
  const std::string root = kReference + "/aic-parquet";
  ASSERT_TRUE(std::filesystem::is_directory(root)) << root;
  std::vector<std::string> failures;
  std::size_t files = 0, rows = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".parquet") continue;
    ++files;
    try {
      Table t = ReadParquet(entry.path().string());
      EXPECT_GT(t.num_columns(), 0u) << entry.path();
      rows += t.num_rows();
    } catch (const DataError& e) {
      failures.push_back(e.what());
    }
  }
  // No file is known to be unsupported: every one must read.
  EXPECT_TRUE(failures.empty()) << failures.size() << " failed, first: " << failures.front();
  EXPECT_GE(files, 100u);
  std::cout << "[ read " << files << " reference Parquet files, " << rows << " rows ]\n";
}

struct DumpCase {
  const char* csv;
  const char* parquet;
  const char* filter_column = nullptr;  // nullptr: every row
  const char* filter_value = nullptr;
};

// The CSV dumps of aic-h200/ hold the parquet rows in file order (a filter on
// gemm_dtype for the GEMM dumps). Their doubles are shortest round-trip text, so
// every value must match exactly.
TEST(ParquetTest, MatchesReferenceCsvDumpsExactly) {
  const std::string p = kReference + "/aic-parquet/h200_sxm/";
  const DumpCase cases[] = {
      {"gemm_trtllm_1.3.0rc20_bf16.csv", "gemm/trtllm/1.3.0rc20/gemm_perf.parquet", "gemm_dtype", "bfloat16"},
      {"gemm_trtllm_1.3.0rc20_fp8.csv", "gemm/trtllm/1.3.0rc20/gemm_perf.parquet", "gemm_dtype", "fp8"},
      {"gemm_trtllm_1.3.0rc20_fp8_block.csv", "gemm/trtllm/1.3.0rc20/gemm_perf.parquet", "gemm_dtype", "fp8_block"},
      {"context_attention_trtllm_1.3.0rc20.csv", "attention/trtllm/1.3.0rc20/context_attention_perf.parquet"},
      {"generation_attention_trtllm_1.3.0rc20.csv", "attention/trtllm/1.3.0rc20/generation_attention_perf.parquet"},
      {"moe_trtllm_1.3.0rc20.csv", "moe/trtllm/1.3.0rc20/moe_perf.parquet"},
      {"nccl_2.29.2.csv", "comm/nccl/2.29.2/nccl_perf.parquet"},
      {"custom_allreduce_trtllm_1.3.0rc20.csv", "comm/trtllm/1.3.0rc20/custom_allreduce_perf.parquet"},
  };
  std::size_t total_rows = 0;
  for (const DumpCase& dc : cases) {
    SCOPED_TRACE(dc.csv);
    Table csv = Table::ReadCsv(kReference + "/aic-h200/" + dc.csv);
    Table pq = ReadParquet(p + dc.parquet);
    if (dc.filter_column != nullptr) {
      std::size_t fc = pq.ColumnIndex(dc.filter_column);
      std::vector<std::size_t> keep;
      for (std::size_t r = 0; r < pq.num_rows(); ++r)
        if (pq.GetString(r, fc) == dc.filter_value) keep.push_back(r);
      pq = pq.Select(keep);
    }
    ASSERT_EQ(pq.num_rows(), csv.num_rows());
    ASSERT_GT(csv.num_rows(), 0u);
    std::size_t mismatches = 0;
    for (std::size_t c = 0; c < csv.num_columns(); ++c) {
      const ColumnSpec& spec = csv.columns()[c];
      std::size_t pc = pq.ColumnIndex(spec.name);
      for (std::size_t r = 0; r < csv.num_rows(); ++r) {
        bool same = spec.type == VT::kDouble ? pq.GetDouble(r, pc) == csv.GetDouble(r, c)
                                             : ToString(pq.Get(r, pc)) == ToString(csv.Get(r, c));
        if (!same && ++mismatches <= 5) {
          ADD_FAILURE() << "row " << r << " column " << spec.name << ": parquet " << ToString(pq.Get(r, pc)) << " csv "
                        << ToString(csv.Get(r, c));
        }
      }
    }
    EXPECT_EQ(mismatches, 0u);
    EXPECT_EQ(csv.columns().back().name == "latency" || csv.columns().back().name == "implementation", true);
    EXPECT_EQ(pq.columns()[pq.ColumnIndex("latency")].type, VT::kDouble);
    total_rows += csv.num_rows();
  }
  EXPECT_EQ(total_rows, 355633u);
}

// ------------------------------------------------------------------ pyarrow fixtures

void ExpectFixtureValues(const Table& t) {
  ASSERT_EQ(t.num_rows(), 5u);
  std::size_t i32 = t.ColumnIndex("i32"), f32 = t.ColumnIndex("f32"), flag = t.ColumnIndex("flag"),
              s = t.ColumnIndex("s"), nothing = t.ColumnIndex("nothing"), i64 = t.ColumnIndex("i64");
  EXPECT_EQ(t.columns()[i32].type, VT::kInt64);
  EXPECT_EQ(t.columns()[f32].type, VT::kDouble);
  EXPECT_EQ(t.columns()[flag].type, VT::kInt64);
  EXPECT_EQ(t.columns()[s].type, VT::kString);
  EXPECT_EQ(t.columns()[nothing].type, VT::kString);
  const std::int64_t ints[] = {1, -2, 2147483647, -2147483648LL, 5};
  const double floats[] = {0.5, -1.25, 3.0, 1e10, -0.0};
  const std::int64_t flags[] = {1, 0, 1, 1, 0};
  const char* strings[] = {"a", "", "héllo", "", ""};
  for (std::size_t r = 0; r < 5; ++r) {
    EXPECT_EQ(t.GetInt(r, i32), ints[r]);
    EXPECT_TRUE(SameBits(t.GetDouble(r, f32), floats[r])) << r;
    EXPECT_EQ(t.GetInt(r, flag), flags[r]);
    EXPECT_EQ(t.GetString(r, s), strings[r]);
    EXPECT_EQ(t.GetString(r, nothing), "");
    EXPECT_EQ(t.GetInt(r, i64), 10 * static_cast<std::int64_t>(r + 1));
  }
}

TEST(ParquetTest, ReadsPyarrowDataPageV2Zstd) {
  ExpectFixtureValues(ParseParquet(Unhex(kV2ZstdHex), "v2_zstd"));
}

TEST(ParquetTest, ReadsPyarrowPlainSnappyV1) {
  ExpectFixtureValues(ParseParquet(Unhex(kV1SnappyPlainHex), "v1_snappy"));
}

TEST(ParquetTest, ReadsPyarrowDictionaryManyPagesUncompressed) {
  ExpectFixtureValues(ParseParquet(Unhex(kV2UncompressedDictHex), "v2_dict"));
}

TEST(ParquetTest, NullsInNumericColumnAreAnErrorNamingColumnAndCount) {
  std::string msg = ThrownMessage<DataError>([] { ParseParquet(Unhex(kNumericNullsHex), "nulls.parquet"); });
  EXPECT_TRUE(HasText(msg, "nulls.parquet"));
  EXPECT_TRUE(HasText(msg, "'x' has 1 null values of 3"));
}

TEST(ParquetTest, NestedSchemaIsRefused) {
  std::string msg = ThrownMessage<DataError>([] { ParseParquet(Unhex(kNestedHex), "nested.parquet"); });
  EXPECT_TRUE(HasText(msg, "nested.parquet"));
  EXPECT_TRUE(HasText(msg, "only flat tables are supported"));
}

// ------------------------------------------------------------------ round trips

TEST(ParquetTest, RoundTripsEveryCodecWithAndWithoutDictionary) {
  Table t = MixedTable(1000);
  for (Codec codec : {Codec::kUncompressed, Codec::kSnappy, Codec::kZstd}) {
    for (bool dictionary : {false, true}) {
      SCOPED_TRACE(static_cast<int>(codec) * 2 + dictionary);
      ParquetWriteOptions options;
      options.codec = codec;
      options.dictionary = dictionary;
      std::string bytes = SerializeParquet(t, options);
      EXPECT_EQ(bytes.substr(0, 4), "PAR1");
      EXPECT_TRUE(SameTable(ParseParquet(bytes, "mem"), t));
    }
  }
}

TEST(ParquetTest, RoundTripsManyRowGroups) {
  Table t = MixedTable(2503);
  for (std::size_t group_rows : {1u, 7u, 100u, 2503u, 5000u}) {
    ParquetWriteOptions options;
    options.row_group_rows = group_rows;
    options.codec = Codec::kSnappy;
    EXPECT_TRUE(SameTable(ParseParquet(SerializeParquet(t, options), "mem"), t)) << group_rows;
  }
}

TEST(ParquetTest, RoundTripsEmptyTablesAndSingleValueDictionaries) {
  Table empty({{"a", VT::kInt64}, {"b", VT::kString}});
  EXPECT_TRUE(SameTable(ParseParquet(SerializeParquet(empty), "mem"), empty));
  Table same({{"s", VT::kString}});
  for (int i = 0; i < 100; ++i) same.AppendRow({std::string("only")});
  EXPECT_TRUE(SameTable(ParseParquet(SerializeParquet(same), "mem"), same));
  Table no_columns;
  EXPECT_EQ(ParseParquet(SerializeParquet(no_columns), "mem").num_columns(), 0u);
}

TEST(ParquetTest, WriteAndReadFile) {
  TempDir dir;
  Table t = MixedTable(300);
  WriteParquet(t, dir.File("sub/t.parquet"));
  EXPECT_TRUE(SameTable(ReadParquet(dir.File("sub/t.parquet")), t));
  EXPECT_EQ(dir.List(), std::vector<std::string>{"sub"});
}

// ------------------------------------------------------------------ slices

// The rows of `t` whose string column `col` holds `value`, in table order.
Table RowsWith(const Table& t, const std::string& col, const std::string& value) {
  std::vector<std::size_t> keep;
  const std::size_t c = t.ColumnIndex(col);
  for (std::size_t r = 0; r < t.num_rows(); ++r)
    if (t.GetString(r, c) == value) keep.push_back(r);
  return t.Select(keep);
}

std::size_t FooterStart(const std::string& bytes) {
  std::uint32_t len;
  std::memcpy(&len, bytes.data() + bytes.size() - 8, 4);
  return bytes.size() - 8 - len;
}

// group_by keeps the rows of each slice in table order, slices in first-encounter
// order, and a slice read returns exactly the slice, whatever the row-group size.
TEST(ParquetSliceTest, GroupedFileReadsBackBySliceAndWhole) {
  const Table t = MixedTable(2503);  // dtype changes every 3 rows
  const std::vector<std::string> dtypes = {"bfloat16", "fp8", "fp8_block", ""};
  for (std::size_t group_rows : {1u, 100u, 1u << 20}) {
    SCOPED_TRACE(group_rows);
    ParquetWriteOptions options;
    options.group_by = {"dtype"};
    options.row_group_rows = group_rows;
    const std::string bytes = SerializeParquet(t, options);
    const Table whole = ParseParquet(bytes, "mem");
    ASSERT_EQ(whole.num_rows(), t.num_rows());
    std::size_t at = 0;
    for (const auto& d : dtypes) {
      const Table want = RowsWith(t, "dtype", d);
      std::vector<std::size_t> rows(want.num_rows());
      for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = at + i;
      EXPECT_TRUE(SameTable(whole.Select(rows), want)) << "slice '" << d << "' in the whole read";
      EXPECT_TRUE(SameTable(ParseParquet(bytes, "mem", RowSlice{"dtype", d}), want)) << "slice '" << d << "'";
      at += want.num_rows();
    }
    const Table none = ParseParquet(bytes, "mem", RowSlice{"dtype", "int4"});
    EXPECT_EQ(none.num_rows(), 0u);
    EXPECT_EQ(none.columns(), t.columns());
  }
}

// A slice read does not touch the other slices' row groups: with the second
// slice's pages destroyed, the first still reads; the whole file does not.
TEST(ParquetSliceTest, SliceReadSkipsOtherRowGroupsByStatistics) {
  Table t({{"dtype", VT::kString}, {"m", VT::kInt64}, {"latency", VT::kDouble}});
  for (int i = 0; i < 50; ++i) t.AppendRow({std::string("a"), std::int64_t{i}, 0.5 * i});
  for (int i = 0; i < 500; ++i) t.AppendRow({std::string("b"), std::int64_t{i}, 0.25 * i});
  ParquetWriteOptions options;
  options.group_by = {"dtype"};
  options.codec = Codec::kUncompressed;
  std::string bytes = SerializeParquet(t, options);
  // The "a" rows alone serialize to the same pages, so their data ends where the
  // footer of that file starts.
  const std::size_t a_end = FooterStart(SerializeParquet(RowsWith(t, "dtype", "a"), options));
  ASSERT_LT(a_end + 64, FooterStart(bytes));
  for (std::size_t i = a_end; i < FooterStart(bytes); ++i) bytes[i] = '\xff';
  EXPECT_TRUE(SameTable(ParseParquet(bytes, "mem", RowSlice{"dtype", "a"}), RowsWith(t, "dtype", "a")));
  EXPECT_THROW(ParseParquet(bytes, "mem"), DataError);
  EXPECT_THROW(ParseParquet(bytes, "mem", RowSlice{"dtype", "b"}), DataError);
}

// The distinct values come from the footer alone when each row group holds one.
TEST(ParquetSliceTest, ColumnValuesFromStatisticsWithoutTheData) {
  TempDir dir;
  const Table t = MixedTable(600);
  ParquetWriteOptions options;
  options.group_by = {"dtype"};
  options.codec = Codec::kUncompressed;
  std::string bytes = SerializeParquet(t, options);
  for (std::size_t i = 4; i < FooterStart(bytes); ++i) bytes[i] = '\xff';  // every page destroyed
  WriteFileAtomic(dir.File("t.parquet"), bytes);
  EXPECT_EQ(ParquetColumnValues(dir.File("t.parquet"), "dtype"),
            (std::vector<std::string>{"bfloat16", "fp8", "fp8_block", ""}));
  EXPECT_THROW(ReadParquet(dir.File("t.parquet")), DataError);
}

// Files without one value per row group (another writer, no group_by) are read
// and filtered row by row, and their values found by decoding that column.
TEST(ParquetSliceTest, FilesWithoutGroupingFilterRowByRow) {
  TempDir dir;
  const Table t = MixedTable(1000);
  WriteParquet(t, dir.File("plain.parquet"), ParquetWriteOptions{});
  EXPECT_TRUE(SameTable(ReadParquet(dir.File("plain.parquet"), RowSlice{"dtype", "fp8"}), RowsWith(t, "dtype", "fp8")));
  EXPECT_EQ(ParquetColumnValues(dir.File("plain.parquet"), "dtype"),
            (std::vector<std::string>{"bfloat16", "fp8", "fp8_block", ""}));
  // pyarrow's file: s = ["a", null, "héllo", "", null], nulls read as "".
  WriteFileAtomic(dir.File("arrow.parquet"), Unhex(kV2ZstdHex));
  const Table a = ReadParquet(dir.File("arrow.parquet"), RowSlice{"s", "a"});
  ASSERT_EQ(a.num_rows(), 1u);
  EXPECT_EQ(a.GetInt(0, a.ColumnIndex("i64")), 10);
  EXPECT_EQ(ReadParquet(dir.File("arrow.parquet"), RowSlice{"s", ""}).num_rows(), 3u);
  EXPECT_EQ(ParquetColumnValues(dir.File("arrow.parquet"), "s"), (std::vector<std::string>{"a", "", "h\xc3\xa9llo"}));
}

TEST(ParquetSliceTest, SliceColumnMustExistAndHoldText) {
  const std::string bytes = SerializeParquet(MixedTable(10));
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { ParseParquet(bytes, "t.parquet", RowSlice{"nope", "x"}); }),
                      "t.parquet: no slice column 'nope'; columns: id, latency, dtype, note"));
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { ParseParquet(bytes, "t.parquet", RowSlice{"id", "1"}); }),
                      "slice column 'id' is not a string column"));
}

// ------------------------------------------------------------------ corruption

TEST(ParquetTest, TruncatedFilesAreDataErrors) {
  ParquetWriteOptions options;
  options.row_group_rows = 40;
  const std::string bytes = SerializeParquet(MixedTable(200), options);
  for (std::size_t keep = 0; keep < bytes.size(); keep += 1 + keep / 7) {
    std::string msg =
        ThrownMessage<DataError>([&] { ParseParquet(std::string_view(bytes).substr(0, keep), "t.parquet"); });
    EXPECT_TRUE(HasText(msg, "t.parquet: ")) << keep;
  }
  // A truncated body with the original footer appended points outside the data.
  std::string cut = bytes.substr(0, bytes.size() / 2) + bytes.substr(bytes.size() - 500);
  EXPECT_THROW(ParseParquet(cut, "cut"), DataError);
}

TEST(ParquetTest, BadMagicAndFooterLength) {
  std::string bytes = SerializeParquet(MixedTable(10));
  std::string bad = bytes;
  bad[0] = 'X';
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { ParseParquet(bad, "a.parquet"); }), "bad magic at the start"));
  bad = bytes;
  bad[bad.size() - 1] = 'X';
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { ParseParquet(bad, "a.parquet"); }), "bad magic at the end"));
  bad = bytes;
  bad[bad.size() - 5] = '\x7f';
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([&] { ParseParquet(bad, "a.parquet"); }), "footer length"));
  for (std::uint32_t len : {0u, 1u, 5u, 17u}) {
    bad = bytes;
    std::memcpy(bad.data() + bad.size() - 8, &len, 4);
    EXPECT_THROW(ParseParquet(bad, "a.parquet"), DataError) << len;
  }
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([] { ParseParquet("PAR1PAR1", "tiny"); }), "too short"));
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([] { ReadParquet("/nonexistent/x.parquet"); }), "x.parquet"));
}

// Random byte flips must end in a table or a DataError, never a crash (run under
// ASan as well).
TEST(ParquetTest, CorruptBytesNeverCrash) {
  ParquetWriteOptions options;
  options.row_group_rows = 50;
  for (Codec codec : {Codec::kUncompressed, Codec::kSnappy, Codec::kZstd}) {
    options.codec = codec;
    const std::string bytes = SerializeParquet(MixedTable(120), options);
    std::mt19937 rng(7);
    for (int trial = 0; trial < 400; ++trial) {
      std::string bad = bytes;
      int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
      try {
        ParseParquet(bad, "fuzz");
      } catch (const DataError&) {
      }
    }
  }
  // A real AIC file (zstd, dictionary pages, optional columns) with random flips.
  const std::string aic =
      ReadFile(kReference + "/aic-parquet/h200_sxm/comm/trtllm/1.3.0rc20/custom_allreduce_perf.parquet");
  std::mt19937 rng(11);
  for (int trial = 0; trial < 1000; ++trial) {
    std::string bad = aic;
    bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
    try {
      ParseParquet(bad, "fuzz");
    } catch (const DataError&) {
    }
  }
  for (const char* hex : {kV2ZstdHex, kV1SnappyPlainHex, kV2UncompressedDictHex}) {
    const std::string bytes = Unhex(hex);
    for (std::size_t i = 4; i + 4 < bytes.size(); ++i) {
      std::string bad = bytes;
      bad[i] ^= 0x55;
      try {
        ParseParquet(bad, "fuzz");
      } catch (const DataError&) {
      }
    }
  }
}

// The slice reader and the footer-only listing on damaged grouped files: a
// DataError or an answer, never a crash; flips in the footer included.
TEST(ParquetSliceTest, CorruptGroupedFilesNeverCrashTheSliceReaders) {
  TempDir dir;
  ParquetWriteOptions options;
  options.group_by = {"dtype"};
  options.row_group_rows = 40;
  const std::string bytes = SerializeParquet(MixedTable(160), options);
  const std::size_t footer = FooterStart(bytes);
  std::mt19937 rng(13);
  int answered = 0;
  for (int trial = 0; trial < 600; ++trial) {
    std::string bad = bytes;
    // Half the trials hit the footer, where the statistics and offsets live.
    const std::size_t lo = trial % 2 ? footer : 0;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) bad[lo + rng() % (bad.size() - lo)] ^= static_cast<char>(1 + rng() % 255);
    if (trial % 50 == 0) bad.resize(rng() % bad.size());  // truncated
    try {
      ParseParquet(bad, "fuzz", RowSlice{"dtype", "fp8"});
      ++answered;
    } catch (const DataError&) {
    }
    WriteFileAtomic(dir.File("f.parquet"), bad);
    try {
      ParquetColumnValues(dir.File("f.parquet"), "dtype");
      ++answered;
    } catch (const DataError&) {
    }
  }
  EXPECT_GT(answered, 0);  // not every damaged file is refused: flips inside values read as values
}

// ------------------------------------------------------------------ thrift compact

// A struct with a field of every compact type, written by hand: the reader must
// skip each one and end exactly at the STOP byte.
TEST(ParquetThriftTest, SkipsEveryFieldTypeAndRefusesTruncation) {
  std::string b;
  b += "\x15\x0a";                                       // 1: i32 5
  b += std::string("\x17\0\0\0\0\0\0\xf0\x3f", 9);       // 2: double 1.0
  b += "\x11";                                           // 3: bool true
  b += "\x18\x02hi";                                     // 4: binary "hi"
  b += "\x19\x26\x02\x04";                               // 5: list<i64> {1, 2}
  b += "\x1a\x11\x01";                                   // 6: set<bool> {true}
  b += std::string("\x1b\x01\x8c\x01k\x14\x02\x00", 8);  // 7: map<binary, struct{1: i16 1}>
  b += "\x1d" + std::string(16, '\x07');                 // 8: uuid
  b += std::string("\x06\x50\x7e", 3);                   // 40 (long form): i64 63
  b += "\x13\xff";                                       // 41: byte -1
  b += std::string("\x0c\x52\x1c\x15\x02\x00\x00", 7);   // 41 (long form): struct{1: struct{1: i32 1}}
  b += std::string("\x00", 1);
  ThriftReader r(b);
  r.BeginStruct();
  std::vector<int> ids;
  std::int16_t id;
  ThriftType type;
  while (r.ReadField(id, type)) {
    ids.push_back(id);
    if (id == 1) {
      EXPECT_EQ(r.ReadI32(type), 5);
    } else if (id == 40) {
      EXPECT_EQ(r.ReadInt(type), 63);
    } else if (id == 41 && type == ThriftType::kByte) {
      EXPECT_EQ(r.ReadInt(type), -1);
    } else {
      r.Skip(type);
    }
  }
  r.EndStruct();
  EXPECT_EQ(ids, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 40, 41, 41}));
  EXPECT_EQ(r.position(), b.size());
  for (std::size_t keep = 0; keep < b.size(); ++keep) {
    ThriftReader t(std::string_view(b).substr(0, keep));
    EXPECT_THROW(t.Skip(ThriftType::kStruct), DataError) << keep;
  }
  // Deep nesting is an error, not a stack overflow.
  std::string deep(100000, '\x1c');
  ThriftReader d(deep);
  EXPECT_THROW(d.Skip(ThriftType::kStruct), DataError);
}

TEST(ParquetThriftTest, WriterRoundTripsThroughReader) {
  ThriftWriter w;
  w.BeginStruct();
  w.FieldI32(1, -7);
  w.FieldI64(20, std::numeric_limits<std::int64_t>::min());
  w.FieldBool(21, false);
  w.FieldList(22, ThriftType::kBinary, 20);
  for (int i = 0; i < 20; ++i) w.Binary(std::to_string(i));
  w.EndStruct();
  ThriftReader r(w.bytes());
  r.BeginStruct();
  std::int16_t id;
  ThriftType type;
  ASSERT_TRUE(r.ReadField(id, type));
  EXPECT_EQ(id, 1);
  EXPECT_EQ(r.ReadI32(type), -7);
  ASSERT_TRUE(r.ReadField(id, type));
  EXPECT_EQ(id, 20);
  EXPECT_EQ(r.ReadInt(type), std::numeric_limits<std::int64_t>::min());
  ASSERT_TRUE(r.ReadField(id, type));
  EXPECT_EQ(id, 21);
  EXPECT_FALSE(r.ReadBool(type));
  ASSERT_TRUE(r.ReadField(id, type));
  ThriftType et;
  std::uint32_t n;
  r.ReadListHeader(et, n);
  EXPECT_EQ(n, 20u);
  for (std::uint32_t i = 0; i < n; ++i) EXPECT_EQ(r.ReadBinary(), std::to_string(i));
  EXPECT_FALSE(r.ReadField(id, type));
  EXPECT_EQ(r.position(), w.bytes().size());
}

}  // namespace
}  // namespace servecast
