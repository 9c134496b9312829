#include "collect/disposition.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace servecast::collect {
namespace {

TEST(DispositionTest, NamesRoundTrip) {
  const std::pair<Disposition, const char*> all[] = {{Disposition::kPassed, "passed"},
                                                     {Disposition::kIncorrect, "incorrect"},
                                                     {Disposition::kNotSupported, "not_supported"},
                                                     {Disposition::kSkipped, "skipped"},
                                                     {Disposition::kFailed, "failed"},
                                                     {Disposition::kTimeout, "timeout"},
                                                     {Disposition::kCrashed, "crashed"}};
  std::set<std::string_view> names;
  for (const auto& [d, name] : all) {
    EXPECT_EQ(ToString(d), name);
    auto back = ParseDisposition(name);
    ASSERT_TRUE(back.has_value()) << name;
    EXPECT_EQ(*back, d);
    names.insert(ToString(d));
  }
  EXPECT_EQ(names.size(), 7u);
}

TEST(DispositionTest, FailureClassNamesRoundTrip) {
  const std::pair<FailureClass, const char*> all[] = {{FailureClass::kNone, "none"},
                                                      {FailureClass::kCollectorBug, "collector_bug"},
                                                      {FailureClass::kUnsupportedConfig, "unsupported_config"},
                                                      {FailureClass::kFrameworkBug, "framework_bug"},
                                                      {FailureClass::kResource, "resource"},
                                                      {FailureClass::kTimeout, "timeout"},
                                                      {FailureClass::kTransient, "transient"}};
  for (const auto& [c, name] : all) {
    EXPECT_EQ(ToString(c), name);
    auto back = ParseFailureClass(name);
    ASSERT_TRUE(back.has_value()) << name;
    EXPECT_EQ(*back, c);
  }
}

TEST(DispositionTest, UnknownNamesDoNotParse) {
  EXPECT_FALSE(ParseDisposition("").has_value());
  EXPECT_FALSE(ParseDisposition("Passed").has_value());
  EXPECT_FALSE(ParseDisposition("ok").has_value());
  EXPECT_FALSE(ParseDisposition("collector_bug").has_value());
  EXPECT_FALSE(ParseFailureClass("oom").has_value());
  EXPECT_FALSE(ParseFailureClass("passed").has_value());
}

TEST(DispositionTest, OnlyPassedSkippedAndNotSupportedAreNotFailures) {
  EXPECT_FALSE(IsFailure(Disposition::kPassed));
  EXPECT_FALSE(IsFailure(Disposition::kSkipped));
  EXPECT_FALSE(IsFailure(Disposition::kNotSupported));
  EXPECT_TRUE(IsFailure(Disposition::kIncorrect));
  EXPECT_TRUE(IsFailure(Disposition::kFailed));
  EXPECT_TRUE(IsFailure(Disposition::kTimeout));
  EXPECT_TRUE(IsFailure(Disposition::kCrashed));
}

}  // namespace
}  // namespace servecast::collect
