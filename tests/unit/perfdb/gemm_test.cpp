#include "perfdb/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "core/error.h"
#include "perfdb/perf_database.h"
#include "perfdb/sol.h"
#include "system/system_spec.h"
#include "shared_data.h"

namespace servecast::perfdb {
namespace {

// A system whose GEMM SOL is hand-computable: bf16 math at 2e12 FLOP/s and a
// memory so fast it never binds, so SOL(m, n, k) = 2mnk / 2e12 s = m*n*k*1e-9 ms.
// fp8 math runs twice as fast.
Sol TestSol(bool with_fp8 = true) {
  systems::SystemSpec spec;
  spec.name = "gemm_test";
  spec.kind = "gpu";
  spec.gpu.mem_bw_bytes_per_s = 1e18;
  spec.gpu.peak_flops_per_s["bfloat16"] = 2e12;
  if (with_fp8) spec.gpu.peak_flops_per_s["fp8"] = 4e12;
  return Sol(spec);
}
double S(double m, double n, double k) {
  return m * n * k * 1e-9;
}

// A site whose util (SOL / latency) is `util` at every m of `ms`.
GemmSite ConstUtilSite(std::int64_t n, std::int64_t k, double util, std::vector<std::int64_t> ms) {
  GemmSite s{n, k, {}, {}};
  for (auto m : ms) {
    s.m.push_back(m);
    s.latency_ms.push_back(S(m, n, k) / util);
  }
  return s;
}

// One site (n = k = 1000, so SOL = m * 1e-3 ms), rows out of m order:
//   m     100   200    400  800
//   lat   0.2   0.3    0.5  1.6
//   util  0.5   2/3    0.8  0.5
GemmSlice CurveSlice() {
  GemmSite s{1000, 1000, {400, 100, 800, 200}, {0.5, 0.2, 1.6, 0.3}};
  return GemmSlice("bfloat16", {s}, TestSol());
}

TEST(GemmSliceTest, ExactHitIsTheMeasuredRow) {
  GemmSlice slice = CurveSlice();
  GemmResult r = slice.Query(200, 1000, 1000);
  EXPECT_DOUBLE_EQ(r.latency_ms, 0.3);
  EXPECT_EQ(r.source, GemmSource::kSilicon);
  EXPECT_DOUBLE_EQ(r.sol_ms, 0.2);
  EXPECT_DOUBLE_EQ(r.sol_fraction, 0.2 / 0.3);
  EXPECT_STREQ(EstimateSourceName(r.source), "silicon");
}

TEST(GemmSliceTest, RawLerpInM) {
  GemmSlice slice = CurveSlice();
  // m = 300 between 200 (0.3) and 400 (0.5): 0.3 + 0.2 * 100/200 = 0.4.
  GemmResult r = slice.Query(300, 1000, 1000);
  EXPECT_NEAR(r.latency_ms, 0.4, 1e-15);
  EXPECT_EQ(r.source, GemmSource::kInterpolated);
  EXPECT_NEAR(r.sol_fraction, 0.3 / 0.4, 1e-15);
  // m = 700 between 400 (0.5) and 800 (1.6): 0.5 + 1.1 * 300/400 = 1.325.
  EXPECT_NEAR(slice.Query(700, 1000, 1000).latency_ms, 1.325, 1e-14);
}

TEST(GemmSliceTest, HoldAboveUsesMedianOfThreeBoundaryUtils) {
  GemmSlice slice = CurveSlice();
  // Top three utils {2/3, 0.8, 0.5} -> median 2/3; SOL(1600) = 1.6 -> 2.4 ms
  // (holding the last point alone would give 3.2).
  GemmResult r = slice.Query(1600, 1000, 1000);
  EXPECT_NEAR(r.latency_ms, 2.4, 1e-12);
  EXPECT_EQ(r.source, GemmSource::kExtrapolated);
  EXPECT_NEAR(r.sol_fraction, 2.0 / 3.0, 1e-12);
}

TEST(GemmSliceTest, HoldBelowUsesMedianOfThreeBoundaryUtils) {
  GemmSlice slice = CurveSlice();
  // Bottom three utils {0.5, 2/3, 0.8} -> median 2/3; SOL(50) = 0.05 -> 0.075 ms.
  GemmResult r = slice.Query(50, 1000, 1000);
  EXPECT_NEAR(r.latency_ms, 0.075, 1e-15);
  EXPECT_EQ(r.source, GemmSource::kExtrapolated);
}

TEST(GemmSliceTest, ShortCurveHoldsMedianOfWhatItHas) {
  // Two points: utils 0.5 and 0.25 -> median 0.375.
  GemmSite s{1000, 1000, {100, 200}, {0.2, 0.8}};
  GemmSlice slice("bfloat16", {s}, TestSol());
  EXPECT_NEAR(slice.Query(400, 1000, 1000).latency_ms, 0.4 / 0.375, 1e-12);
}

// Sites for the unknown-site tests, in this enumeration order (u = util):
//   A (2048,1024) u .5   B (1024,4096) u .8   C (512,512) u .6   D (2048,2048) u .7
//   E (4096,4096) u .4   F (256,1024)  u .9   G (1024,2048) u .1, curve m in [128, 256] only
GemmSlice ScatterSlice() {
  std::vector<std::int64_t> ms = {16, 256};
  return GemmSlice(
      "bfloat16",
      {ConstUtilSite(2048, 1024, 0.5, ms), ConstUtilSite(1024, 4096, 0.8, ms), ConstUtilSite(512, 512, 0.6, ms),
       ConstUtilSite(2048, 2048, 0.7, ms), ConstUtilSite(4096, 4096, 0.4, ms), ConstUtilSite(256, 1024, 0.9, ms),
       ConstUtilSite(1024, 2048, 0.1, {128, 256})},
      TestSol());
}

TEST(GemmSliceTest, UnknownSiteBlendsFourNearestByIdw) {
  GemmSlice slice = ScatterSlice();
  // Query (m=64, n=1024, k=1024). G does not span m=64, so it is no candidate.
  // Distances (octaves): A 1, C sqrt2, D sqrt2, B 2, F 2 (tie with B: B is
  // enumerated first), E sqrt8 (beyond the gate). Four nearest: A, C, D, B with
  // weights 1, 1/2, 1/2, 1/4: util = (.5 + .3 + .35 + .2) / 2.25 = 0.6.
  GemmResult r = slice.Query(64, 1024, 1024);
  double sol = S(64, 1024, 1024);  // 0.067108864 ms
  EXPECT_NEAR(r.latency_ms, sol / 0.6, 1e-12);
  EXPECT_NEAR(r.latency_ms, 0.1118481066666667, 1e-12);
  EXPECT_NEAR(r.sol_fraction, 0.6, 1e-12);
  EXPECT_EQ(r.source, GemmSource::kInterpolated);
}

TEST(GemmSliceTest, UnknownSiteUsesNeighbourHolds) {
  GemmSlice slice = ScatterSlice();
  // m = 1024: no curve spans it, so every site is a candidate and each
  // neighbour answers from its own hold. G (1024,2048) is now nearest (d = 1,
  // like A): A, G tie at 1 (A first), then C, D at sqrt2.
  // util = (.5 + .1 + .5*.6 + .5*.7) / 3 = 1.25 / 3.
  GemmResult r = slice.Query(1024, 1024, 1024);
  EXPECT_NEAR(r.latency_ms, S(1024, 1024, 1024) / (1.25 / 3.0), 1e-12);
  EXPECT_EQ(r.source, GemmSource::kExtrapolated);
}

TEST(GemmSliceTest, BeyondTheGateIsATypedMiss) {
  GemmSlice slice = ScatterSlice();
  // (16, 16) is below every site on both axes: nearest is C (512,512) at
  // sqrt(50) = 7.07 octaves.
  GemmLookup l = slice.Resolve(64, 16, 16);
  ASSERT_FALSE(l.ok);
  EXPECT_EQ(l.miss.slice, "bfloat16");
  ASSERT_EQ(l.miss.nearest.size(), 4u);
  EXPECT_EQ(l.miss.nearest[0].n, 512);
  EXPECT_EQ(l.miss.nearest[0].k, 512);
  EXPECT_NEAR(l.miss.nearest[0].distance, std::sqrt(50.0), 1e-12);
  try {
    slice.Query(64, 16, 16);
    FAIL() << "expected GemmMissError";
  } catch (const GemmMissError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'bfloat16'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(n=16, k=16)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("(n=512, k=512"), std::string::npos) << msg;
  }
  // Above the sites on both axes: no waiver either.
  EXPECT_FALSE(slice.Resolve(64, 32768, 32768).ok);
  // Just inside the gate: (n=8192, k=4096) is 1 octave from E.
  EXPECT_TRUE(slice.Resolve(64, 8192, 4096).ok);
}

TEST(GemmSliceTest, FrontierWaiverAboveOnOneAxis) {
  GemmSlice slice = ScatterSlice();
  // (n=32768, k=1024): 2^15 is above every site's n (max 2^12), k = 2^10 is
  // inside [2^9, 2^12]. Nothing within 2 octaves -> waiver; every candidate has
  // k residual <= 2. Nearest four by full distance: E sqrt13, A 4, D sqrt17,
  // B sqrt29 (C sqrt37 and F 7 drop out).
  double w_e = 1 / 13.0, w_a = 1 / 16.0, w_d = 1 / 17.0, w_b = 1 / 29.0;
  double util = (w_e * .4 + w_a * .5 + w_d * .7 + w_b * .8) / (w_e + w_a + w_d + w_b);
  EXPECT_NEAR(util, 0.561948, 1e-6);
  GemmResult r = slice.Query(64, 32768, 1024);
  EXPECT_NEAR(r.latency_ms, S(64, 32768, 1024) / util, 1e-12);
  EXPECT_NEAR(r.latency_ms, 3.821496, 1e-5);
  EXPECT_EQ(r.source, GemmSource::kExtrapolated);
  // Below on the other axis (k = 2^6 < 2^9) -> no waiver.
  EXPECT_FALSE(slice.Resolve(64, 32768, 64).ok);
}

TEST(GemmSliceTest, WaiverKeepsOnlySitesWithinTheGateOnTheOtherAxis) {
  // Sites at k = 2^10 and k = 2^14; query k = 2^13 above all n: only the
  // k = 2^14 site (residual 1) qualifies; the k = 2^10 one (residual 3) does not.
  std::vector<std::int64_t> ms = {16, 256};
  GemmSlice slice("bfloat16", {ConstUtilSite(1024, 1024, 0.9, ms), ConstUtilSite(1024, 16384, 0.3, ms)}, TestSol());
  GemmResult r = slice.Query(64, 65536, 8192);
  EXPECT_NEAR(r.sol_fraction, 0.3, 1e-12);
}

TEST(GemmSliceTest, CacheReturnsTheResolvedValue) {
  GemmSlice slice = ScatterSlice();
  for (int i = 0; i < 3; ++i) {
    GemmResult r = slice.Query(64, 1024, 1024);
    EXPECT_NEAR(r.latency_ms, slice.Resolve(64, 1024, 1024).result.latency_ms, 0);
  }
  EXPECT_THROW(slice.Query(0, 1024, 1024), Error);
}

// Power follows latency: the row's own at an exact m, lerped in m, the median
// of the held boundary points beyond the sweep, the IDW-weighted mean at an
// unknown site (the weights of the util blend); absent when any point it would
// come from has none (NaN: a merged source without the column).
TEST(GemmSliceTest, PowerFollowsLatency) {
  GemmSite a{1000, 1000, {100, 200, 400, 800}, {0.2, 0.3, 0.5, 1.6}, {100, 200, 300, 500}};
  GemmSite b{1000, 4000, {100, 200}, {0.8, 1.0}, {400, 600}};
  GemmSite c{2000, 1000, {100, 200}, {0.4, 0.6}, {std::nan(""), 250}};  // no power at m = 100
  GemmSlice slice("bfloat16", {a, b, c}, TestSol());
  EXPECT_DOUBLE_EQ(*slice.Query(200, 1000, 1000).power_w, 200);
  EXPECT_DOUBLE_EQ(*slice.Query(300, 1000, 1000).power_w, 250);   // lerp
  EXPECT_DOUBLE_EQ(*slice.Query(1600, 1000, 1000).power_w, 300);  // hold above: median of 200, 300, 500
  EXPECT_DOUBLE_EQ(*slice.Query(50, 1000, 1000).power_w, 200);    // hold below: median of 100, 200, 300
  // Unknown site (1000, 2000) at m = 200: a and b at d = 1, c at sqrt2
  // (weights 1, 1, 1/2): (200 + 600 + 125) / 2.5.
  const GemmResult idw = slice.Query(200, 1000, 2000);
  EXPECT_EQ(idw.source, GemmSource::kInterpolated);
  EXPECT_NEAR(*idw.power_w, 925.0 / 2.5, 1e-9);
  // At m = 100 neighbour c has no power: neither has the blend.
  EXPECT_FALSE(slice.Query(100, 1000, 2000).power_w.has_value());
  EXPECT_FALSE(slice.Query(100, 2000, 1000).power_w.has_value());
  EXPECT_FALSE(slice.Query(150, 2000, 1000).power_w.has_value());
  EXPECT_DOUBLE_EQ(*slice.Query(200, 2000, 1000).power_w, 250);
}

TEST(GemmSliceTest, NoPowerColumnNoPower) {
  GemmSlice slice = CurveSlice();
  EXPECT_FALSE(slice.Query(200, 1000, 1000).power_w.has_value());
  EXPECT_FALSE(slice.Query(300, 1000, 1000).power_w.has_value());
  EXPECT_FALSE(slice.Query(1600, 1000, 1000).power_w.has_value());
}

Table GemmTable(const std::vector<std::tuple<std::string, int, int, int, double>>& rows) {
  Table t({{"gemm_dtype", ValueType::kString},
           {"m", ValueType::kInt64},
           {"n", ValueType::kInt64},
           {"k", ValueType::kInt64},
           {"latency", ValueType::kDouble}});
  for (const auto& [d, m, n, k, l] : rows) t.AppendRow({d, std::int64_t{m}, std::int64_t{n}, std::int64_t{k}, l});
  return t;
}

TEST(GemmPerfTest, SlicesPerDtypeAndFp8StaticReadsFp8) {
  Table t = GemmTable({{"bfloat16", 100, 1000, 1000, 0.2},
                       {"fp8", 100, 1000, 1000, 0.1},
                       {"fp8", 200, 1000, 1000, 0.15},
                       {"bfloat16", 200, 1000, 1000, 0.3}});
  GemmPerf perf(t, TestSol());
  EXPECT_EQ(perf.gemm_dtypes(), (std::vector<std::string>{"bfloat16", "fp8"}));
  EXPECT_DOUBLE_EQ(perf.Query("bfloat16", 200, 1000, 1000).latency_ms, 0.3);
  EXPECT_DOUBLE_EQ(perf.Query("fp8", 200, 1000, 1000).latency_ms, 0.15);
  GemmResult s = perf.Query("fp8_static", 150, 1000, 1000);
  EXPECT_NEAR(s.latency_ms, 0.125, 1e-15);
  EXPECT_NEAR(s.sol_ms, 150 * 1e-3 / 2, 1e-15);  // fp8 runs at 4e12
  try {
    perf.Query("nvfp4", 1, 1000, 1000);
    FAIL();
  } catch (const MissingDataError& e) {
    EXPECT_NE(std::string(e.what()).find("present: bfloat16, fp8"), std::string::npos) << e.what();
  }
}

// The lazy GemmPerf answers exactly as the eager one, builds only the slices
// asked for, once even under concurrent first queries, and keeps a slice's load
// error (raised on every call, not re-read).
TEST(GemmPerfTest, LazySlicesAnswerAsTheEagerOneAndLoadOnFirstUse) {
  Table t = GemmTable({{"bfloat16", 100, 1000, 1000, 0.2},
                       {"fp8", 100, 1000, 1000, 0.1},
                       {"fp8", 200, 1000, 1000, 0.15},
                       {"bfloat16", 200, 1000, 1000, 0.3},
                       {"bfloat16", 100, 2000, 1000, 0.35}});
  GemmPerf eager(t, TestSol());
  std::map<std::string, Table> parts;
  for (const auto& d : eager.gemm_dtypes()) {
    std::vector<std::size_t> rows;
    for (std::size_t r = 0; r < t.num_rows(); ++r)
      if (t.GetString(r, 0) == d) rows.push_back(r);
    parts[d] = t.Select(rows);
  }
  std::mutex mu;
  std::vector<std::string> loads;
  GemmPerf lazy({"bfloat16", "fp8", "int8"}, [&](const std::string& d) -> const Table& {
    {
      std::lock_guard<std::mutex> lock(mu);
      loads.push_back(d);
    }
    if (d == "int8") throw DataError("int8 rows unreadable");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // widen the race
    return parts.at(d);
  }, TestSol());
  EXPECT_EQ(lazy.gemm_dtypes(), (std::vector<std::string>{"bfloat16", "fp8", "int8"}));
  EXPECT_TRUE(loads.empty());
  std::vector<std::thread> threads;
  std::vector<double> got(8);
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] { got[i] = lazy.Query("bfloat16", 150, 1000, 1000).latency_ms; });
  for (auto& t : threads) t.join();
  for (double g : got) EXPECT_EQ(g, eager.Query("bfloat16", 150, 1000, 1000).latency_ms);
  for (std::int64_t m : {1, 100, 150, 200, 4000})
    for (std::int64_t n : {1000, 1500, 2000}) {
      const GemmResult a = eager.Query("bfloat16", m, n, 1000), b = lazy.Query("bfloat16", m, n, 1000);
      EXPECT_EQ(a.latency_ms, b.latency_ms) << m << " " << n;
      EXPECT_EQ(a.source, b.source);
    }
  EXPECT_EQ(loads, std::vector<std::string>{"bfloat16"});  // built once, fp8 untouched
  EXPECT_EQ(lazy.Query("fp8_static", 150, 1000, 1000).latency_ms, eager.Query("fp8", 150, 1000, 1000).latency_ms);
  EXPECT_THROW(lazy.Query("int8", 150, 1000, 1000), DataError);
  EXPECT_THROW(lazy.Query("int8", 150, 1000, 1000), DataError);
  EXPECT_EQ(loads, (std::vector<std::string>{"bfloat16", "fp8", "int8"}));  // the error kept, not re-read
  EXPECT_THROW(lazy.Query("nvfp4", 1, 1000, 1000), MissingDataError);
}

