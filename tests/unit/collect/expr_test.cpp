#include "collect/expr.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "../core/core_test_util.h"
#include "core/error.h"

namespace servecast::collect {
namespace {

using servecast::testing::HasText;
using servecast::testing::ThrownMessage;

const Params kCase{{"gemm_dtype", std::string("bfloat16")},
                   {"m", std::int64_t{16}},
                   {"n", std::int64_t{4096}},
                   {"k", std::int64_t{128}},
                   {"scale", 0.5},
                   {"empty", std::string("")},
                   {"zero", std::int64_t{0}}};

Value Eval(const std::string& text, const Params& p = kCase) {
  return Expr::Parse(text).Evaluate(p);
}
bool Holds(const std::string& text, const Params& p = kCase) {
  return Expr::Parse(text).Test(p);
}
std::int64_t I(std::int64_t v) {
  return v;
}

TEST(ExprTest, ArithmeticPrecedenceAndAssociativity) {
  EXPECT_EQ(Eval("1 + 2 * 3"), Value(I(7)));
  EXPECT_EQ(Eval("(1 + 2) * 3"), Value(I(9)));
  EXPECT_EQ(Eval("10 - 4 - 3"), Value(I(3)));  // left to right
  EXPECT_EQ(Eval("2 * 3 % 4"), Value(I(2)));   // (2 * 3) % 4
  EXPECT_EQ(Eval("2 + 3 % 2"), Value(I(3)));
  EXPECT_EQ(Eval("-2 * 3"), Value(I(-6)));
  EXPECT_EQ(Eval("- -4"), Value(I(4)));
  EXPECT_EQ(Eval("m * n - k"), Value(I(16 * 4096 - 128)));
  EXPECT_EQ(Eval("((m))"), Value(I(16)));
}

TEST(ExprTest, ComparisonBindsLooserThanArithmeticAndTighterThanLogic) {
  EXPECT_TRUE(Holds("m * n < 2147483648"));
  EXPECT_TRUE(Holds("m + 1 == 17"));
  EXPECT_TRUE(Holds("m < 17 && n > 4095"));
  EXPECT_TRUE(Holds("1 || 0 && 0"));  // && before ||
  EXPECT_FALSE(Holds("(1 || 0) && 0"));
  EXPECT_TRUE(Holds("!0 + 1 == 2"));  // unary before binary
  EXPECT_FALSE(Holds("!(m == 16)"));
}

TEST(ExprTest, ComparisonOperators) {
  EXPECT_TRUE(Holds("2 <= 2"));
  EXPECT_FALSE(Holds("2 < 2"));
  EXPECT_TRUE(Holds("2 >= 2"));
  EXPECT_FALSE(Holds("2 > 2"));
  EXPECT_TRUE(Holds("2 != 3"));
  EXPECT_FALSE(Holds("2 == 3"));
  EXPECT_TRUE(Holds("1 == 1.0"));  // numbers compare by value across int and double
  EXPECT_TRUE(Holds("scale < 1"));
  EXPECT_EQ(Eval("3 > 2"), Value(I(1)));
  EXPECT_EQ(Eval("3 < 2"), Value(I(0)));
}

TEST(ExprTest, WordOperators) {
  EXPECT_TRUE(Holds("m > 1 and n > 1"));
  EXPECT_FALSE(Holds("m > 100 and n > 1"));
  EXPECT_TRUE(Holds("m > 100 or n > 1"));
  EXPECT_TRUE(Holds("not zero"));
  EXPECT_FALSE(Holds("not (m == 16)"));
  EXPECT_TRUE(Holds("m == 16 and not (k > 128) or zero"));
}

TEST(ExprTest, WordOperatorsAreWholeWordsOnly) {
  Params p{{"order", std::int64_t{3}},
           {"android", std::int64_t{1}},
           {"nothing", std::int64_t{0}},
           {"notes", std::int64_t{5}}};
  EXPECT_TRUE(Holds("order == 3", p));
  EXPECT_TRUE(Holds("android", p));
  EXPECT_FALSE(Holds("nothing", p));
  EXPECT_TRUE(Holds("notes > 4 and order < 4", p));
  EXPECT_EQ(Expr::Parse("order + android + nothing").Identifiers(),
            (std::vector<std::string>{"android", "nothing", "order"}));
}

TEST(ExprTest, IntegerArithmeticStaysExact) {
  // 2^53 + 1 is not representable as a double.
  Params big{{"a", std::int64_t{9007199254740993}}, {"b", std::int64_t{9007199254740992}}};
  EXPECT_EQ(Eval("a - b", big), Value(I(1)));
  EXPECT_EQ(Eval("a + 0", big), Value(I(9007199254740993)));
  EXPECT_EQ(Eval("a % 10", big), Value(I(3)));
  EXPECT_EQ(Eval("3037000499 * 3037000499"), Value(I(9223372030926249001)));
  EXPECT_EQ(TypeOf(Eval("m * n")), ValueType::kInt64);
  EXPECT_EQ(Eval("7 % 3"), Value(I(1)));
  EXPECT_EQ(Eval("-7 % 3"), Value(I(-1)));
}

TEST(ExprTest, DivisionAndDecimalsAreDouble) {
  EXPECT_EQ(Eval("7 / 2"), Value(3.5));
  EXPECT_EQ(Eval("8 / 2"), Value(4.0));
  EXPECT_EQ(Eval("scale * 3"), Value(1.5));
  EXPECT_EQ(Eval("1.5 + 1"), Value(2.5));
  EXPECT_EQ(Eval("-scale"), Value(-0.5));
  EXPECT_EQ(Eval("5.5 % 2"), Value(1.5));
}

TEST(ExprTest, NumberLiterals) {
  EXPECT_EQ(Eval("2e9"), Value(I(2000000000)));  // integral exponent form stays an integer
  EXPECT_EQ(Eval("1.5e3"), Value(I(1500)));
  EXPECT_EQ(Eval("2.5e-1"), Value(0.25));
  EXPECT_EQ(Eval(".5"), Value(0.5));
  EXPECT_TRUE(Holds("m * n * k < 2e10"));
}

TEST(ExprTest, StringsInEitherQuotes) {
  EXPECT_TRUE(Holds("gemm_dtype == \"bfloat16\""));
  EXPECT_TRUE(Holds("gemm_dtype == 'bfloat16'"));
  EXPECT_TRUE(Holds("gemm_dtype != 'fp8'"));
  EXPECT_TRUE(Holds("gemm_dtype == \"bfloat16\" && (n < 128 || k < 256)"));
  EXPECT_EQ(Eval("'a b, c'"), Value(std::string("a b, c")));
  EXPECT_EQ(Eval("\"it's\""), Value(std::string("it's")));
}

TEST(ExprTest, StringsCompareAsText) {
  EXPECT_TRUE(Holds("'abc' < 'abd'"));
  EXPECT_TRUE(Holds("'b' > 'abc'"));
  EXPECT_TRUE(Holds("gemm_dtype >= 'bfloat16'"));
  EXPECT_TRUE(Holds("gemm_dtype <= 'c'"));
  EXPECT_FALSE(Holds("'fp8' < 'bfloat16'"));
}

TEST(ExprTest, StringAgainstNumber) {
  EXPECT_FALSE(Holds("gemm_dtype == 16"));
  EXPECT_TRUE(Holds("gemm_dtype != 16"));
  std::string msg = ThrownMessage<Error>([] { Holds("gemm_dtype < 16"); });
  EXPECT_TRUE(HasText(msg, "cannot order 'bfloat16' against '16'"));
  msg = ThrownMessage<Error>([] { Eval("gemm_dtype + 1"); });
  EXPECT_TRUE(HasText(msg, "'+' needs numbers"));
}

TEST(ExprTest, Truthiness) {
  EXPECT_TRUE(Holds("gemm_dtype"));  // non-empty string
  EXPECT_FALSE(Holds("empty"));
  EXPECT_FALSE(Holds("zero"));
  EXPECT_TRUE(Holds("scale"));
  EXPECT_FALSE(Holds("scale - 0.5"));
  EXPECT_TRUE(Holds("!empty"));
}

TEST(ExprTest, ModuloByZeroIsAnError) {
  EXPECT_TRUE(HasText(ThrownMessage<Error>([] { Eval("m % zero"); }), "modulo by zero (16 % 0)"));
  EXPECT_TRUE(HasText(ThrownMessage<Error>([] { Eval("5.5 % 0"); }), "modulo by zero"));  // not fmod's nan
  EXPECT_TRUE(HasText(ThrownMessage<Error>([] { Eval("m % 0.0"); }), "modulo by zero"));
}

TEST(ExprTest, DivisionByZeroIsAnErrorLikeModulo) {
  // Not inf or nan, integer or decimal operands alike.
  for (const char* text : {"m / zero", "1 / 0", "1.5 / 0", "m / 0.0", "scale / (m - 16)", "0 / 0"}) {
    std::string msg = ThrownMessage<Error>([&] { Eval(text); });
    EXPECT_TRUE(HasText(msg, "division by zero")) << text << ": " << msg;
    EXPECT_TRUE(HasText(msg, std::string("expression '") + text + "'")) << msg;
  }
  EXPECT_TRUE(HasText(ThrownMessage<Error>([] { Eval("n / zero"); }), "division by zero (4096 / 0)"));
  EXPECT_EQ(Eval("0 / m"), Value(0.0));
  EXPECT_EQ(Eval("m / 0.5"), Value(32.0));
}

TEST(ExprTest, IntegerOverflowIsAnErrorNotAWrap) {
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  const std::int64_t min = std::numeric_limits<std::int64_t>::min();
  Params p{{"max", max}, {"min", min}, {"big", std::int64_t{3037000500}}, {"minus_one", std::int64_t{-1}}};
  struct Bad {
    const char* text;
    const char* what;
  };
  const Bad bad[] = {
      {"max + 1", "integer overflow in 9223372036854775807 + 1"},
      {"min - 1", "integer overflow in -9223372036854775808 - 1"},
      {"1 - min", "integer overflow in 1 - -9223372036854775808"},
      {"big * big", "integer overflow in 3037000500 * 3037000500"},
      {"min * minus_one", "integer overflow in -9223372036854775808 * -1"},
      {"-min", "integer overflow in -(-9223372036854775808)"},
      {"9223372036854775807 + 9223372036854775807 > 0", "integer overflow"},
  };
  for (const auto& b : bad) {
    std::string msg = ThrownMessage<Error>([&] { Eval(b.text, p); });
    EXPECT_TRUE(HasText(msg, b.what)) << b.text << ": " << msg;
    EXPECT_TRUE(HasText(msg, "int64 holds -9223372036854775808 to 9223372036854775807")) << msg;
  }
  std::string msg = ThrownMessage<Error>([] { Eval("m * n * k * m * n * k * m * n * k > 0"); });
  EXPECT_TRUE(HasText(msg, "integer overflow in 4611686018427387904 * 128")) << msg;  // (16 * 4096 * 128)^3 is 2^69
  // At the edges, exact.
  EXPECT_EQ(Eval("max + 0", p), Value(max));
  EXPECT_EQ(Eval("max - 1 + 1", p), Value(max));
  EXPECT_EQ(Eval("min + 1 - 1", p), Value(min));
  EXPECT_EQ(Eval("-max - 1", p), Value(min));
  EXPECT_EQ(Eval("3037000499 * -3037000499"), Value(I(-9223372030926249001)));
  EXPECT_EQ(Eval("min % minus_one", p), Value(I(0)));  // the hardware traps on it; the remainder is 0
  EXPECT_EQ(Eval("min % 10", p), Value(I(-8)));
  EXPECT_EQ(Eval("9223372036854775807"), Value(max));
  // With a non-integral operand the arithmetic is double, as before (an integral
  // literal such as 2.0 or 2e9 is an integer).
  EXPECT_EQ(Eval("max * 2.5", p), Value(2.5 * static_cast<double>(max)));
  EXPECT_TRUE(HasText(ThrownMessage<Error>([&] { Eval("max * 2.0", p); }), "integer overflow"));
}

TEST(ExprTest, IntegerLiteralOutsideInt64IsRefusedAtParseTime) {
  for (const char* text : {"99999999999999999999", "m < 9223372036854775808", "-99999999999999999999 < m"}) {
    std::string msg = ThrownMessage<Error>([&] { Expr::Parse(text); });
    EXPECT_TRUE(HasText(msg, "does not fit in int64 (at most 9223372036854775807)")) << text << ": " << msg;
    EXPECT_TRUE(HasText(msg, "at column")) << msg;
  }
  EXPECT_TRUE(HasText(ThrownMessage<Error>([] { Expr::Parse("m < 1e400"); }), "number '1e400' is out of the range"));
  EXPECT_EQ(Eval("1e20"), Value(1e20));  // the decimal form the message suggests
}

std::string Repeat(const std::string& piece, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += piece;
  return out;
}

TEST(ExprTest, NestingIsLimitedWithTheLimitNamed) {
  const std::string limit = "nested deeper than " + std::to_string(kExprMaxDepth) + " levels";
  // 10,000 parentheses crashed the parser (stack overflow); a chain of 100,000
  // operators parsed, and then Eval and the tree's destructor recursed as deep.
  const std::string deep[] = {
      Repeat("(", 10000) + "1" + Repeat(")", 10000),
      Repeat("-", 10000) + "1",
      Repeat("!", 10000) + "m",
      Repeat("not ", 10000) + "m",
      "1" + Repeat(" + 1", 100000),
      "m" + Repeat(" * 1", 100000) + " > 0",
      Repeat("m < 1 || ", 100000) + "m > 1",
      "1" + Repeat(" + (1", 10000) + Repeat(")", 10000),
  };
  for (const auto& text : deep) {
    std::string msg = ThrownMessage<Error>([&] { Expr::Parse(text); });
    EXPECT_TRUE(HasText(msg, limit)) << msg.substr(0, 300);
    EXPECT_TRUE(HasText(msg, "at column")) << msg.substr(0, 300);
    // The message quotes the start of the text and its length, not all of it.
    EXPECT_TRUE(HasText(msg, "(" + std::to_string(text.size()) + " characters)")) << msg.substr(0, 300);
    EXPECT_LT(msg.size(), 600u) << msg.substr(0, 300);
  }
  // Up to the limit, it parses and evaluates.
  const int n = kExprMaxDepth;
  EXPECT_EQ(Eval(Repeat("(", n) + "m" + Repeat(")", n)), Value(I(16)));
  EXPECT_EQ(Eval(Repeat("-", n) + "m"), Value(I(16)));  // an even count
  EXPECT_EQ(Eval("0" + Repeat(" + 1", n)), Value(I(n)));
  EXPECT_EQ(Eval(Repeat("(", 100) + Repeat("-", 100) + "m" + Repeat(" * 1", 150) + Repeat(")", 100)), Value(I(16)));
  // Parentheses and unary operators nest together: 200 of each is 400 levels.
  EXPECT_TRUE(HasText(
      ThrownMessage<Error>([&] { Expr::Parse(Repeat("(", 200) + Repeat("-", 200) + "m" + Repeat(")", 200)); }), limit));
  EXPECT_TRUE(
      HasText(ThrownMessage<Error>([&] { Expr::Parse(Repeat("(", n + 1) + "m" + Repeat(")", n + 1)); }), limit));
  EXPECT_TRUE(HasText(ThrownMessage<Error>([&] { Expr::Parse("0" + Repeat(" + 1", n + 1)); }), limit));
  EXPECT_TRUE(HasText(ThrownMessage<Error>([&] { Expr::Parse(Repeat("-", n + 1) + "m"); }), limit));
}

TEST(ExprTest, UnknownIdentifierErrorNamesItAndWhatTheCaseHas) {
  Params p{{"m", std::int64_t{1}}, {"n", std::int64_t{2}}};
  std::string msg = ThrownMessage<Error>([&] { Holds("m * num_tokens > 4", p); });
  EXPECT_TRUE(HasText(msg, "unknown parameter 'num_tokens'"));
  EXPECT_TRUE(HasText(msg, "(the case has: m, n)"));
  EXPECT_TRUE(HasText(msg, "'m * num_tokens > 4'"));
}

TEST(ExprTest, ParseErrorsNameTheColumn) {
  struct Bad {
    const char* text;
    const char* what;
    int column;
  };
  const Bad bad[] = {
      {"m * * n", "unexpected '*'", 5},
      {"(m + 1", "missing ')'", 7},
      {"m == 'abc", "unterminated string", 6},
      {"m 1", "unexpected '1'", 3},
      {"", "unexpected end", 1},
      {"m <", "unexpected end", 4},
      {"1.2.3 > m", "bad number '1.2.3'", 6},
      {"m == 16)", "unexpected ')'", 8},
      {"m # 2", "unexpected '#'", 3},
  };
  for (const auto& b : bad) {
    std::string msg = ThrownMessage<Error>([&] { Expr::Parse(b.text); });
    EXPECT_TRUE(HasText(msg, std::string("expression '") + b.text + "'")) << b.text;
    EXPECT_TRUE(HasText(msg, b.what)) << b.text;
    EXPECT_TRUE(HasText(msg, "at column " + std::to_string(b.column))) << b.text;
  }
}

TEST(ExprTest, TextAndIdentifiers) {
  Expr e = Expr::Parse("batch_size * isl <= 65536 and num_heads != num_key_value_heads or batch_size > 1");
  EXPECT_EQ(e.text(), "batch_size * isl <= 65536 and num_heads != num_key_value_heads or batch_size > 1");
  EXPECT_EQ(e.Identifiers(), (std::vector<std::string>{"batch_size", "isl", "num_heads", "num_key_value_heads"}));
  EXPECT_TRUE(Expr::Parse("1 + 2 == 3").Identifiers().empty());
  EXPECT_TRUE(Expr::Parse("'m' == 'n'").Identifiers().empty());
}

TEST(ExprTest, ParsedExpressionIsReusableAcrossCases) {
  Expr e = Expr::Parse("m * n < 2147483648");
  EXPECT_TRUE(e.Test(Params{{"m", std::int64_t{46340}}, {"n", std::int64_t{46340}}}));
  EXPECT_FALSE(e.Test(Params{{"m", std::int64_t{46341}}, {"n", std::int64_t{46341}}}));
  Expr copy = e;
  EXPECT_TRUE(copy.Test(Params{{"m", std::int64_t{1}}, {"n", std::int64_t{1}}}));
}

}  // namespace
}  // namespace servecast::collect
