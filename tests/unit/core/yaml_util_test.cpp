#include "core/yaml_util.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core_test_util.h"

namespace servecast {
namespace {

using testing::HasText;
using testing::TempDir;
using testing::ThrownMessage;

const char* kDoc =
    "name: gemm\n"       // 1
    "count: 12\n"        // 2
    "big: 1e9\n"         // 3
    "ratio: 0.25\n"      // 4
    "flag: yes\n"        // 5
    "off: false\n"       // 6
    "nothing: ~\n"       // 7
    "word: twelve\n"     // 8
    "list: [a, b, c]\n"  // 9
    "single: alone\n"    // 10
    "nested:\n"          // 11
    "  inner: 3\n"       // 12
    "  deeper:\n"        // 13
    "    leaf: x\n"      // 14
    "frac: 2.5\n";       // 15

YamlReader Reader() {
  return YamlReader("conf.yaml", LoadYamlString(kDoc, "conf.yaml"));
}

TEST(YamlUtilTest, TypedRequiredValues) {
  YamlReader r = Reader();
  EXPECT_EQ(r.RequiredString("name"), "gemm");
  EXPECT_EQ(r.RequiredInt("count"), 12);
  EXPECT_EQ(r.RequiredInt("big"), 1000000000);  // exact integer in exponent form
  EXPECT_DOUBLE_EQ(r.RequiredDouble("ratio"), 0.25);
  EXPECT_DOUBLE_EQ(r.RequiredDouble("count"), 12.0);
  EXPECT_EQ(r.RequiredString("count"), "12");
}

TEST(YamlUtilTest, OptionalValuesFallBackWhenAbsentOrNull) {
  YamlReader r = Reader();
  EXPECT_EQ(r.OptionalString("missing", "dflt"), "dflt");
  EXPECT_EQ(r.OptionalString("nothing", "dflt"), "dflt");
  EXPECT_EQ(r.OptionalInt("missing", -7), -7);
  EXPECT_EQ(r.OptionalInt("count", -7), 12);
  EXPECT_DOUBLE_EQ(r.OptionalDouble("missing", 1.5), 1.5);
  EXPECT_DOUBLE_EQ(r.OptionalDouble("ratio", 1.5), 0.25);
  EXPECT_TRUE(r.OptionalBool("flag", false));
  EXPECT_FALSE(r.OptionalBool("off", true));
  EXPECT_TRUE(r.OptionalBool("missing", true));
  EXPECT_TRUE(r.Has("name"));
  EXPECT_FALSE(r.Has("nothing"));
  EXPECT_FALSE(r.Has("missing"));
}

TEST(YamlUtilTest, WrongTypeErrorsNameFileLineKeyAndExpectation) {
  YamlReader r = Reader();
  std::string msg = ThrownMessage<ConfigError>([&] { r.RequiredInt("word"); });
  EXPECT_TRUE(HasText(msg, "conf.yaml:8: key 'word': value 'twelve' is not an integer; expected an integer"));
  msg = ThrownMessage<ConfigError>([&] { r.RequiredInt("frac"); });
  EXPECT_TRUE(HasText(msg, "conf.yaml:15: key 'frac': value '2.5' is not an integer"));
  msg = ThrownMessage<ConfigError>([&] { r.RequiredDouble("word"); });
  EXPECT_TRUE(HasText(msg, "conf.yaml:8: key 'word': value 'twelve' is not a number; expected a number"));
  msg = ThrownMessage<ConfigError>([&] { r.OptionalBool("word", false); });
  EXPECT_TRUE(HasText(msg, "conf.yaml:8: key 'word': not a boolean; expected true or false"));
  msg = ThrownMessage<ConfigError>([&] { r.RequiredString("list"); });
  EXPECT_TRUE(HasText(msg, "conf.yaml:9: key 'list': not a scalar; expected a string"));
}

TEST(YamlUtilTest, MissingRequiredKeyNamesTheKeyPath) {
  YamlReader r = Reader();
  std::string msg = ThrownMessage<ConfigError>([&] { r.RequiredString("absent"); });
  EXPECT_TRUE(HasText(msg, "conf.yaml:1: key 'absent': missing key; expected a string"));
  YamlReader nested = r.Child("nested");
  msg = ThrownMessage<ConfigError>([&] { nested.RequiredInt("outer"); });
  EXPECT_TRUE(HasText(msg, "conf.yaml:12: key 'nested.outer': missing key; expected an integer"));
  msg = ThrownMessage<ConfigError>([&] { r.RequiredInt("nothing"); });  // null counts as missing
  EXPECT_TRUE(HasText(msg, "key 'nothing': missing key"));
}

TEST(YamlUtilTest, ChildReadersCarryTheirPath) {
  YamlReader r = Reader();
  YamlReader deeper = r.Child("nested").Child("deeper");
  EXPECT_EQ(deeper.path(), "nested.deeper");
  EXPECT_EQ(deeper.file(), "conf.yaml");
  EXPECT_EQ(deeper.RequiredString("leaf"), "x");
  SourceLocation where = deeper.Where("leaf");
  EXPECT_EQ(where.file, "conf.yaml");
  EXPECT_EQ(where.line, 14);
  EXPECT_EQ(where.key, "nested.deeper.leaf");
  std::string msg = ThrownMessage<ConfigError>([&] { deeper.RequiredInt("leaf"); });
  EXPECT_TRUE(HasText(msg, "conf.yaml:14: key 'nested.deeper.leaf': value 'x' is not an integer"));
  EXPECT_TRUE(HasText(ThrownMessage<ConfigError>([&] { r.Child("absent"); }), "key 'absent': missing key"));
}

TEST(YamlUtilTest, ReaderOfANonMappingIsRefused) {
  YamlReader r = Reader();
  std::string msg = ThrownMessage<ConfigError>([&] { r.Child("list"); });
  EXPECT_TRUE(HasText(msg, "conf.yaml:9: key 'list': not a mapping"));
  // A null or absent node is an empty mapping.
  YamlReader empty("e.yaml", YAML::Node());
  EXPECT_FALSE(empty.Has("x"));
  EXPECT_EQ(empty.OptionalInt("x", 3), 3);
}

TEST(YamlUtilTest, StringList) {
  YamlReader r = Reader();
  EXPECT_EQ(r.StringList("list"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(r.StringList("single"), std::vector<std::string>{"alone"});
  EXPECT_TRUE(r.StringList("missing").empty());
  std::string msg = ThrownMessage<ConfigError>([&] { r.StringList("nested"); });
  EXPECT_TRUE(HasText(msg, "key 'nested': not a list; expected a list of strings"));
}

TEST(YamlUtilTest, AllowOnlyKeysNamesTheUnknownKeyAndItsLine) {
  YamlReader top("sweep.yaml",
                 LoadYamlString("op: gemm\nsweeps:\n  - backends: [cpu]\n    axess: {m: [1]}\n", "sweep.yaml"));
  top.AllowOnlyKeys({"op", "sweeps"});
  YamlReader sweep("sweep.yaml", top.node()["sweeps"][0], "sweeps[0]");
  std::string msg = ThrownMessage<ConfigError>([&] { sweep.AllowOnlyKeys({"backends", "axes", "profiles"}); });
  EXPECT_TRUE(HasText(msg,
                      "sweep.yaml:4: key 'sweeps[0].axess': unknown key; expected one of: backends, axes, "
                      "profiles"));
  msg = ThrownMessage<ConfigError>([&] { top.AllowOnlyKeys({"op"}); });
  EXPECT_TRUE(HasText(msg, "sweep.yaml:2: key 'sweeps': unknown key; expected one of: op"));
}

TEST(YamlUtilTest, ScalarConvertersReportLocation) {
  YAML::Node doc = LoadYamlString("a: [1, 2]\nb: nope\nc: -17\nd: 1e400x\n", "s.yaml");
  EXPECT_EQ(YamlToInt("s.yaml", doc["c"], "c"), -17);
  EXPECT_DOUBLE_EQ(YamlToDouble("s.yaml", doc["c"], "c"), -17.0);
  EXPECT_EQ(YamlToString("s.yaml", doc["b"], "b"), "nope");
  EXPECT_TRUE(HasText(ThrownMessage<ConfigError>([&] { YamlToInt("s.yaml", doc["a"], "a"); }),
                      "s.yaml:1: key 'a': not a scalar; expected an integer"));
  EXPECT_TRUE(HasText(ThrownMessage<ConfigError>([&] { YamlToBool("s.yaml", doc["b"], "b"); }),
                      "s.yaml:2: key 'b': not a boolean"));
  EXPECT_TRUE(HasText(ThrownMessage<ConfigError>([&] { YamlToDouble("s.yaml", doc["d"], "d"); }),
                      "s.yaml:4: key 'd': value '1e400x' is not a number"));
  for (const char* t : {"true", "True", "yes"}) EXPECT_TRUE(YamlToBool("s.yaml", YAML::Node(t), "k")) << t;
  for (const char* f : {"false", "False", "no"}) EXPECT_FALSE(YamlToBool("s.yaml", YAML::Node(f), "k")) << f;
}

TEST(YamlUtilTest, MalformedYamlIsConfigErrorWithFileAndLine) {
  std::string msg = ThrownMessage<ConfigError>([] { LoadYamlString("a: 1\nb: 2\nc: [1, 2\nd: 4\n", "broken.yaml"); });
  EXPECT_TRUE(HasText(msg, "broken.yaml:"));
  EXPECT_TRUE(HasText(msg, "malformed YAML"));
  EXPECT_TRUE(HasText(msg, "expected valid YAML"));
  msg = ThrownMessage<ConfigError>([] { LoadYamlString("a: 1\n  b: 2\n", "indent.yaml"); });
  EXPECT_TRUE(HasText(msg, "indent.yaml:2:"));
}

TEST(YamlUtilTest, LoadYamlFile) {
  TempDir dir;
  std::string path = dir.File("x.yaml");
  testing::WriteText(path, "k: 5\n");
  EXPECT_EQ(YamlReader(path, LoadYamlFile(path)).RequiredInt("k"), 5);
  std::string missing = dir.File("none.yaml");
  std::string msg = ThrownMessage<ConfigError>([&] { LoadYamlFile(missing); });
  EXPECT_TRUE(HasText(msg, missing + ": file not found"));
}

}  // namespace
}  // namespace servecast