TEST(GemmPerfTest, ReadsTheOptionalPowerColumn) {
  Table t({{"gemm_dtype", ValueType::kString},
           {"m", ValueType::kInt64},
           {"n", ValueType::kInt64},
           {"k", ValueType::kInt64},
           {"latency", ValueType::kDouble},
           {"power", ValueType::kDouble}});
  t.AppendRow({std::string("bfloat16"), std::int64_t{100}, std::int64_t{1000}, std::int64_t{1000}, 0.2, 300.0});
  t.AppendRow({std::string("bfloat16"), std::int64_t{200}, std::int64_t{1000}, std::int64_t{1000}, 0.3, std::nan("")});
  GemmPerf perf(t, TestSol());
  EXPECT_DOUBLE_EQ(*perf.Query("bfloat16", 100, 1000, 1000).power_w, 300);
  EXPECT_FALSE(perf.Query("bfloat16", 200, 1000, 1000).power_w.has_value());
  EXPECT_FALSE(GemmPerf(GemmTable({{"bfloat16", 100, 1000, 1000, 0.2}}), TestSol())
                   .Query("bfloat16", 100, 1000, 1000)
                   .power_w.has_value());
}

TEST(GemmPerfTest, SliceWhoseQuantTheSystemCannotRateFailsWhenAsked) {
  Table t = GemmTable({{"bfloat16", 100, 1000, 1000, 0.2}, {"fp8", 100, 1000, 1000, 0.1}});
  GemmPerf perf(t, TestSol(/*with_fp8=*/false));
  EXPECT_DOUBLE_EQ(perf.Query("bfloat16", 100, 1000, 1000).latency_ms, 0.2);
  EXPECT_THROW(perf.Query("fp8", 100, 1000, 1000), MissingSystemFlopsError);
}

