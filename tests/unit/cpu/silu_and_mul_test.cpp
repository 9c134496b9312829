#include "backends/cpu/silu_and_mul.h"

#include <gtest/gtest.h>

#include <cmath>

#include "cpu_test_util.h"

namespace servecast::cpu {
namespace {

using collect::Disposition;
using testing::Describe;

TEST(SiluAndMulTest, KnownValues) {
  // Two tokens, hidden 2: [gate0 gate1 up0 up1].
  const float in[8] = {0, 2, 5, 3, -20, 20, 1, 0.5f};
  float out[4];
  SiluAndMul(in, out, 2, 2);
  EXPECT_EQ(out[0], 0.0f);                                  // silu(0) = 0
  EXPECT_NEAR(out[1], 2 / (1 + std::exp(-2.0)) * 3, 1e-6);  // silu(2)·3
  EXPECT_NEAR(out[2], -20 / (1 + std::exp(20.0)), 1e-12);   // the negative tail goes to 0
  EXPECT_NEAR(out[3], 20 * 0.5, 1e-5);                      // the positive tail is the identity
}

collect::Params SiluParams(std::int64_t tokens, std::int64_t hidden, std::string dtype = "float32") {
  return {{"op_name", std::string("silu_and_mul")}, {"dtype", dtype}, {"num_tokens", tokens}, {"hidden_size", hidden}};
}

TEST(SiluAndMulOpTest, PassesAndEmitsARow) {
  auto op = MakeSiluAndMulOp();
  for (const collect::Params& p : {SiluParams(1, 1), SiluParams(7, 333), SiluParams(70, 4000)}) {
    collect::CaseResult r = testing::RunCase(*op, p);
    testing::ExpectPassedRow(r, *op, p, "servecast_cpu_silu_and_mul");
  }
}

TEST(SiluAndMulOpTest, OtherDtypesAreNotSupported) {
  auto op = MakeSiluAndMulOp();
  collect::CaseResult r = testing::RunCase(*op, SiluParams(4, 64, "float16"));
  EXPECT_EQ(r.disposition, Disposition::kNotSupported) << Describe(r);
  collect::Params missing{{"dtype", std::string("float32")}, {"num_tokens", std::int64_t{4}}};
  collect::CaseResult m = testing::RunCase(*op, missing);
  EXPECT_EQ(m.disposition, Disposition::kFailed) << Describe(m);
  EXPECT_NE(m.message.find("hidden_size"), std::string::npos) << m.message;
}

TEST(SiluAndMulOpTest, MemoryBytes) {
  auto op = MakeSiluAndMulOp();
  EXPECT_EQ(op->MemoryBytes(SiluParams(10, 100)), 4.0 * 3 * 10 * 100);
}

}  // namespace
}  // namespace servecast::cpu
