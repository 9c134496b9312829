#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace servecast {

// SHA-256 of the bytes, as 64 lowercase hex digits.
std::string Sha256Hex(std::string_view data);

// Incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  void Update(std::string_view data);
  std::string HexDigest();  // finishes; the object must not be updated afterwards

 private:
  void Block(const unsigned char* p);
  std::uint32_t h_[8];
  unsigned char buf_[64];
  std::size_t buf_len_ = 0;
  std::uint64_t total_ = 0;
};

// 64-bit FNV-1a, for seeding and cheap stable hashing (not for provenance).
std::uint64_t Fnv1a64(std::string_view data);

// A small deterministic generator (splitmix64): the same seed gives the same
// sequence on every platform, unlike std:: distributions.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t Next();
  // Uniform in [0, bound) without modulo bias.
  std::uint64_t Below(std::uint64_t bound);

 private:
  std::uint64_t state_;
};

}  // namespace servecast