TEST(GemmPerfTest, LoadTimeClampRaisesRowsBelowSol) {
  // bf16 (n = k = 1000): SOL = m * 1e-3 ms. The m = 100 row (0.05) beats physics (0.1).
  Table t = GemmTable({{"bfloat16", 100, 1000, 1000, 0.05}, {"bfloat16", 200, 1000, 1000, 0.3}});
  GemmPerf clamped(t, TestSol());
  GemmResult r = clamped.Query("bfloat16", 100, 1000, 1000);
  EXPECT_DOUBLE_EQ(r.latency_ms, 0.1);
  EXPECT_EQ(r.source, GemmSource::kSilicon);
  EXPECT_DOUBLE_EQ(r.sol_fraction, 1.0);
  EXPECT_DOUBLE_EQ(clamped.Query("bfloat16", 200, 1000, 1000).latency_ms, 0.3);  // above SOL: untouched
  EXPECT_DOUBLE_EQ(clamped.Query("bfloat16", 150, 1000, 1000).latency_ms, 0.2);  // lerp of the clamped leaves
  GemmPerf verbatim(t, TestSol(), "gemm_perf", {}, GemmLoadClamp::kNone);
  EXPECT_DOUBLE_EQ(verbatim.Query("bfloat16", 100, 1000, 1000).latency_ms, 0.05);
  EXPECT_DOUBLE_EQ(verbatim.Query("bfloat16", 150, 1000, 1000).latency_ms, 0.175);
}

