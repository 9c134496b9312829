#include "collect/table_spec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "../core/core_test_util.h"
#include "core/error.h"
#include "tables/cost_model.h"
#include "tables/table_spec.h"

namespace servecast::collect {
namespace {

using servecast::testing::HasText;
using servecast::testing::ThrownMessage;

const TableSpec& Spec(const std::string& name) {
  const TableSpec* s = FindTableSpec(name);
  if (!s) throw std::runtime_error("no table spec " + name);
  return *s;
}

std::vector<std::string> Names(const std::vector<ColumnSpec>& cols) {
  std::vector<std::string> out;
  for (const auto& c : cols) out.push_back(c.name);
  return out;
}

Params Attention(std::int64_t b, std::int64_t s, std::int64_t n, std::int64_t kv, std::int64_t h, std::int64_t w,
                 std::int64_t step = 0) {
  return Params{{"batch_size", b},
                {"isl", s},
                {"num_heads", n},
                {"num_key_value_heads", kv},
                {"head_dim", h},
                {"window_size", w},
                {"beam_width", std::int64_t{1}},
                {"attn_dtype", std::string("bfloat16")},
                {"kv_cache_dtype", std::string("bfloat16")},
                {"step", step}};
}

TEST(TableSpecTest, DtypeBytes) {
  EXPECT_EQ(DtypeBytes("float32"), 4);
  EXPECT_EQ(DtypeBytes("bfloat16"), 2);
  EXPECT_EQ(DtypeBytes("float16"), 2);
  EXPECT_EQ(DtypeBytes("fp8"), 1);
  EXPECT_EQ(DtypeBytes("fp8_block"), 1);
  EXPECT_EQ(DtypeBytes("int8"), 1);
  EXPECT_DOUBLE_EQ(DtypeBytes("nvfp4"), 0.5625);  // 4 bits + an 8-bit scale per 16 values
  std::string msg = ThrownMessage<Error>([] { DtypeBytes("bf16"); });
  EXPECT_TRUE(HasText(msg, "unknown dtype 'bf16'"));
  EXPECT_TRUE(HasText(msg, "bfloat16"));
}

TEST(TableSpecTest, GemmCostIsTwoMnkFlops) {
  const TableSpec& gemm = Spec("gemm_perf");
  Params p{
      {"gemm_dtype", std::string("bfloat16")}, {"m", std::int64_t{2}}, {"n", std::int64_t{3}}, {"k", std::int64_t{4}}};
  OpCost c = gemm.cost(p);
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 2 * 3 * 4);
  EXPECT_DOUBLE_EQ(c.bytes, (2 * 4 + 4 * 3) * 2.0 + 2 * 3 * 2.0);  // A + B in, C out, all bf16
  EXPECT_EQ(c.compute_dtype, "bfloat16");

  OpCost big = gemm.cost(Params{{"gemm_dtype", std::string("fp8")},
                                {"m", std::int64_t{8192}},
                                {"n", std::int64_t{8192}},
                                {"k", std::int64_t{8192}}});
  EXPECT_DOUBLE_EQ(big.flops, 2.0 * 8192.0 * 8192.0 * 8192.0);
  EXPECT_DOUBLE_EQ(big.bytes, 2.0 * 8192 * 8192 * 1 + 8192.0 * 8192 * 2);  // fp8 in, bf16 out
  EXPECT_EQ(big.compute_dtype, "fp8");

