// `servecast check` on the committed H200 collective tables: they pass the gates,
// and `--against` AIC's NCCL table matches rows per collective (op_name is part of
// the key: all_reduce and all_gather rows share every other key column).

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "e2e_common.h"
#include "shared_data.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;

const std::string kComm = kSource + "/systems/data/h200_sxm/comm/cuda/13.0-cublaslt13.1-cudnn9.14-nccl2.28";

TEST(CheckCommE2E, H200CollectivesPassAndCompareAgainstAicPerOp) {
  // The tables are committed in this repository: their absence is a failure, not a skip.
  ASSERT_TRUE(fs::exists(kComm + "/nccl_perf.parquet")) << "no H200 collective tables at " << kComm;
  const std::string aic = kSource + "/../shared/reference/aic-h200/nccl_2.29.2.csv";
  std::vector<std::string> argv = {kBin, "check", kComm, "--systems", kSystems, "--json"};
  const bool with_aic = fs::exists(aic);
  if (with_aic) argv.insert(argv.end(), {"--against", aic});
  const ProcessResult r = RunProcess(argv, 300);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  const nlohmann::json* nccl = nullptr;
  for (const auto& t : doc["tables"])
    if (t.value("table", "") == "nccl_perf") nccl = &t;
  ASSERT_NE(nccl, nullptr) << r.out;
  EXPECT_EQ((*nccl)["rows"].get<int>(), 210);
  SERVECAST_NEED_SHARED(with_aic, "no AIC reference table at " + aic);
  const auto& a = (*nccl)["against"];
  EXPECT_EQ(a["key_columns"][0], "op_name") << a.dump();
  // 2 GPUs x 4 collectives AIC also has x 2 dtypes x 21 sizes; our send_recv is ours only.
  EXPECT_EQ(a["shared_keys"].get<int>(), 168) << a.dump();
  EXPECT_EQ(a["only_ours"].get<int>(), 42) << a.dump();
}

}  // namespace
}  // namespace servecast::testing
