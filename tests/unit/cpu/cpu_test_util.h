#pragma once

// Shared by the CPU backend's tests: the detected runtime, a small timing budget,
// and running one case of an op.

#include <gtest/gtest.h>

#include <string>

#include "backends/cpu/cpu_backend.h"
#include "collect/case.h"
#include "collect/op.h"

namespace servecast::cpu::testing {

inline const collect::RuntimeInfo& Runtime() {
  static const collect::RuntimeInfo rt = CpuBackend().DetectRuntime();
  return rt;
}

inline collect::RunContext SmallContext() {
  collect::RunContext ctx;
  ctx.device = 0;
  ctx.runtime = &Runtime();
  ctx.timing.warmup_runs = 1;
  ctx.timing.min_samples = 3;
  ctx.timing.max_samples = 50;
  ctx.timing.target_rsd = 0.05;
  ctx.timing.budget_s = 0.02;
  ctx.timing.min_sample_s = 1e-4;
  return ctx;
}

inline collect::Case MakeCase(const std::string& op, const collect::Params& params) {
  collect::Case c;
  c.op = op;
  c.params = params;
  c.id = collect::MakeCaseId(op, params);
  c.owner = "tests/unit/cpu";
  return c;
}

inline collect::CaseResult RunCase(collect::Op& op, const collect::Params& params) {
  return op.Run(MakeCase(op.name(), params), SmallContext());
}

// Describes a result for assertion messages.
inline std::string Describe(const collect::CaseResult& r) {
  return std::string(collect::ToString(r.disposition)) + "/" + std::string(collect::ToString(r.failure_class)) + " " +
         r.error_type + ": " + r.message;
}

// The one row of a passed case: the common prefix, the key columns copied from
// the case, sane timing columns, all in the table's column order.
inline void ExpectPassedRow(const collect::CaseResult& r, const collect::Op& op, const collect::Params& params,
                            const std::string& kernel_source) {
  ASSERT_EQ(r.disposition, collect::Disposition::kPassed) << Describe(r);
  ASSERT_EQ(r.rows.size(), 1u);
  const collect::Params& row = r.rows[0];
  EXPECT_EQ(row.Str("framework"), "cpu");
  EXPECT_EQ(row.Str("version"), Runtime().version);
  EXPECT_EQ(row.Str("device"), Runtime().device_name);
  EXPECT_EQ(row.Str("op_name"), op.name());
  EXPECT_EQ(row.Str("kernel_source"), kernel_source);
  for (const auto& col : op.table().key_columns) EXPECT_EQ(row.Get(col.name), params.Get(col.name)) << col.name;
  EXPECT_GT(row.Num("latency"), 0);
  EXPECT_LE(row.Num("latency_p10"), row.Num("latency"));
  EXPECT_LE(row.Num("latency"), row.Num("latency_p90"));
  EXPECT_GE(row.Int("samples"), 1);
  EXPECT_EQ(row.Str("timing"), "cpu");
  EXPECT_EQ(row.Str("l2"), "warm");
  std::vector<std::string> want, got;
  for (const auto& col : op.table().AllColumns(false)) want.push_back(col.name);
  for (const auto& [name, value] : row.items()) got.push_back(name);
  EXPECT_EQ(got, want);
}

}  // namespace servecast::cpu::testing
