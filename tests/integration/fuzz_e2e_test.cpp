// A bounded, seeded fuzz run of the readers of user input (issue 28): valid files
// mutated (byte and bit flips, truncation, repeated, dropped and swapped lines,
// huge, negative, zero and non-finite numbers) and fed to the real binary. Each
// input must end in an exit code of 0 (accepted), 1, 2 (refused) or 3, within a
// time limit, and without an "internal error": never a signal, never a hang. The seeds are fixed, so a failure
// reproduces; the failing input is kept and named in the message.
// SERVECAST_FUZZ_SCALE=<k> runs k times as many inputs (default 1: about 2,900 in
// all, well under a minute on two cores with ctest -j2).
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/fs.h"
#include "e2e_common.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t Next() {
    std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::size_t Below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(Next() % n); }

 private:
  std::uint64_t s_;
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t a = 0;
  while (a < text.size()) {
    std::size_t b = text.find('\n', a);
    if (b == std::string::npos) b = text.size();
    out.push_back(text.substr(a, b - a));
    a = b + 1;
  }
  return out;
}

std::string Join(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

// A number-like token of `text` replaced by an extreme value.
std::string ReplaceNumber(const std::string& text, Rng& rng) {
  static const char* kValues[] = {"nan",   "-nan", "inf",  "-inf", "1e308", "-1e308", "1e-320", "0",  "-0",
                                  "-1",    "-1024", "1024.7", "99999999999999999999999", "9223372036854775807",
                                  "-9223372036854775808", "18446744073709551616", "1e+23", "0x10", ".nan", "1e99999"};
  std::vector<std::size_t> starts;
  for (std::size_t i = 0; i < text.size(); ++i)
    if (std::isdigit(static_cast<unsigned char>(text[i])) && (i == 0 || !std::isalnum(static_cast<unsigned char>(text[i - 1]))))
      starts.push_back(i);
  if (starts.empty()) return text;
  const std::size_t a = starts[rng.Below(starts.size())];
  std::size_t b = a;
  while (b < text.size() && (std::isalnum(static_cast<unsigned char>(text[b])) || text[b] == '.' || text[b] == '-' ||
                             text[b] == '+'))
    ++b;
  return text.substr(0, a) + kValues[rng.Below(std::size(kValues))] + text.substr(b);
}

// One to three mutations of `text`.
std::string Mutate(const std::string& text, Rng& rng) {
  std::string s = text;
  const std::size_t n = 1 + rng.Below(3);
  for (std::size_t i = 0; i < n; ++i) {
    switch (rng.Below(9)) {
      case 0:  // a byte set to a random value
        if (!s.empty()) s[rng.Below(s.size())] = static_cast<char>(rng.Below(256));
        break;
      case 1:  // a bit flipped
        if (!s.empty()) s[rng.Below(s.size())] ^= static_cast<char>(1u << rng.Below(8));
        break;
      case 2:  // truncated
        s.resize(rng.Below(s.size() + 1));
        break;
      case 3: {  // a line repeated
        auto lines = Lines(s);
        if (!lines.empty()) {
          const std::size_t l = rng.Below(lines.size());
          lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(rng.Below(lines.size() + 1)), lines[l]);
        }
        s = Join(lines);
        break;
      }
      case 4: {  // a line dropped
        auto lines = Lines(s);
        if (!lines.empty()) lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(rng.Below(lines.size())));
        s = Join(lines);
        break;
      }
      case 5: {  // two lines swapped
        auto lines = Lines(s);
        if (lines.size() > 1) std::swap(lines[rng.Below(lines.size())], lines[rng.Below(lines.size())]);
        s = Join(lines);
        break;
      }
      case 6:
      case 7:  // a number made extreme (twice as likely: the readers' range checks)
        s = ReplaceNumber(s, rng);
        break;
      default: {  // random bytes inserted
        std::string junk;
        for (std::size_t k = 0, m = 1 + rng.Below(16); k < m; ++k) junk += static_cast<char>(rng.Below(256));
        s.insert(rng.Below(s.size() + 1), junk);
        break;
      }
    }
  }
  return s;
}

int Scale() {
  const char* v = std::getenv("SERVECAST_FUZZ_SCALE");
  const int k = v ? std::atoi(v) : 1;
  return k < 1 ? 1 : k;
}

