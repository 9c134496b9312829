// Malformed YAML, unknown op, bad flag, corrupt journal: exit 2 with a message
// naming the file, the line and what was expected; never a crash.
#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "e2e_common.h"

namespace servecast::testing {
namespace {

namespace fs = std::filesystem;

TEST(BadInputE2E, MalformedYamlNamesFileAndLine) {
  std::string dir = MakeTempDir("sc_badyaml_");
  WriteText(dir + "/cases/base_ops/rmsnorm.yaml",
            "op: rmsnorm\nsweeps:\n  - backends: [cpu]\n    axes:\n      num_tokens: [1, 2\n      hidden_size: [8]\n");
  auto r = RunProcess(CollectArgs(kBin, {"--ops", "rmsnorm", "--plan-only"}, dir + "/cases"));
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_NE(r.err.find("rmsnorm.yaml:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("expected"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

TEST(BadInputE2E, WrongValueAndUnknownKeyNameTheLine) {
  std::string dir = MakeTempDir("sc_badkey_");
  WriteText(dir + "/cases/base_ops/rmsnorm.yaml",
            "op: rmsnorm\nsweeps:\n  - backends: [cpu]\n    axis:\n      num_tokens: [1]\n");
  auto r = RunProcess(CollectArgs(kBin, {"--ops", "rmsnorm", "--plan-only"}, dir + "/cases"));
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_NE(r.err.find("rmsnorm.yaml:4"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("axis"), std::string::npos) << r.err;
  // A missing required parameter names the op and the parameter.
  WriteText(dir + "/cases/base_ops/rmsnorm.yaml",
            "op: rmsnorm\nsweeps:\n  - backends: [cpu]\n    axes:\n      dtype: [float32]\n      num_tokens: [1]\n");
  auto m = RunProcess(CollectArgs(kBin, {"--ops", "rmsnorm", "--plan-only"}, dir + "/cases"));
  EXPECT_EQ(m.exit_code, 2) << Describe(m);
  EXPECT_NE(m.err.find("rmsnorm.yaml:3"), std::string::npos) << m.err;
  EXPECT_NE(m.err.find("hidden_size"), std::string::npos) << m.err;
  // A skip entry without a reason is refused.
  WriteText(dir + "/cases/base_ops/rmsnorm.yaml",
            "op: rmsnorm\nsweeps:\n  - backends: [cpu]\n    axes: {dtype: [float32], num_tokens: [1], hidden_size: [8]}\n");
  WriteText(dir + "/cases/skips.yaml", "skips:\n  - op: rmsnorm\n    when: num_tokens > 4\n    source: a test\n");
  auto s = RunProcess(CollectArgs(kBin, {"--ops", "rmsnorm", "--plan-only"}, dir + "/cases"));
  EXPECT_EQ(s.exit_code, 2) << Describe(s);
  EXPECT_NE(s.err.find("skips.yaml:2"), std::string::npos) << s.err;
  EXPECT_NE(s.err.find("reason"), std::string::npos) << s.err;
  fs::remove_all(dir);
}

TEST(BadInputE2E, UnknownOpAndBadFlag) {
  auto r = RunProcess(CollectArgs(kBin, {"--ops", "gemmm", "--plan-only"}));
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_NE(r.err.find("unknown op 'gemmm'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("gemm"), std::string::npos);
  auto f = RunProcess({kBin, "collect", "--backend", "cpu", "--no-such-flag"});
  EXPECT_EQ(f.exit_code, 2) << Describe(f);
  EXPECT_NE(f.err.find("no-such-flag"), std::string::npos) << f.err;
  auto b = RunProcess(CollectArgs(kBin, {"--shard", "3/2", "--plan-only"}));
  EXPECT_EQ(b.exit_code, 2) << Describe(b);
  EXPECT_NE(b.err.find("I/N"), std::string::npos) << b.err;
  auto u = RunProcess({kBin, "collect", "--backend", "tpu", "--cases", kCases, "--systems", kSystems});
  EXPECT_EQ(u.exit_code, 2) << Describe(u);
  EXPECT_NE(u.err.find("unknown backend 'tpu'"), std::string::npos) << u.err;
}

// A --case-filter on a parameter no case of the planned ops has is a typo: exit 2
// naming the key and the parameters there are (it selected nothing, silently).
TEST(BadInputE2E, CaseFilterOnAnUnknownParameterSaysSo) {
  auto r = RunProcess(CollectArgs(kBin, {"--ops", "rmsnorm", "--plan-only", "--case-filter", "nosuchkey=5"}));
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_NE(r.err.find("--case-filter nosuchkey=5: no case of the planned ops has a parameter 'nosuchkey'"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("hidden_size"), std::string::npos) << r.err;
  auto ok = RunProcess(CollectArgs(kBin, {"--ops", "rmsnorm", "--plan-only", "--case-filter", "hidden_size=5"}));
  EXPECT_EQ(ok.exit_code, 0) << Describe(ok);  // a known key matching no case: an empty selection, as before
}

// An --out that cannot be written stops the run before anything is measured (exit
// 3 with the path and the reason; it was "internal error", exit 1, after the whole
// run); a system that is not the backend's device is refused (exit 2).
TEST(BadInputE2E, UnwritableOutAndAForeignSystemStopBeforeMeasuring) {
  std::string dir = MakeTempDir("sc_badout_");
  auto r = RunProcess(CollectArgs(kBin, {"--ops", "rmsnorm", "--limit", "1", "--out", "/proc/servecast-nope",
                                         "--run-dir", dir + "/run"}));
  EXPECT_EQ(r.exit_code, 3) << Describe(r);
  EXPECT_NE(r.err.find("--out /proc/servecast-nope is not writable: cannot create directory /proc/servecast-nope"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir + "/run/journal.jsonl"));  // nothing measured
  auto gpu = RunProcess(CollectArgs(kBin, {"--ops", "rmsnorm", "--limit", "1", "--system", "h200_sxm", "--out",
                                           dir + "/data", "--run-dir", dir + "/run2"}));
  EXPECT_EQ(gpu.exit_code, 2) << Describe(gpu);
  EXPECT_NE(gpu.err.find("--system h200_sxm describes a gpu machine (NVIDIA H200), but the cpu backend measures "
                         "this host's processor"),
            std::string::npos)
      << gpu.err;
  EXPECT_FALSE(fs::exists(dir + "/data"));
  fs::remove_all(dir);
}

// A --data-root that is not a folder (missing, or a file) is a usage error naming
// it, in every command that reads perf data (it was skipped by the scan and ended as
// "no data", exit 1, naming no path); a folder without the system's data names the
// roots it searched.
TEST(BadInputE2E, CheckWithAMissingSystemsFolderExits2BeforeReadingTables) {
  // It was noticed per table (ten hard failures, exit 1) instead of once, up front.
  const std::string missing = MakeTempDir("sc_nosys_") + "/missing";
  const ProcessResult r = RunProcess({kBin, "check", kSource + "/tests/goldens/data", "--systems", missing});
  EXPECT_EQ(r.exit_code, 2) << Describe(r);
  EXPECT_NE(r.err.find("--systems '" + missing + "': not a directory"), std::string::npos) << r.err;
}

TEST(BadInputE2E, ADataRootThatIsNotAFolderExits2NamingIt) {
  const std::string dir = MakeTempDir("sc_badroot_");
  WriteText(dir + "/a_file", "not a data root\n");
  fs::create_directories(dir + "/empty");
  const std::vector<std::string> model = {"--model", kSource + "/tests/goldens/models/tiny-dense", "--system",
                                          "tiny_gpu", "--systems", kSource + "/tests/goldens/systems"};
  for (const auto& [root, why] : std::vector<std::pair<std::string, std::string>>{
           {dir + "/missing", "no such folder"}, {dir + "/a_file", "not a folder"}}) {
    for (const std::string cmd : {"estimate", "default", "support"}) {
      SCOPED_TRACE(cmd + " " + root);
      std::vector<std::string> a = {kBin, cmd};
      a.insert(a.end(), model.begin(), model.end());
      a.insert(a.end(), {"--data-root", root});
      if (cmd == "default") a.insert(a.end(), {"--total-gpus", "2"});
      const ProcessResult r = RunProcess(a);
      EXPECT_EQ(r.exit_code, 2) << Describe(r);
      EXPECT_NE(r.err.find("--data-root " + root + ": " + why + "; expected a data root"), std::string::npos)
          << r.err;
    }
    const ProcessResult v = RunProcess({kBin, "validate", "--silicon", kSource + "/tests/goldens/validate/tiny_dev.csv",
                                        "--systems", kSource + "/tests/goldens/systems", "--data-root", root});
    EXPECT_EQ(v.exit_code, 2) << Describe(v);
    EXPECT_NE(v.err.find("--data-root " + root + ": " + why), std::string::npos) << v.err;
  }
  std::vector<std::string> e = {kBin, "estimate"};
  e.insert(e.end(), model.begin(), model.end());
  e.insert(e.end(), {"--data-root", dir + "/empty"});
  const ProcessResult r = RunProcess(e);
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_NE(r.err.find("no perf data for system 'tiny_gpu' under the data roots (" + dir + "/empty)"),
            std::string::npos)
      << r.err;
  fs::remove_all(dir);
}

// Case plans are checked when they load (issue 28 item 5): key values against the
// table's declaration, backend and op names, the --cases folder itself; each a
// usage error naming the file and line (they were accepted and failed case by
// case, or selected nothing, silently).
TEST(BadInputE2E, CasePlansAreCheckedWhenTheyLoad) {
  const std::string dir = MakeTempDir("sc_badplan_");
  auto plan = [&](const std::string& yaml) {
    fs::remove_all(dir + "/cases");
    WriteText(dir + "/cases/skips.yaml", "skips: []\n");
    WriteText(dir + "/cases/base_ops/rmsnorm.yaml", yaml);
    return RunProcess(CollectArgs(kBin, {"--ops", "rmsnorm", "--plan-only"}, dir + "/cases"));
  };
  auto sweep = [](const std::string& backends, const std::string& tokens) {
    return "op: rmsnorm\nsweeps:\n  - backends: [" + backends + "]\n    axes:\n      dtype: [float32]\n      num_tokens: [" +
           tokens + "]\n      hidden_size: [1024]\n";
  };
  for (const auto& [tokens, says] : std::vector<std::pair<std::string, std::string>>{
           {"1.5", "value '1.5' is not an integer"},
           {".nan", "value '.nan' is not an integer"},
           {"1e+23", "value '1e+23' is not an integer"},
           {"sixteen", "value 'sixteen' is not an integer"},
           {"0", "value 0 is below the minimum; expected an integer >= 1 (a key of elementwise_perf)"}}) {
    auto r = plan(sweep("cpu", tokens));
    EXPECT_EQ(r.exit_code, 2) << tokens << "\n" << Describe(r);
    // The line of the value (6), not of the sweep (3).
    EXPECT_NE(r.err.find("base_ops/rmsnorm.yaml:6: key 'num_tokens': " + says), std::string::npos) << r.err;
  }
  auto backend = plan(sweep("cpu, cdua", "16"));
  EXPECT_EQ(backend.exit_code, 2) << Describe(backend);
  EXPECT_NE(backend.err.find("unknown backend 'cdua'"), std::string::npos) << backend.err;
  plan(sweep("cpu", "16"));  // a good rmsnorm sweep beside the typo
  WriteText(dir + "/cases/base_ops/typo.yaml", "op: rmsnrm\nsweeps:\n  - backends: [cpu]\n    axes:\n      dtype: [float32]\n");
  auto typo = RunProcess(CollectArgs(kBin, {"--ops", "rmsnorm", "--plan-only"}, dir + "/cases"));
  EXPECT_EQ(typo.exit_code, 2) << Describe(typo);
  EXPECT_NE(typo.err.find("typo.yaml:3: key 'backends': backend 'cpu' has no op 'rmsnrm'"), std::string::npos)
      << typo.err;
  auto missing = RunProcess(CollectArgs(kBin, {"--ops", "rmsnorm", "--plan-only"}, dir + "/nowhere"));
  EXPECT_EQ(missing.exit_code, 2) << Describe(missing);
  EXPECT_NE(missing.err.find("--cases " + dir + "/nowhere: no base_ops/ folder there"), std::string::npos)
      << missing.err;
  auto good = plan(sweep("cpu, cuda", "16"));
  EXPECT_EQ(good.exit_code, 0) << Describe(good);
  fs::remove_all(dir);
}

// A bad key value is named at its own file and line: in a sweep's axes (each value
// of a block list on its line), fixed and profiles, and in a model file's profiles
// crossed into a base sweep (it was blamed on the base sweep's first line, in the
// base-ops file, whatever file held it).
TEST(BadInputE2E, APlanValueIsNamedAtItsOwnFileAndLine) {
  const std::string dir = MakeTempDir("sc_badline_");
  auto plan = [&](const std::string& base, const std::string& model) {
    fs::remove_all(dir + "/cases");
    WriteText(dir + "/cases/skips.yaml", "skips: []\n");
    WriteText(dir + "/cases/base_ops/attention_context.yaml", base);
    if (!model.empty()) WriteText(dir + "/cases/models/m.yaml", model);
    return RunProcess(CollectArgs(kBin, {"--ops", "attention_context", "--plan-only"}, dir + "/cases"));
  };
  auto base = [](const std::string& isl, const std::string& head_dim, const std::string& step) {
    return "op: attention_context\n"                                                        // 1
           "sweeps:\n"                                                                      // 2
           "  - backends: [cpu]\n"                                                          // 3
           "    axes:\n"                                                                    // 4
           "      batch_size: [1, 2]\n"                                                     // 5
           "      isl:\n"                                                                   // 6
           "        - 16\n"                                                                 // 7
           "        - " + isl + "\n"                                                          // 8
           "    profiles:\n"                                                                // 9
           "      - {num_heads: 8, num_key_value_heads: 8, head_dim: 64, window_size: 0}\n"  // 10
           "      - {num_heads: 8, num_key_value_heads: 8, head_dim: " + head_dim +
           ", window_size: 0}\n"                                                            // 11
           "    fixed:\n"                                                                   // 12
           "      beam_width: 1\n"                                                          // 13
           "      attn_dtype: float32\n"                                                    // 14
           "      kv_cache_dtype: float32\n"                                                // 15
           "      step: " + step + "\n"                                                     // 16
           "    model_shapes: true\n";
  };
  const std::string model_file = "model: org/m\nops:\n  attention_context:\n    profiles:\n"
                                 "      - {num_heads: 4, num_key_value_heads: 4, head_dim: 64, window_size: 0}\n"
                                 "      - {num_heads: 4.5, num_key_value_heads: 4, head_dim: 64, window_size: 0}\n";
  const auto good = plan(base("128", "128", "0"), "");
  EXPECT_EQ(good.exit_code, 0) << Describe(good);
  struct Bad {
    std::string base, model, where;
  };
  for (const Bad& b : std::vector<Bad>{
           {base("128.5", "128", "0"), "", "base_ops/attention_context.yaml:8: key 'isl': value '128.5' is not an integer"},
           {base("128", "-128", "0"), "", "base_ops/attention_context.yaml:11: key 'head_dim': value -128 is below the minimum"},
           {base("128", "128", "-1"), "", "base_ops/attention_context.yaml:16: key 'step': value -1 is below the minimum"},
           {base("0x80", "128", "0"), "", "base_ops/attention_context.yaml:8: key 'isl': value '0x80' is not an integer"},
           {base("128", "128", "0"), model_file, "models/m.yaml:6: key 'num_heads': value '4.5' is not an integer"}}) {
    const auto r = plan(b.base, b.model);
    EXPECT_EQ(r.exit_code, 2) << b.where << "\n" << Describe(r);
    EXPECT_NE(r.err.find(b.where), std::string::npos) << r.err;
  }
  fs::remove_all(dir);
}

// A parameter the op does not declare (not one of its required parameters or
// its table's key columns) is refused when the plan loads, with the file, the
// line of the name and the name, in a sweep's axes, fixed or profiles and in a
// model file's profiles (it rode along unread in the case id before).
TEST(BadInputE2E, UnknownParametersInCasePlansAreRefused) {
  const std::string dir = MakeTempDir("sc_badparam_");
  auto plan = [&](const std::string& yaml, const std::string& model) {
    fs::remove_all(dir + "/cases");
    WriteText(dir + "/cases/skips.yaml", "skips: []\n");
    WriteText(dir + "/cases/base_ops/rmsnorm.yaml", yaml);
    if (!model.empty()) WriteText(dir + "/cases/models/m.yaml", model);
    return RunProcess(CollectArgs(kBin, {"--ops", "rmsnorm", "--plan-only"}, dir + "/cases"));
  };
  const std::string head = "op: rmsnorm\nsweeps:\n  - backends: [cpu]\n    model_shapes: true\n";
  const std::string axes = "    axes:\n      dtype: [float32]\n      num_tokens: [16]\n";
  for (const auto& [yaml, says] : std::vector<std::pair<std::string, std::string>>{
           {head + axes + "      hiden_size: [1024]\n", "rmsnorm.yaml:8: key 'hiden_size'"},
           {head + axes + "    fixed:\n      hidden_size: 1024\n      eps: 0.00001\n", "rmsnorm.yaml:10: key 'eps'"},
           {head + axes + "    profiles:\n      - {hidden_size: 1024, layers: 32}\n", "rmsnorm.yaml:9: key 'layers'"}}) {
    auto r = plan(yaml, "");
    EXPECT_EQ(r.exit_code, 2) << yaml << "\n" << Describe(r);
    EXPECT_NE(r.err.find(says + ": op 'rmsnorm' has no parameter"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("expected one of: dtype, hidden_size, num_tokens"), std::string::npos) << r.err;
  }
  const std::string good = head + axes + "      hidden_size: [1024]\n";
  auto model = plan(good, "model: m\nops:\n  rmsnorm:\n    profiles:\n      - {hidden_size: 4096}\n      - {hidden: 8192}\n");
  EXPECT_EQ(model.exit_code, 2) << Describe(model);
  EXPECT_NE(model.err.find("models/m.yaml:6: key 'hidden': op 'rmsnorm' has no parameter 'hidden'"), std::string::npos)
      << model.err;
  auto ok = plan(good, "model: m\nops:\n  rmsnorm:\n    profiles:\n      - {hidden_size: 4096}\n");
  EXPECT_EQ(ok.exit_code, 0) << Describe(ok);
  fs::remove_all(dir);
}

TEST(BadInputE2E, CorruptJournalNamesFileAndLine) {
  std::string dir = MakeTempDir("sc_corrupt_");
  std::vector<std::string> base = {"--ops", "rmsnorm", "--limit", "3", "--timing-budget-s", "0.02",
                                   "--out", dir + "/data", "--run-dir", dir + "/run"};
  auto r = RunProcess(CollectArgs(kBin, base));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  std::string journal = ReadText(dir + "/run/journal.jsonl");
  // Damage the second record (line 3) in the middle of the file.
  std::size_t l2 = journal.find('\n') + 1;
  std::size_t l3 = journal.find('\n', l2) + 1;
  journal.replace(l3, 10, "{not json ");
  WriteText(dir + "/run/journal.jsonl", journal);
  auto resume = base;
  resume.push_back("--resume");
  auto c = RunProcess(CollectArgs(kBin, resume));
  EXPECT_EQ(c.exit_code, 2) << Describe(c);
  EXPECT_NE(c.err.find("journal.jsonl:3"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("expected"), std::string::npos) << c.err;
  fs::remove_all(dir);
}

TEST(BadInputE2E, TornLastRecordIsDroppedAndReRun) {
  std::string dir = MakeTempDir("sc_torn_");
  std::vector<std::string> base = {"--ops", "rmsnorm", "--limit", "3", "--timing-budget-s", "0.02",
                                   "--out", dir + "/data", "--run-dir", dir + "/run"};
  auto r = RunProcess(CollectArgs(kBin, base));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  std::string journal = ReadText(dir + "/run/journal.jsonl");
  // A crash mid-append leaves the last record without its newline.
  WriteText(dir + "/run/journal.jsonl", journal.substr(0, journal.size() - 20));
  auto resume = base;
  resume.push_back("--resume");
  auto c = RunProcess(CollectArgs(kBin, resume));
  EXPECT_EQ(c.exit_code, 0) << Describe(c);
  EXPECT_NE(c.err.find("torn"), std::string::npos) << c.err;
  auto j = ReadText(dir + "/run/journal.jsonl");
  // header + 3 records (the torn one re-run once) + the resume's session line
  EXPECT_EQ(std::count(j.begin(), j.end(), '\n'), 5);
  EXPECT_NE(j.find("\"type\":\"session\""), std::string::npos) << j;
  fs::remove_all(dir);
}

TEST(BadInputE2E, CheckRejectsBadTables) {
  std::string dir = MakeTempDir("sc_badtable_");
  auto r = RunProcess(CollectArgs(kBin, {"--ops", "rmsnorm", "--timing-budget-s", "0.02", "--out", dir + "/data",
                                         "--run-dir", dir + "/run"}));
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  auto tables = FindTables(dir + "/data");
  ASSERT_EQ(tables.size(), 1u);
  std::string csv = ReadText(tables[0]);
  // Duplicate the last row and make one latency impossible: faster than the memory can move its bytes.
  std::size_t last = csv.rfind('\n', csv.size() - 2) + 1;
  std::string dup = csv.substr(last);
  Table t = Table::ReadCsv(tables[0]);
  std::string bad = csv.substr(0, last) + dup + dup;
  WriteText(tables[0], bad);
  auto c = RunProcess({kBin, "check", dir + "/data", "--systems", kSystems, "--json"});
  EXPECT_EQ(c.exit_code, 1) << Describe(c);
  auto doc = nlohmann::json::parse(c.out);
  EXPECT_FALSE(doc["ok"].get<bool>());
  EXPECT_NE(c.out.find("duplicate"), std::string::npos);
  // Physics: a 4096 x 8192 float32 rmsnorm in 1 ns.
  std::string fast = csv;
  std::size_t pos = fast.find("rmsnorm,float32,4096,8192,");
  ASSERT_NE(pos, std::string::npos);
  std::size_t lat = pos + std::string("rmsnorm,float32,4096,8192,").size();
  fast.replace(lat, fast.find(',', lat) - lat, "0.000001");
  WriteText(tables[0], fast);
  auto p = RunProcess({kBin, "check", dir + "/data", "--systems", kSystems});
  EXPECT_EQ(p.exit_code, 1) << Describe(p);
  EXPECT_NE(p.out.find("faster than physics"), std::string::npos) << p.out;
  // Keys the declaration refuses: a negative or fractional token count (they were
  // accepted and interpolated over), named with the file's line and the column.
  for (const char* key : {"-1024", "1024.7"}) {
    std::string broken = csv;
    const std::size_t at = broken.find("rmsnorm,float32,1024,");
    ASSERT_NE(at, std::string::npos);
    broken.replace(at, std::string("rmsnorm,float32,1024,").size(), std::string("rmsnorm,float32,") + key + ",");
    WriteText(tables[0], broken);
    auto k = RunProcess({kBin, "check", dir + "/data", "--systems", kSystems});
    EXPECT_EQ(k.exit_code, 1) << Describe(k);
    EXPECT_NE(k.out.find("column 'num_tokens' is " + std::string(key)), std::string::npos) << k.out;
    EXPECT_NE(k.out.find("line "), std::string::npos) << k.out;
  }
  // An integer key written as a decimal or beyond int64 (the column read as
  // floating point, every value whole): named at its line, not "not an integer column".
  for (const char* key : {"1024.0", "1e30"}) {
    std::string broken = csv;
    const std::size_t at = broken.find("rmsnorm,float32,1024,");
    ASSERT_NE(at, std::string::npos);
    const std::size_t line = static_cast<std::size_t>(std::count(broken.begin(), broken.begin() + at, '\n')) + 1;
    broken.replace(at, std::string("rmsnorm,float32,1024,").size(), std::string("rmsnorm,float32,") + key + ",");
    WriteText(tables[0], broken);
    auto k = RunProcess({kBin, "check", dir + "/data", "--systems", kSystems});
    EXPECT_EQ(k.exit_code, 1) << Describe(k);
    EXPECT_NE(k.out.find(tables[0] + ":" + std::to_string(line) + ": key 'num_tokens': '" + key +
                         "' is not an integer; expected an integer (the column's declared type)"),
              std::string::npos)
        << k.out;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace servecast::testing