  OpCost f32 = gemm.cost(Params{
      {"gemm_dtype", std::string("float32")}, {"m", std::int64_t{1}}, {"n", std::int64_t{1}}, {"k", std::int64_t{1}}});
  EXPECT_DOUBLE_EQ(f32.bytes, 3 * 4.0);  // float32 writes float32
}

// A moe_perf row's floor: three projections (gate, up, down) unless the row's
// kernel_source says nongated (relu2 experts: up, down), as `check` passes it.
TEST(TableSpecTest, MoeFloorCountsTwoProjectionsForNongatedRows) {
  const TableSpec& moe = Spec("moe_perf");
  Params p{{"moe_dtype", std::string("bfloat16")}, {"num_tokens", std::int64_t{64}},
           {"hidden_size", std::int64_t{2688}},     {"inter_size", std::int64_t{1856}},
           {"topk", std::int64_t{6}},               {"num_experts", std::int64_t{128}},
           {"moe_tp_size", std::int64_t{1}},        {"moe_ep_size", std::int64_t{1}},
           {"distribution", std::string("power_law_1.2")}};
  const OpCost gated = moe.cost(p);
  EXPECT_DOUBLE_EQ(gated.flops, 2.0 * 64 * 6 * 2688 * 3 * 1856);
  p.Set("kernel_source", Value(std::string("servecast_moe:grouped_wgmma_bt8")));
  EXPECT_DOUBLE_EQ(moe.cost(p).flops, gated.flops);
  p.Set("kernel_source", Value(std::string("servecast_moe:grouped_wgmma_bt8,nongated")));
  const OpCost relu2 = moe.cost(p);
  EXPECT_DOUBLE_EQ(relu2.flops, gated.flops * 2 / 3);
  const double acts = 2.0 * 64 * 2688 * 2;  // the activations in and out
  EXPECT_DOUBLE_EQ(relu2.bytes - acts, (gated.bytes - acts) * 2 / 3);
}

TEST(TableSpecTest, ContextAttentionCountsCausalPairsWithoutWindow) {
  const TableSpec& ctx = Spec("context_attention_perf");
  // s = 4 queries attend to 1+2+3+4 = 10 keys in all.
  OpCost c = ctx.cost(Attention(1, 4, 2, 1, 8, 0));
  EXPECT_DOUBLE_EQ(c.flops, 4.0 * 1 * 2 * 8 * 10);
  // Q, O (n heads) and K, V (kv heads), all bf16: b*s*h*(2n*2 + 2kv*2).
  EXPECT_DOUBLE_EQ(c.bytes, 1.0 * 4 * 8 * (2 * 2 * 2 + 2 * 1 * 2));
  EXPECT_EQ(c.compute_dtype, "bfloat16");

  OpCost c16k = ctx.cost(Attention(1, 16384, 32, 8, 128, 0));
  EXPECT_DOUBLE_EQ(c16k.flops, 4.0 * 32 * 128 * (16384.0 * 16385.0 / 2));
}

TEST(TableSpecTest, ContextAttentionCountsCausalPairsWithWindow) {
  const TableSpec& ctx = Spec("context_attention_perf");
  // s = 4, window 2: keys per query min(i+1, 2) = 1, 2, 2, 2 -> 7.
  EXPECT_DOUBLE_EQ(ctx.cost(Attention(1, 4, 2, 1, 8, 2)).flops, 4.0 * 2 * 8 * 7);
  // s = 10, window 3: 1 + 2 + 3 + 7 * 3 = 27.
  EXPECT_DOUBLE_EQ(ctx.cost(Attention(1, 10, 1, 1, 1, 3)).flops, 4.0 * 27);
  // A window at least as long as the sequence is no window.
  EXPECT_DOUBLE_EQ(ctx.cost(Attention(1, 4, 2, 1, 8, 4)).flops, ctx.cost(Attention(1, 4, 2, 1, 8, 0)).flops);
  EXPECT_DOUBLE_EQ(ctx.cost(Attention(1, 4, 2, 1, 8, 100)).flops, ctx.cost(Attention(1, 4, 2, 1, 8, 0)).flops);
  // Batch scales linearly.
  EXPECT_DOUBLE_EQ(ctx.cost(Attention(3, 10, 1, 1, 1, 3)).flops, 3 * 4.0 * 27);
}

TEST(TableSpecTest, ZeroKvHeadsMeansMultiHeadAttention) {
  const TableSpec& ctx = Spec("context_attention_perf");
  EXPECT_DOUBLE_EQ(ctx.cost(Attention(1, 4, 2, 0, 8, 0)).bytes, ctx.cost(Attention(1, 4, 2, 2, 8, 0)).bytes);
}

TEST(TableSpecTest, GenerationAttentionReadsThePastKeysCappedByWindow) {
  const TableSpec& gen = Spec("generation_attention_perf");
  // isl 100 + step 28 = 128 keys.
  OpCost c = gen.cost(Attention(2, 100, 4, 2, 16, 0, 28));
  EXPECT_DOUBLE_EQ(c.flops, 4.0 * 2 * 4 * 16 * 128);
  // KV read: b * keys * 2 (K and V) * kv * h * 2 bytes; plus q and o.
  EXPECT_DOUBLE_EQ(c.bytes, 2.0 * 128 * 2 * 2 * 16 * 2 + 2.0 * 2 * 4 * 16 * 2);
  OpCost w = gen.cost(Attention(2, 100, 4, 2, 16, 32, 28));
  EXPECT_DOUBLE_EQ(w.flops, 4.0 * 2 * 4 * 16 * 32);
}

Params Mla(std::int64_t b, std::int64_t isl, std::int64_t n, std::int64_t step, const char* kv) {
  return Params{{"mla_dtype", std::string("bfloat16")},
                {"kv_cache_dtype", std::string(kv)},
                {"num_heads", n},
                {"batch_size", b},
                {"isl", isl},
                {"tp_size", 128 / n},
                {"step", step}};
}

TEST(TableSpecTest, ContextMlaCountsCausalPairsAndTheLatentWrite) {
  const TableSpec& ctx = Spec("context_mla_perf");
  // b 2, s 4 (10 causal pairs), 16 heads: 2 * 2 * 16 * (192 + 128) * 10 FLOPs.
  OpCost c = ctx.cost(Mla(2, 4, 16, 0, "fp8"));
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 2 * 16 * 320 * 10);
  // q, k (192), v, out (128) at 2 B per head and token, plus 576 latent bytes per token in fp8.
  EXPECT_DOUBLE_EQ(c.bytes, 2.0 * 4 * 16 * (2 * 192 + 2 * 128) * 2 + 2.0 * 4 * 576);
  EXPECT_EQ(c.compute_dtype, "bfloat16");
}

