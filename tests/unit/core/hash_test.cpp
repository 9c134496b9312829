#include "core/hash.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace servecast {
namespace {

// FIPS 180-2 / NIST test vectors.
TEST(Sha256Test, EmptyString) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256Test, Abc) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Test, Nist448BitMessage) {
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256Test, Nist896BitMessage) {
  EXPECT_EQ(
      Sha256Hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmn"
                "opqrstnopqrstu"),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256Test, OneMillionA) {
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, OneMillionAFedInUnevenChunks) {
  Sha256 h;
  std::size_t fed = 0, step = 1;
  while (fed < 1000000) {
    std::size_t n = std::min<std::size_t>(step, 1000000 - fed);
    h.Update(std::string(n, 'a'));
    fed += n;
    step = step * 3 % 1009 + 1;  // sizes that straddle the 64-byte block edge
  }
  EXPECT_EQ(h.HexDigest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Lengths around the padding edge: 55 bytes fits the length in the same block,
// 56 does not, 64 is one full block.
TEST(Sha256Test, PaddingBoundaries) {
  EXPECT_EQ(Sha256Hex(std::string(55, 'a')), "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(Sha256Hex(std::string(56, 'a')), "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(Sha256Hex(std::string(64, 'a')), "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST(Sha256Test, IncrementalMatchesOneShotAndHandlesBinary) {
  std::string data;
  for (int i = 0; i < 300; ++i) data += static_cast<char>(i * 7 % 256);  // includes NUL bytes
  for (std::size_t split : {0, 1, 55, 63, 64, 65, 128, 299, 300}) {
    Sha256 h;
    h.Update(std::string_view(data).substr(0, split));
    h.Update(std::string_view(data).substr(split));
    EXPECT_EQ(h.HexDigest(), Sha256Hex(data)) << "split at " << split;
  }
  EXPECT_NE(Sha256Hex(data), Sha256Hex(data.substr(0, 299)));
}

// Published FNV-1a 64-bit values (offset basis 0xcbf29ce484222325).
TEST(Fnv1a64Test, KnownValues) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

TEST(Fnv1a64Test, StableAndSensitiveToEveryByte) {
  EXPECT_EQ(Fnv1a64("gemm"), Fnv1a64(std::string("gemm")));
  EXPECT_NE(Fnv1a64("gemm"), Fnv1a64("gemn"));
  EXPECT_NE(Fnv1a64("ab"), Fnv1a64("ba"));
}

// Reference outputs of splitmix64 (Steele, Lea, Flood 2014) for seed 0.
TEST(SplitMix64Test, KnownSequence) {
  SplitMix64 rng(0);
  EXPECT_EQ(rng.Next(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(rng.Next(), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(rng.Next(), 0x06c45d188009454fULL);
}

TEST(SplitMix64Test, SameSeedSameSequenceOtherSeedOtherSequence) {
  SplitMix64 a(1234567), b(1234567), c(1234568);
  std::vector<std::uint64_t> sa, sb, sc;
  for (int i = 0; i < 100; ++i) {
    sa.push_back(a.Next());
    sb.push_back(b.Next());
    sc.push_back(c.Next());
  }
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, sc);
  EXPECT_EQ(sa[0], 0x599ed017fb08fc85ULL);
}

TEST(SplitMix64Test, BelowStaysUnderTheBoundAndReachesEveryValue) {
  SplitMix64 rng(42);
  for (std::uint64_t bound : {2ULL, 3ULL, 7ULL, 10ULL, 1000ULL}) {
    std::set<std::uint64_t> seen;
    for (int i = 0; i < 20000; ++i) {
      std::uint64_t x = rng.Below(bound);
      ASSERT_LT(x, bound);
      seen.insert(x);
    }
    if (bound <= 10)
      EXPECT_EQ(seen.size(), bound) << "bound " << bound;
    else
      EXPECT_GT(seen.size(), bound * 9 / 10) << "bound " << bound;
  }
}

TEST(SplitMix64Test, BelowOfZeroOrOneIsZero) {
  SplitMix64 rng(7);
  EXPECT_EQ(rng.Below(0), 0u);
  EXPECT_EQ(rng.Below(1), 0u);
}

TEST(SplitMix64Test, BelowIsDeterministic) {
  SplitMix64 a(99), b(99);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(a.Below(37), b.Below(37));
}

TEST(SplitMix64Test, BelowLargeBoundIsRoughlyUniform) {
  // A bound just over 2^63 rejects about half the draws; results must still be uniform:
  // about half of them fall in the upper half.
  const std::uint64_t bound = (1ULL << 63) + 12345;
  SplitMix64 rng(5);
  int upper = 0;
  const int n = 4000;
  for (int i = 0; i < n; ++i) {
    std::uint64_t x = rng.Below(bound);
    ASSERT_LT(x, bound);
    if (x >= bound / 2) ++upper;
  }
  EXPECT_GT(upper, n * 45 / 100);
  EXPECT_LT(upper, n * 55 / 100);
}

}  // namespace
}  // namespace servecast
