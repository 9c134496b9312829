#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/table.h"
#include "process.h"

namespace servecast::testing {

inline const std::string kBin = SERVECAST_BIN;
inline const std::string kTestBin = SERVECAST_TEST_BIN;
inline const std::string kSource = SERVECAST_SOURCE_DIR;
inline const std::string kCases = kSource + "/cases";
inline const std::string kSystems = kSource + "/systems";

// argv for `servecast collect` with the repo's cases and systems.
inline std::vector<std::string> CollectArgs(const std::string& bin, std::vector<std::string> extra,
                                            const std::string& cases = kCases) {
  std::vector<std::string> a = {bin, "collect", "--backend", "cpu", "--cases", cases, "--systems", kSystems};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

inline std::string Describe(const ProcessResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out + "\n--- stderr\n" + r.err;
}

// Every *.csv table under `root`, by file name.
inline std::vector<std::string> FindTables(const std::string& root) {
  std::vector<std::string> out;
  if (!std::filesystem::exists(root)) return out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root))
    if (e.is_regular_file() && e.path().extension() == ".csv") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Identity of each row: everything up to the latency column (prefix + keys).
inline std::multiset<std::string> RowKeys(const std::string& csv) {
  Table t = Table::ReadCsv(csv);
  std::size_t lat = t.ColumnIndex("latency");
  std::multiset<std::string> keys;
  for (std::size_t r = 0; r < t.num_rows(); ++r) {
    std::string k;
    for (std::size_t c = 0; c < lat; ++c)
      if (t.columns()[c].name != "kernel_source") k += ToString(t.Get(r, c)) + "|";
    keys.insert(k);
  }
  return keys;
}

inline nlohmann::json ReadJson(const std::string& path) { return nlohmann::json::parse(ReadText(path)); }

}  // namespace servecast::testing
