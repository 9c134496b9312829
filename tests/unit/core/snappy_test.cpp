#include "core/snappy.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "core/error.h"
#include "core_test_util.h"

namespace servecast {
namespace {

using testing::HasText;
using testing::ThrownMessage;

std::string RandomBytes(std::size_t n, unsigned seed, int alphabet) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() % alphabet);
  return s;
}

TEST(SnappyTest, RoundTripsRandomAndRepetitiveData) {
  std::vector<std::string> inputs = {"", "a", "abcd", "abcdabcdabcdabcdabcd", std::string(100000, 'z')};
  for (std::size_t n : {1u, 7u, 60u, 61u, 300u, 70000u, 300000u}) {
    inputs.push_back(RandomBytes(n, static_cast<unsigned>(n), 256));
    inputs.push_back(RandomBytes(n, static_cast<unsigned>(n), 3));
  }
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "row " + std::to_string(i % 37) + ",bfloat16,4096,";
  inputs.push_back(text);
  for (const std::string& in : inputs) {
    std::string packed = SnappyCompress(in);
    EXPECT_EQ(SnappyUncompress(packed), in) << in.size();
  }
  // Repetitive data must actually compress.
  EXPECT_LT(SnappyCompress(std::string(100000, 'z')).size(), 5000u);
  EXPECT_LT(SnappyCompress(text).size(), text.size() / 5);
}

TEST(SnappyTest, DecodesHandMadeStreams) {
  // Literal "abc".
  EXPECT_EQ(SnappyUncompress(std::string("\x03\x08"
                                         "abc",
                                         5)),
            "abc");
  // Literal "ab" then a 1-byte-offset copy of 6 bytes at offset 2 (overlapping).
  EXPECT_EQ(SnappyUncompress(std::string("\x08\x04"
                                         "ab"
                                         "\x09\x02",
                                         6)),
            "abababab");
  // Literal "xyz" then a 2-byte-offset copy of 5 bytes at offset 3.
  EXPECT_EQ(SnappyUncompress(std::string("\x08\x08"
                                         "xyz"
                                         "\x12\x03\x00",
                                         8)),
            "xyzxyzxy");
  // A 4-byte-offset copy of 4 bytes at offset 1.
  EXPECT_EQ(SnappyUncompress(std::string("\x05\x00"
                                         "q"
                                         "\x0f\x01\x00\x00\x00",
                                         8)),
            "qqqqq");
  // A literal of 61 bytes with a one-byte length (tag 60).
  std::string long_literal(61, 'L');
  EXPECT_EQ(SnappyUncompress(std::string("\x3d\xf0\x3c", 3) + long_literal), long_literal);
  EXPECT_EQ(SnappyUncompress(std::string("\x00", 1)), "");
}

TEST(SnappyTest, CorruptStreamsAreErrors) {
  auto msg = [](std::string s) { return ThrownMessage<DataError>([&] { SnappyUncompress(s); }); };
  EXPECT_TRUE(HasText(msg(""), "truncated length preamble"));
  EXPECT_TRUE(HasText(msg(std::string("\x80\x80", 2)), "truncated length preamble"));
  EXPECT_TRUE(HasText(msg(std::string("\x05\x08"
                                      "ab",
                                      4)),
                      "literal runs past the end"));
  EXPECT_TRUE(HasText(msg(std::string("\x04\x09\x01", 3)), "outside the output"));  // copy before any output
  EXPECT_TRUE(HasText(msg(std::string("\x08\x04"
                                      "ab"
                                      "\x09\x00",
                                      6)),
                      "outside the output"));  // offset 0
  EXPECT_TRUE(HasText(msg(std::string("\x04\x04"
                                      "ab",
                                      4)),
                      "announced"));  // shorter than announced
  EXPECT_TRUE(HasText(msg(std::string("\x01\x04"
                                      "ab",
                                      4)),
                      "longer than the announced"));
  EXPECT_TRUE(HasText(msg(std::string("\x08\x04"
                                      "ab"
                                      "\x0a",
                                      5)),
                      "truncated copy"));
  EXPECT_TRUE(HasText(ThrownMessage<DataError>([] { SnappyUncompress(std::string("\xff\xff\xff\x7f", 4), 1000); }),
                      "exceeds the limit"));
  // Random garbage never crashes.
  std::mt19937 rng(3);
  std::string good = SnappyCompress(RandomBytes(2000, 1, 4));
  for (int i = 0; i < 2000; ++i) {
    std::string bad = good;
    bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
    try {
      SnappyUncompress(bad);
    } catch (const DataError&) {
    }
  }
}

}  // namespace
}  // namespace servecast