// Runs `inputs` mutations of `seed_text` through `run` (which writes the input
// where the command reads it and runs the binary). Counts the exit codes; a
// signal or a hang fails the test, with the input kept under `keep_dir`.
void Fuzz(const std::string& name, std::uint64_t seed, int inputs, const std::string& seed_text,
          const std::function<void(const std::string&)>& write, const std::vector<std::string>& argv,
          const std::string& cwd = "") {
  Rng rng(seed);
  std::map<int, int> exits;
  const std::string keep_dir = MakeTempDir("sc_fuzz_fail_" + name + "_");
  int failures = 0;
  std::vector<std::string> examples_1;  // first lines of the messages of exit 1
  for (int i = 0; i < inputs; ++i) {
    const std::string input = i == 0 ? seed_text : Mutate(seed_text, rng);
    write(input);
    const ProcessResult r = RunProcess(argv, 20, cwd);
    ++exits[r.exit_code];
    if (r.exit_code == 1 && examples_1.size() < 3) examples_1.push_back(r.err.substr(0, r.err.find('\n')));
    // An "internal error" is an exception no reader turned into a message
    // naming the input: a bug, whatever its exit code.
    if (r.exit_code < 0 || r.exit_code > 3 || r.err.find("internal error") != std::string::npos) {
      const std::string kept = keep_dir + "/input_" + std::to_string(i);
      WriteText(kept, input);
      if (failures++ < 5) ADD_FAILURE() << name << " input " << i << " (kept at " << kept << "): " << Describe(r);
    }
    if (i == 0) {
      EXPECT_EQ(r.exit_code, 0) << name << ": the unmutated input must be accepted\n" << Describe(r);
    }
  }
  std::string counts;
  for (const auto& [code, n] : exits) counts += " exit " + std::to_string(code) + ": " + std::to_string(n) + ";";
  std::printf("[fuzz] %s: %d inputs (seed %llu):%s\n", name.c_str(), inputs, static_cast<unsigned long long>(seed),
              counts.c_str());
  for (const auto& e : examples_1) std::printf("[fuzz]   exit 1: %s\n", e.c_str());
  if (failures == 0) fs::remove_all(keep_dir);
}

const std::string kTinyData = kSource + "/tests/goldens/data";
const std::string kTinyTable = "tiny_gpu/gemm/dense/1/gemm_perf.csv";

std::vector<std::string> TinyEstimate(const std::string& model, const std::string& data_root) {
  return {kBin,        "estimate", "--model", model,     "--system", "tiny_gpu", "--systems",
          kSource + "/tests/goldens/systems", "--data-root", data_root, "--data", "dense/1"};
}

// A perf table as CSV, read by the loader of an estimate (row checks, keys).
TEST(FuzzE2E, TableCsvThroughTheEstimate) {
  const std::string root = MakeTempDir("sc_fuzz_csv_");
  fs::copy(kTinyData, root, fs::copy_options::recursive);
  const std::string file = root + "/" + kTinyTable;
  Fuzz("table-csv", 2801, 700 * Scale(), ReadFile(file), [&](const std::string& s) { WriteText(file, s); },
       TinyEstimate(kSource + "/tests/goldens/models/tiny-dense", root));
  fs::remove_all(root);
}

// A perf table as Parquet (footer, Thrift metadata, pages), read by db convert.
TEST(FuzzE2E, TableParquetThroughDbConvert) {
  const std::string dir = MakeTempDir("sc_fuzz_parquet_");
  const ProcessResult made =
      RunProcess({kBin, "db", "convert", kTinyData + "/" + kTinyTable, dir + "/seed.parquet"});
  ASSERT_EQ(made.exit_code, 0) << Describe(made);
  const std::string file = dir + "/gemm_perf.parquet";
  Fuzz("table-parquet", 2802, 700 * Scale(), ReadFile(dir + "/seed.parquet"),
       [&](const std::string& s) {
         WriteText(file, s);
         fs::remove(dir + "/out.csv");
       },
       {kBin, "db", "convert", file, dir + "/out.csv"});
  fs::remove_all(dir);
}

// A model's config.json, read by the estimate.
TEST(FuzzE2E, ModelConfigJson) {
  const std::string dir = MakeTempDir("sc_fuzz_config_");
  const std::string file = dir + "/config.json";
  Fuzz("config-json", 2803, 600 * Scale(), ReadFile(kSource + "/tests/goldens/models/tiny-dense/config.json"),
       [&](const std::string& s) { WriteText(file, s); }, TinyEstimate(dir, kTinyData));
  fs::remove_all(dir);
}

// A case plan: one of the shipped plan's base-op, model or skips files mutated,
// planned for the cpu backend.
TEST(FuzzE2E, CasePlanYaml) {
  const std::string dir = MakeTempDir("sc_fuzz_plan_");
  fs::copy(kCases, dir + "/cases", fs::copy_options::recursive);
  const std::vector<std::string> targets = {"base_ops/rmsnorm.yaml", "base_ops/attention_context.yaml",
                                            "base_ops/moe.yaml", "models/qwen3-32b.yaml", "skips.yaml"};
  for (std::size_t t = 0; t < targets.size(); ++t) {
    SCOPED_TRACE(targets[t]);
    const std::string file = dir + "/cases/" + targets[t];
    const std::string original = ReadFile(file);
    Fuzz("plan-" + fs::path(targets[t]).stem().string(), 2810 + t, 80 * Scale(), original,
         [&](const std::string& s) { WriteText(file, s); },
         CollectArgs(kBin, {"--plan-only"}, dir + "/cases"));
    WriteText(file, original);
  }
  fs::remove_all(dir);
}

// A silicon measurement CSV, read by validate.
TEST(FuzzE2E, SiliconCsvThroughValidate) {
  const std::string dir = MakeTempDir("sc_fuzz_silicon_");
  const std::string file = dir + "/silicon.csv";
  Fuzz("silicon-csv", 2804, 500 * Scale(), ReadFile(kSource + "/tests/goldens/validate/tiny_dev.csv"),
       [&](const std::string& s) { WriteText(file, s); },
       {kBin, "validate", "--silicon", file, "--systems", "tests/goldens/systems", "--models", "models", "--engines",
        "engines", "--data-root", "tests/goldens/data", "--data-map", "trtllm=dense/1", "--data-map", "vllm=moe/1"},
       kSource);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servecast::testing
