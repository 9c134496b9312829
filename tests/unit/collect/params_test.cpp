#include "collect/params.h"

#include <gtest/gtest.h>

#include <string>

#include "../core/core_test_util.h"
#include "core/error.h"

namespace servecast::collect {
namespace {

using servecast::testing::HasText;
using servecast::testing::ThrownMessage;

TEST(ParamsTest, KeepsInsertionOrderAndSetReplacesInPlace) {
  Params p{{"m", std::int64_t{1}}, {"dtype", std::string("bf16")}, {"x", 0.5}};
  p.Set("dtype", std::string("fp8"));
  p.Set("k", std::int64_t{64});
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p.items()[0].first, "m");
  EXPECT_EQ(p.items()[1].first, "dtype");
  EXPECT_EQ(p.items()[1].second, Value(std::string("fp8")));
  EXPECT_EQ(p.items()[3].first, "k");
}

TEST(ParamsTest, DuplicateNamesInTheInitializerKeepTheFirstPositionAndLastValue) {
  Params p{{"a", std::int64_t{1}}, {"b", std::int64_t{2}}, {"a", std::int64_t{3}}};
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p.items()[0].first, "a");
  EXPECT_EQ(p.Int("a"), 3);
}

TEST(ParamsTest, CanonicalTextInOrder) {
  Params p{{"gemm_dtype", std::string("bfloat16")}, {"m", std::int64_t{16}}, {"scale", 0.1}, {"n", 1e-05}};
  EXPECT_EQ(p.Canonical(), "gemm_dtype=bfloat16,m=16,scale=0.1,n=1e-05");
  EXPECT_EQ(Params{}.Canonical(), "");
  EXPECT_TRUE(Params{}.empty());
}

TEST(ParamsTest, TypedGetters) {
  Params p{{"m", std::int64_t{16}}, {"r", 2.5}, {"s", std::string("x")}};
  EXPECT_EQ(p.Int("m"), 16);
  EXPECT_DOUBLE_EQ(p.Num("m"), 16.0);
  EXPECT_DOUBLE_EQ(p.Num("r"), 2.5);
  EXPECT_EQ(p.Str("s"), "x");
  EXPECT_TRUE(p.Has("r"));
  EXPECT_FALSE(p.Has("q"));
  EXPECT_EQ(p.Find("q"), nullptr);
  ASSERT_NE(p.Find("m"), nullptr);
  EXPECT_EQ(*p.Find("m"), Value(std::int64_t{16}));
}

TEST(ParamsTest, GetterErrorsNameTheParameter) {
  Params p{{"m", std::int64_t{16}}, {"r", 2.5}, {"s", std::string("x")}};
  EXPECT_TRUE(HasText(ThrownMessage<Error>([&] { p.Get("k"); }), "missing parameter 'k' (have: m, r, s)"));
  EXPECT_TRUE(HasText(ThrownMessage<Error>([&] { p.Int("r"); }), "parameter 'r' is double '2.5'; expected an integer"));
  EXPECT_TRUE(HasText(ThrownMessage<Error>([&] { p.Int("s"); }), "parameter 's' is string 'x'; expected an integer"));
  EXPECT_TRUE(HasText(ThrownMessage<Error>([&] { p.Num("s"); }), "parameter 's' is the string 'x'; expected a number"));
  EXPECT_TRUE(HasText(ThrownMessage<Error>([&] { p.Str("m"); }), "parameter 'm' is int64 '16'; expected a string"));
}

TEST(ParamsTest, EqualityIsOrderAndTypeSensitive) {
  Params a{{"m", std::int64_t{1}}, {"n", std::int64_t{2}}};
  Params b{{"n", std::int64_t{2}}, {"m", std::int64_t{1}}};
  Params c{{"m", 1.0}, {"n", std::int64_t{2}}};
  EXPECT_EQ(a, (Params{{"m", std::int64_t{1}}, {"n", std::int64_t{2}}}));
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
}

}  // namespace
}  // namespace servecast::collect