TEST(TableSpecTest, GenerationMlaReadsTheLatentCacheOnce) {
  const TableSpec& gen = Spec("generation_mla_perf");
  // isl 1 + step 127 = 128 keys shared by all 8 heads of a request.
  OpCost c = gen.cost(Mla(3, 1, 8, 127, "bfloat16"));
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 3 * 8 * (576 + 512) * 128);
  EXPECT_DOUBLE_EQ(c.bytes, 3.0 * 128 * 576 * 2 + 3.0 * 8 * (576 + 512) * 2);
  EXPECT_EQ(c.compute_dtype, "bfloat16");
  EXPECT_EQ(gen.cost(Mla(3, 1, 8, 127, "fp8")).compute_dtype, "fp8");
}

TEST(TableSpecTest, MlaBmmCostsPerOpNameAndUnknownOpThrows) {
  const TableSpec& bmm = Spec("mla_bmm_perf");
  Params pre{{"op_name", std::string("mla_gen_pre")},
             {"bmm_dtype", std::string("fp8")},
             {"num_tokens", std::int64_t{10}},
             {"num_heads", std::int64_t{4}}};
  OpCost c = bmm.cost(pre);
  EXPECT_DOUBLE_EQ(c.flops, 2.0 * 10 * 4 * 128 * 512);
  EXPECT_DOUBLE_EQ(c.bytes, 4.0 * (128 * 512 + 10 * 128 + 10 * 512 * 2));
  Params post = pre;
  post.Set("op_name", std::string("mla_gen_post"));
  EXPECT_DOUBLE_EQ(bmm.cost(post).bytes, 4.0 * (512 * 128 + 10 * 512 + 10 * 128 * 2));
  Params bad = pre;
  bad.Set("op_name", std::string("mla_gen_mid"));
  EXPECT_TRUE(HasText(ThrownMessage<Error>([&] { bmm.cost(bad); }), "mla_gen_pre or mla_gen_post"));
}