TEST(GemmPerfTest, LoadTimeClampSkipsQuantsTheSystemCannotRate) {
  std::vector<GemmSite> sites = {GemmSite{1000, 1000, {100, 0}, {0.01, 0.0}}};
  EXPECT_EQ(ClampGemmSitesToSol("fp8", sites, TestSol(/*with_fp8=*/false)), 0u);
  EXPECT_EQ(sites[0].latency_ms, (std::vector<double>{0.01, 0.0}));
  // A rated quant raises the positive leaf only (0 and m < 1 rows stay to be dropped).
  EXPECT_EQ(ClampGemmSitesToSol("fp8", sites, TestSol()), 1u);
  EXPECT_DOUBLE_EQ(sites[0].latency_ms[0], 0.05);
  EXPECT_EQ(sites[0].latency_ms[1], 0.0);
}

// ---- Leave-one-out accuracy on AIC's H200 trtllm 1.3.0rc20 gemm_perf ----

struct Ape {
  std::vector<double> v;
  void Add(double est, double truth) { v.push_back(std::abs(est - truth) / truth); }
  double Pct(double q) {
    std::sort(v.begin(), v.end());
    return 100 * v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
  }
};

class GemmLooTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string root = SERVECAST_SHARED_DIR "/reference/aic-parquet";
    if (!std::filesystem::exists(root)) return;
    auto db = PerfDatabase::Open({root}, "h200_sxm", "trtllm", "1.3.0rc20");
    sites_ = new auto(GemmSitesFromTable(db.Table("gemm_perf").table));
    sol_ = new Sol(systems::LoadSystemByName(SERVECAST_SOURCE_DIR "/systems", "h200_sxm"));
  }
  static void TearDownTestSuite() {
    delete sites_;
    delete sol_;
    sites_ = nullptr;
    sol_ = nullptr;
  }
  void SetUp() override {
    SERVECAST_NEED_SHARED(sites_ != nullptr, "../shared/reference/aic-parquet not found");
  }
  static std::vector<std::pair<std::string, std::vector<GemmSite>>>* sites_;
  static Sol* sol_;
};
std::vector<std::pair<std::string, std::vector<GemmSite>>>* GemmLooTest::sites_ = nullptr;
Sol* GemmLooTest::sol_ = nullptr;

