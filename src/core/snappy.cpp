#include "core/snappy.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace servecast {
namespace {

constexpr std::size_t kMaxOffset = 65535;
constexpr std::size_t kMaxCopyLength = 64;

void PutVarint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void EmitLiteral(std::string& out, std::string_view bytes) {
  if (bytes.empty()) return;
  std::size_t n = bytes.size() - 1;
  if (n < 60) {
    out.push_back(static_cast<char>(n << 2));
  } else {
    int count = n < (1u << 8) ? 1 : n < (1u << 16) ? 2 : n < (1u << 24) ? 3 : 4;
    out.push_back(static_cast<char>((59 + count) << 2));
    for (int i = 0; i < count; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  }
  out.append(bytes);
}

// One copy element of 4..64 bytes at an offset of 1..65535.
void EmitCopy(std::string& out, std::size_t offset, std::size_t length) {
  if (length <= 11 && offset < 2048) {
    out.push_back(static_cast<char>(1 | ((length - 4) << 2) | ((offset >> 8) << 5)));
    out.push_back(static_cast<char>(offset & 0xff));
  } else {
    out.push_back(static_cast<char>(2 | ((length - 1) << 2)));
    out.push_back(static_cast<char>(offset & 0xff));
    out.push_back(static_cast<char>((offset >> 8) & 0xff));
  }
}

std::uint32_t Load32(const char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

[[noreturn]] void Corrupt(const std::string& what) {
  throw DataError("corrupt snappy stream: " + what);
}

}  // namespace

std::string SnappyCompress(std::string_view input) {
  std::string out;
  out.reserve(input.size() + input.size() / 6 + 16);
  PutVarint(out, input.size());
  const std::size_t n = input.size();
  const char* data = input.data();
  constexpr int kHashBits = 14;
  std::vector<std::int64_t> table(std::size_t{1} << kHashBits, -1);
  auto hash = [](std::uint32_t v) { return (v * 0x1e35a7bdu) >> (32 - kHashBits); };
  std::size_t literal_start = 0;
  std::size_t i = 0;
  while (n >= 4 && i + 4 <= n) {
    std::uint32_t cur = Load32(data + i);
    std::uint32_t h = hash(cur);
    std::int64_t cand = table[h];
    table[h] = static_cast<std::int64_t>(i);
    if (cand >= 0 && i - static_cast<std::size_t>(cand) <= kMaxOffset && Load32(data + cand) == cur) {
      std::size_t offset = i - static_cast<std::size_t>(cand);
      std::size_t len = 4;
      while (i + len < n && data[cand + len] == data[i + len]) ++len;
      EmitLiteral(out, input.substr(literal_start, i - literal_start));
      std::size_t left = len;
      while (left > 0) {
        // Keep every piece at least 4 bytes long.
        std::size_t piece = left > kMaxCopyLength ? (left - kMaxCopyLength < 4 ? left - 4 : kMaxCopyLength) : left;
        EmitCopy(out, offset, piece);
        left -= piece;
      }
      i += len;
      literal_start = i;
    } else {
      ++i;
    }
  }
  EmitLiteral(out, input.substr(literal_start));
  return out;
}

std::string SnappyUncompress(std::string_view input, std::size_t max_output_bytes) {
  std::size_t pos = 0;
  std::uint64_t expected = 0;
  for (int shift = 0;; shift += 7) {
    if (pos >= input.size()) Corrupt("truncated length preamble");
    if (shift > 63) Corrupt("length preamble too long");
    auto b = static_cast<std::uint8_t>(input[pos++]);
    expected |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) break;
  }
  if (expected > max_output_bytes) {
    Corrupt("announced length " + std::to_string(expected) + " exceeds the limit " + std::to_string(max_output_bytes));
  }
  std::string out;
  out.reserve(expected);
  while (pos < input.size()) {
    auto tag = static_cast<std::uint8_t>(input[pos++]);
    int kind = tag & 3;
    if (kind == 0) {
      std::size_t len = tag >> 2;
      if (len >= 60) {
        std::size_t count = len - 59;
        if (pos + count > input.size()) Corrupt("truncated literal length");
        len = 0;
        for (std::size_t k = 0; k < count; ++k)
          len |= static_cast<std::size_t>(static_cast<std::uint8_t>(input[pos + k])) << (8 * k);
        pos += count;
      }
      len += 1;
      if (len > input.size() - pos) Corrupt("literal runs past the end of the input");
      if (out.size() + len > expected)
        Corrupt("output longer than the announced " + std::to_string(expected) + " bytes");
      out.append(input.substr(pos, len));
      pos += len;
      continue;
    }
    std::size_t len = 0;
    std::size_t offset = 0;
    if (kind == 1) {
      if (pos + 1 > input.size()) Corrupt("truncated copy");
      len = 4 + ((tag >> 2) & 7);
      offset = (static_cast<std::size_t>(tag >> 5) << 8) | static_cast<std::uint8_t>(input[pos]);
      pos += 1;
    } else {
      std::size_t bytes = kind == 2 ? 2 : 4;
      if (pos + bytes > input.size()) Corrupt("truncated copy");
      len = (tag >> 2) + 1;
      for (std::size_t k = 0; k < bytes; ++k)
        offset |= static_cast<std::size_t>(static_cast<std::uint8_t>(input[pos + k])) << (8 * k);
      pos += bytes;
    }
    if (offset == 0 || offset > out.size()) Corrupt("copy offset " + std::to_string(offset) + " outside the output");
    if (out.size() + len > expected) Corrupt("output longer than the announced " + std::to_string(expected) + " bytes");
    std::size_t from = out.size() - offset;
    for (std::size_t k = 0; k < len; ++k) out.push_back(out[from + k]);
  }
  if (out.size() != expected) {
    Corrupt("output is " + std::to_string(out.size()) + " bytes, the preamble announced " + std::to_string(expected));
  }
  return out;
}

}  // namespace servecast