TEST(TableSpecTest, ElementwiseCostsPerOpAndUnknownOpThrows) {
  const TableSpec& ew = Spec("elementwise_perf");
  auto cost = [&](const std::string& op) {
    return ew.cost(Params{{"op_name", op},
                          {"dtype", std::string("bfloat16")},
                          {"num_tokens", std::int64_t{10}},
                          {"hidden_size", std::int64_t{100}}});
  };
  EXPECT_DOUBLE_EQ(cost("rmsnorm").bytes, (2.0 * 10 * 100 + 100) * 2);
  EXPECT_DOUBLE_EQ(cost("silu_and_mul").bytes, 3.0 * 10 * 100 * 2);
  EXPECT_DOUBLE_EQ(cost("embedding").flops, 0);
  std::string msg = ThrownMessage<Error>([&] { cost("softmax"); });
  EXPECT_TRUE(HasText(msg, "no cost model for op_name 'softmax'"));
}

TEST(TableSpecTest, AllColumnsArePrefixThenKeysThenMetrics) {
  const TableSpec& gemm = Spec("gemm_perf");
  const std::vector<std::string> want = {
      "framework", "version", "device",           "op_name",         "kernel_source", "gemm_dtype", "m",
      "n",         "k",       "latency",          "latency_p10",     "latency_p90",   "samples",    "rsd",
      "timing",    "l2",      "clock_mhz_before", "clock_mhz_after", "throttled"};
  EXPECT_EQ(Names(gemm.AllColumns(false)), want);
  std::vector<std::string> with_power = want;
  with_power.push_back("power");
  with_power.push_back("power_limit");
  EXPECT_EQ(Names(gemm.AllColumns(true)), with_power);

  for (const auto& spec : AllTableSpecs()) {
    auto cols = spec.AllColumns(false);
    ASSERT_EQ(cols.size(),
              PrefixColumns().size() + spec.key_columns.size() + MetricColumns().size() + spec.extra_columns.size())
        << spec.name;
    for (std::size_t i = 0; i < PrefixColumns().size(); ++i) EXPECT_EQ(cols[i], PrefixColumns()[i]);
    for (std::size_t i = 0; i < spec.key_columns.size(); ++i)
      EXPECT_EQ(cols[PrefixColumns().size() + i], spec.key_columns[i]) << spec.name;
    EXPECT_EQ(cols[PrefixColumns().size() + spec.key_columns.size()].name, "latency") << spec.name;
    for (std::size_t i = 0; i < spec.extra_columns.size(); ++i)
      EXPECT_EQ(cols[cols.size() - spec.extra_columns.size() + i], spec.extra_columns[i]) << spec.name;
  }
}

TEST(TableSpecTest, ColumnTypes) {
  auto cols = Spec("gemm_perf").AllColumns(true);
  auto type_of = [&](const std::string& name) {
    for (const auto& c : cols)
      if (c.name == name) return c.type;
    throw std::runtime_error("no column " + name);
  };
  EXPECT_EQ(type_of("framework"), ValueType::kString);
  EXPECT_EQ(type_of("gemm_dtype"), ValueType::kString);
  EXPECT_EQ(type_of("m"), ValueType::kInt64);
  EXPECT_EQ(type_of("latency"), ValueType::kDouble);
  EXPECT_EQ(type_of("samples"), ValueType::kInt64);
  EXPECT_EQ(type_of("throttled"), ValueType::kInt64);
  EXPECT_EQ(type_of("power"), ValueType::kDouble);
}

TEST(TableSpecTest, IdentityColumnsAreOpNameAndKeys) {
  EXPECT_EQ(Spec("gemm_perf").IdentityColumns(), (std::vector<std::string>{"op_name", "gemm_dtype", "m", "n", "k"}));
}

TEST(TableSpecTest, KnownTablesAndFamilies) {
  EXPECT_EQ(Spec("gemm_perf").family, "gemm");
  EXPECT_EQ(Spec("context_attention_perf").family, "attention");
  EXPECT_EQ(Spec("generation_attention_perf").family, "attention");
  EXPECT_EQ(Spec("elementwise_perf").family, "elementwise");
  EXPECT_EQ(FindTableSpec("no_such_perf"), nullptr);
  for (const auto& spec : AllTableSpecs()) EXPECT_TRUE(static_cast<bool>(spec.cost)) << spec.name;
}

}  // namespace
}  // namespace servecast::collect