TEST_F(GemmLooTest, InteriorPointHoldout) {
  // Every interior (m) point of every site, strided to ~3000 samples.
  std::size_t total = 0;
  for (const auto& [dt, sites] : *sites_)
    for (const auto& s : sites) total += s.m.size() > 2 ? s.m.size() - 2 : 0;
  std::size_t stride = std::max<std::size_t>(1, total / 3000), idx = 0;
  Ape all;
  for (const auto& [dt, sites] : *sites_) {
    Ape per;
    for (const auto& s0 : sites) {
      // Sorted copy of the curve.
      GemmSlice sorted(dt, {s0}, *sol_);
      const GemmSite& s = sorted.sites()[0];
      for (std::size_t j = 1; j + 1 < s.m.size(); ++j, ++idx) {
        if (idx % stride) continue;
        GemmSite held = s;
        held.m.erase(held.m.begin() + static_cast<std::ptrdiff_t>(j));
        held.latency_ms.erase(held.latency_ms.begin() + static_cast<std::ptrdiff_t>(j));
        GemmSlice one(dt, {held}, *sol_);
        GemmResult r = one.Resolve(s.m[j], s.n, s.k).result;
        per.Add(r.latency_ms, s.latency_ms[j]);
        all.Add(r.latency_ms, s.latency_ms[j]);
      }
    }
    std::printf("[gemm LOO interior] %-10s n=%zu median %.2f%% p90 %.2f%%\n", dt.c_str(), per.v.size(), per.Pct(0.5),
                per.Pct(0.9));
  }
  double med = all.Pct(0.5), p90 = all.Pct(0.9);
  std::printf("[gemm LOO interior] all        n=%zu median %.2f%% p90 %.2f%% (AIC: 4.87%%, p90 15.6%%)\n", all.v.size(),
              med, p90);
  EXPECT_GT(all.v.size(), 2000u);
  EXPECT_LT(med, 10.0);
  EXPECT_LT(p90, 40.0);
}

