#include "core/version.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core_test_util.h"

namespace servecast {
namespace {

using testing::HasText;
using testing::ThrownMessage;

Version V(const std::string& s) {
  return Version::Parse(s);
}

TEST(VersionTest, Pep440PhasesSortInOrder) {
  const std::vector<std::string> chain = {"1.0.dev1", "1.0a1",     "1.0b2",          "1.0rc1",
                                          "1.0",      "1.0.post1", "1.0.post1+local"};
  for (std::size_t i = 0; i < chain.size(); ++i) {
    for (std::size_t j = 0; j < chain.size(); ++j) {
      auto want = i <=> j;
      EXPECT_EQ(V(chain[i]) <=> V(chain[j]), want) << chain[i] << " vs " << chain[j];
      EXPECT_EQ(V(chain[i]) < V(chain[j]), i < j) << chain[i] << " vs " << chain[j];
      EXPECT_EQ(V(chain[i]) == V(chain[j]), i == j) << chain[i] << " vs " << chain[j];
    }
  }
}

TEST(VersionTest, PreReleaseNumbersCompareNumerically) {
  EXPECT_LT(V("1.0a2"), V("1.0a10"));
  EXPECT_LT(V("1.3.0rc3"), V("1.3.0rc20"));
  EXPECT_LT(V("1.0b9"), V("1.0rc1"));
  EXPECT_LT(V("1.0.post2"), V("1.0.post10"));
  EXPECT_LT(V("1.0.dev2"), V("1.0.dev10"));
}

TEST(VersionTest, DevReleasesSortBeforeWhatTheyLeadTo) {
  EXPECT_LT(V("1.0a1.dev1"), V("1.0a1"));
  EXPECT_GT(V("1.0a1.dev1"), V("1.0.dev5"));
  EXPECT_LT(V("1.0.post1.dev1"), V("1.0.post1"));
  EXPECT_GT(V("1.0.post1.dev1"), V("1.0"));
}

TEST(VersionTest, ReleaseSegmentsCompareNumericallyNotAsText) {
  EXPECT_LT(V("1.9"), V("1.10"));
  EXPECT_LT(V("9.9.0"), V("9.14.0"));
  EXPECT_LT(V("0.3.9"), V("0.3.21"));
  EXPECT_LT(V("1.2"), V("1.2.1"));
  EXPECT_GT(V("2"), V("1.99.99"));
}

TEST(VersionTest, TrailingZeroSegmentsDoNotMatter) {
  EXPECT_EQ(V("1.0"), V("1.0.0"));
  EXPECT_EQ(V("1"), V("1.0.0.0"));
  EXPECT_EQ(V("2.28"), V("2.28.0"));
  EXPECT_NE(V("1.0.1"), V("1.0"));
}

TEST(VersionTest, LeadingVIsIgnored) {
  EXPECT_EQ(V("v1.2.3"), V("1.2.3"));
  EXPECT_EQ(V("V2.0"), V("2"));
  EXPECT_EQ(V("v1.2.3").release(), (std::vector<long long>{1, 2, 3}));
}

TEST(VersionTest, VendorFormsParse) {
  EXPECT_EQ(V("13.0.88").release(), (std::vector<long long>{13, 0, 88}));
  EXPECT_GT(V("13.0.88"), V("13.0.9"));
  EXPECT_EQ(V("9.14.0").release(), (std::vector<long long>{9, 14, 0}));
  EXPECT_EQ(V("1.3.0rc20").release(), (std::vector<long long>{1, 3, 0}));
  EXPECT_LT(V("1.3.0rc20"), V("1.3.0"));
  EXPECT_GT(V("1.3.0rc20"), V("1.2.9"));
}

TEST(VersionTest, DebianRevisionIsAPostRelease) {
  EXPECT_EQ(V("2.28.3-1").release(), (std::vector<long long>{2, 28, 3}));
  EXPECT_GT(V("2.28.3-1"), V("2.28.3"));
  EXPECT_LT(V("2.28.3-1"), V("2.28.3-2"));
  EXPECT_LT(V("2.28.3-1"), V("2.28.4"));
  EXPECT_EQ(V("2.28.3-1"), V("2.28.3.post1"));
}

TEST(VersionTest, SpellingsOfPreReleasesAreEquivalent) {
  EXPECT_EQ(V("1.0alpha1"), V("1.0a1"));
  EXPECT_EQ(V("1.0beta2"), V("1.0b2"));
  EXPECT_EQ(V("1.0c1"), V("1.0rc1"));
  EXPECT_EQ(V("1.0-rc1"), V("1.0rc1"));
  EXPECT_EQ(V("1.0.rc.1"), V("1.0rc1"));
  EXPECT_EQ(V("1.0RC1"), V("1.0rc1"));
  EXPECT_EQ(V("1.0a"), V("1.0a0"));
}

TEST(VersionTest, LocalLabelsSortAfterThePublicVersion) {
  EXPECT_GT(V("1.0+cu128"), V("1.0"));
  EXPECT_LT(V("1.0+cu128"), V("1.0.post1"));
  EXPECT_NE(V("1.0+abc"), V("1.0+abd"));
}

TEST(VersionTest, ToStringKeepsTheOriginalText) {
  EXPECT_EQ(V("v13.0.88").ToString(), "v13.0.88");
  EXPECT_EQ(V("2.28.3-1").ToString(), "2.28.3-1");
}

TEST(VersionTest, InvalidTextThrowsNamingIt) {
  for (const std::string bad : {"", "abc", "v", "1.0xyz", "1.0+", "x1.0", ".1", "1.0 beta"}) {
    std::string msg = ThrownMessage<Error>([&] { Version::Parse(bad); });
    EXPECT_TRUE(HasText(msg, "'" + bad + "' is not a version")) << bad;
    EXPECT_FALSE(Version::TryParse(bad).has_value()) << bad;
  }
}

TEST(VersionTest, TryParseAcceptsValidText) {
  auto v = Version::TryParse("12.4.127");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->release(), (std::vector<long long>{12, 4, 127}));
}

}  // namespace
}  // namespace servecast