namespace servecast::tables {
namespace {

// An estimator read (the generic declared-table path, perfdb/declared.h) is
// checked when the table is declared.
TEST(TableSpecTest, EstimatorReadIsCheckedWhenDeclared) {
  auto spec = [](const std::string& name, EstimatorRead read) {
    TableSpec t;
    t.name = name;
    t.family = "toy";
    t.key_columns = {{"dtype", ValueType::kString}, {"n", ValueType::kInt64}, {"m", ValueType::kInt64}};
    t.cost = [](const Params& k) { return OpCost{0, k.Num("n"), "float32"}; };
    t.estimator = std::move(read);
    return t;
  };
  using A = TableAxis;
  const auto refused = [&](const std::string& name, EstimatorRead read) {
    return servecast::testing::ThrownMessage<Error>([&] { AddTableSpec(spec(name, std::move(read))); });
  };
  EXPECT_TRUE(
      servecast::testing::HasText(refused("read_unread_perf", {{"dtype"}, {A{"n"}}}), "leaves key column 'm' unread"));
  EXPECT_TRUE(servecast::testing::HasText(refused("read_string_axis_perf", {{"n", "m"}, {A{"dtype"}}}),
                                          "axis 'dtype' is a string column"));
  EXPECT_TRUE(servecast::testing::HasText(
      refused("read_two_sqrt_perf", {{"dtype"}, {A{"n", AxisBlend::kSqrt}, A{"m", AxisBlend::kSqrt}}}),
      "more than one axis in sqrt space"));
  EXPECT_TRUE(servecast::testing::HasText(
      refused("read_fallback_perf", {{"dtype"}, {A{"n"}, A{"m"}}, {}, std::pair<std::string, std::string>{"n", "1"}}),
      "not a slice key"));
  EXPECT_TRUE(servecast::testing::HasText(refused("read_unknown_perf", {{"dtype", "k"}, {A{"n"}, A{"m"}}}),
                                          "declares no key column 'k'"));
  EXPECT_EQ(FindTableSpec("read_unread_perf"), nullptr);  // a refused declaration is not added
  AddTableSpec(spec("read_ok_perf", {{"dtype"}, {A{"n", AxisBlend::kSqrt, AxisSource::kBatch}, A{"m"}}}));
  const TableSpec& ok = GetTableSpec("read_ok_perf");
  EXPECT_EQ(ok.Read().axes[0].from, AxisSource::kBatch);
  EXPECT_DOUBLE_EQ(ok.Roofline({{"dtype", std::string("float32")}, {"n", std::int64_t{7}}}).bytes, 7);  // the cost
  EXPECT_THROW(GetTableSpec("gemm_perf").Read(), Error);  // a hand-written reader: no estimator read
  // mla_bmm_perf is read by the generic path: the estimator's roofline is the BMM's.
  const TableSpec& bmm = GetTableSpec("mla_bmm_perf");
  EXPECT_EQ(bmm.Read().slice_keys, (std::vector<std::string>{"op_name", "bmm_dtype", "num_heads"}));
  const Params key{{"op_name", std::string("mla_gen_pre")},
                   {"bmm_dtype", std::string("fp8")},
                   {"num_tokens", std::int64_t{10}},
                   {"num_heads", std::int64_t{4}}};
  EXPECT_DOUBLE_EQ(bmm.Roofline(key).bytes, MlaBmmRoofline("fp8", 10, 4).bytes);
  EXPECT_DOUBLE_EQ(bmm.Roofline(key).flops, MlaBmmRoofline("fp8", 10, 4).flops);
  std::vector<std::string> generic;
  for (const TableSpec* s : EstimatorTables()) generic.push_back(s->name);
  EXPECT_NE(std::find(generic.begin(), generic.end(), "mla_bmm_perf"), generic.end());
  EXPECT_EQ(std::find(generic.begin(), generic.end(), "gemm_perf"), generic.end());
}

}  // namespace
}  // namespace servecast::tables