TEST_F(GemmLooTest, WholeSiteHoldout) {
  Ape all;
  std::size_t misses = 0;
  for (const auto& [dt, sites] : *sites_) {
    Ape per;
    std::size_t stride = std::max<std::size_t>(1, sites.size() / 20);
    for (std::size_t h = 0; h < sites.size(); h += stride) {
      std::vector<GemmSite> rest;
      rest.reserve(sites.size() - 1);
      for (std::size_t i = 0; i < sites.size(); ++i)
        if (i != h) rest.push_back(sites[i]);
      GemmSlice slice(dt, std::move(rest), *sol_);
      const GemmSite& s = sites[h];
      for (std::size_t j = 0; j < s.m.size(); ++j) {
        GemmLookup l = slice.Resolve(s.m[j], s.n, s.k);
        if (!l.ok) {
          ++misses;
          continue;
        }
        per.Add(l.result.latency_ms, s.latency_ms[j]);
        all.Add(l.result.latency_ms, s.latency_ms[j]);
      }
    }
    std::printf("[gemm LOO site] %-10s n=%zu median %.2f%% p90 %.2f%%\n", dt.c_str(), per.v.size(), per.Pct(0.5),
                per.Pct(0.9));
  }
  double med = all.Pct(0.5), p90 = all.Pct(0.9);
  std::printf("[gemm LOO site] all        n=%zu misses %zu median %.2f%% p90 %.2f%% (AIC: 3.63%%)\n", all.v.size(),
              misses, med, p90);
  EXPECT_GT(all.v.size(), 2000u);
  EXPECT_LT(med, 15.0);
}

}  // namespace
}  // namespace servecast::perfdb
