#include "core/thrift_compact.h"

#include <cstring>

#include "core/error.h"

namespace servecast {
namespace {

constexpr int kMaxDepth = 64;

[[noreturn]] void Bad(const std::string& what) {
  throw DataError("bad thrift metadata: " + what);
}

bool IsInt(ThriftType t) {
  return t == ThriftType::kByte || t == ThriftType::kI16 || t == ThriftType::kI32 || t == ThriftType::kI64;
}

}  // namespace

void ThriftReader::Need(std::size_t n) const {
  if (n > bytes_.size() - pos_) {
    Bad("truncated at byte " + std::to_string(pos_) + " (need " + std::to_string(n) + " more of " +
        std::to_string(bytes_.size()) + ")");
  }
}

std::uint8_t ThriftReader::Byte() {
  Need(1);
  return static_cast<std::uint8_t>(bytes_[pos_++]);
}

std::uint64_t ThriftReader::Varint() {
  std::uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    std::uint8_t b = Byte();
    v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return v;
  }
  Bad("varint longer than 10 bytes at byte " + std::to_string(pos_));
}

std::int64_t ThriftReader::Zigzag() {
  std::uint64_t u = Varint();
  return static_cast<std::int64_t>(u >> 1) ^ -static_cast<std::int64_t>(u & 1);
}

void ThriftReader::BeginStruct() {
  if (last_ids_.size() >= kMaxDepth) Bad("structs nested deeper than " + std::to_string(kMaxDepth));
  last_ids_.push_back(last_id_);
  last_id_ = 0;
}

void ThriftReader::EndStruct() {
  last_id_ = last_ids_.empty() ? 0 : last_ids_.back();
  if (!last_ids_.empty()) last_ids_.pop_back();
}

bool ThriftReader::ReadField(std::int16_t& id, ThriftType& type) {
  std::uint8_t b = Byte();
  auto t = b & 0x0f;
  if (t == 0) return false;
  if (t > static_cast<int>(ThriftType::kUuid)) Bad("unknown field type " + std::to_string(t));
  type = static_cast<ThriftType>(t);
  int delta = b >> 4;
  if (delta != 0) {
    id = static_cast<std::int16_t>(last_id_ + delta);
  } else {
    std::int64_t v = Zigzag();
    if (v < INT16_MIN || v > INT16_MAX) Bad("field id out of range");
    id = static_cast<std::int16_t>(v);
  }
  last_id_ = id;
  return true;
}

void ThriftReader::ExpectInt(ThriftType type, const char* what) {
  if (!IsInt(type)) Bad(std::string(what) + " is not an integer (type " + std::to_string(static_cast<int>(type)) + ")");
}

void ThriftReader::Expect(ThriftType type, ThriftType expected, const char* what) {
  if (type != expected) {
    Bad(std::string(what) + " has type " + std::to_string(static_cast<int>(type)) + ", expected " +
        std::to_string(static_cast<int>(expected)));
  }
}

std::int64_t ThriftReader::ReadInt(ThriftType type) {
  ExpectInt(type, "field");
  if (type == ThriftType::kByte) return static_cast<std::int8_t>(Byte());
  return Zigzag();
}

std::int32_t ThriftReader::ReadI32(ThriftType type) {
  std::int64_t v = ReadInt(type);
  if (v < INT32_MIN || v > INT32_MAX) Bad("i32 value " + std::to_string(v) + " out of range");
  return static_cast<std::int32_t>(v);
}

bool ThriftReader::ReadBool(ThriftType type) {
  if (type == ThriftType::kBoolTrue) return true;
  if (type == ThriftType::kBoolFalse) return false;
  Bad("field is not a boolean");
}

double ThriftReader::ReadDouble() {
  Need(8);
  double d;
  std::memcpy(&d, bytes_.data() + pos_, 8);
  pos_ += 8;
  return d;
}

std::string_view ThriftReader::ReadBinary() {
  std::uint64_t n = Varint();
  if (n > bytes_.size() - pos_) Bad("string of " + std::to_string(n) + " bytes runs past the end");
  std::string_view v = bytes_.substr(pos_, n);
  pos_ += n;
  return v;
}

void ThriftReader::ReadListHeader(ThriftType& element_type, std::uint32_t& size) {
  std::uint8_t b = Byte();
  std::uint64_t n = b >> 4;
  if (n == 15) n = Varint();
  int t = b & 0x0f;
  if (t == 0 || t > static_cast<int>(ThriftType::kUuid)) Bad("unknown list element type " + std::to_string(t));
  // Every element takes at least one byte, so a larger count is certainly truncated.
  if (n > bytes_.size() - pos_) Bad("list of " + std::to_string(n) + " elements runs past the end");
  element_type = static_cast<ThriftType>(t);
  size = static_cast<std::uint32_t>(n);
}

void ThriftReader::Skip(ThriftType type, int depth) {
  if (depth > kMaxDepth) Bad("values nested deeper than " + std::to_string(kMaxDepth));
  switch (type) {
    case ThriftType::kBoolTrue:
    case ThriftType::kBoolFalse:
      return;  // a field boolean carries its value in the type
    case ThriftType::kByte:
      Byte();
      return;
    case ThriftType::kI16:
    case ThriftType::kI32:
    case ThriftType::kI64:
      Varint();
      return;
    case ThriftType::kDouble:
      Need(8);
      pos_ += 8;
      return;
    case ThriftType::kUuid:
      Need(16);
      pos_ += 16;
      return;
    case ThriftType::kBinary:
      ReadBinary();
      return;
    case ThriftType::kList:
    case ThriftType::kSet: {
      ThriftType et;
      std::uint32_t n;
      ReadListHeader(et, n);
      for (std::uint32_t i = 0; i < n; ++i) {
        // Booleans inside containers take one byte each.
        if (et == ThriftType::kBoolTrue || et == ThriftType::kBoolFalse) {
          Byte();
        } else {
          Skip(et, depth + 1);
        }
      }
      return;
    }
    case ThriftType::kMap: {
      std::uint64_t n = Varint();
      if (n == 0) return;
      if (n > bytes_.size() - pos_) Bad("map of " + std::to_string(n) + " entries runs past the end");
      std::uint8_t kv = Byte();
      int kt = kv >> 4, vt = kv & 0x0f;
      int max_type = static_cast<int>(ThriftType::kUuid);
      if (kt == 0 || vt == 0 || kt > max_type || vt > max_type) Bad("unknown map key/value type");
      for (std::uint64_t i = 0; i < n; ++i) {
        for (int t : {kt, vt}) {
          auto tt = static_cast<ThriftType>(t);
          if (tt == ThriftType::kBoolTrue || tt == ThriftType::kBoolFalse) {
            Byte();
          } else {
            Skip(tt, depth + 1);
          }
        }
      }
      return;
    }
    case ThriftType::kStruct: {
      BeginStruct();
      std::int16_t id;
      ThriftType ft;
      while (ReadField(id, ft)) Skip(ft, depth + 1);
      EndStruct();
      return;
    }
    case ThriftType::kStop:
      break;
  }
  Bad("cannot skip a value of type " + std::to_string(static_cast<int>(type)));
}

// ---------------------------------------------------------------------------------

void ThriftWriter::Varint(std::uint64_t v) {
  while (v >= 0x80) {
    out_.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out_.push_back(static_cast<char>(v));
}

void ThriftWriter::Zigzag(std::int64_t v) {
  Varint((static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63));
}

void ThriftWriter::FieldHeader(std::int16_t id, ThriftType type) {
  int delta = id - last_id_;
  if (delta > 0 && delta <= 15) {
    out_.push_back(static_cast<char>((delta << 4) | static_cast<int>(type)));
  } else {
    out_.push_back(static_cast<char>(type));
    Zigzag(id);
  }
  last_id_ = id;
}

void ThriftWriter::BeginStruct() {
  last_ids_.push_back(last_id_);
  last_id_ = 0;
}

void ThriftWriter::EndStruct() {
  out_.push_back(0);
  last_id_ = last_ids_.empty() ? 0 : last_ids_.back();
  if (!last_ids_.empty()) last_ids_.pop_back();
}

void ThriftWriter::FieldStruct(std::int16_t id) {
  FieldHeader(id, ThriftType::kStruct);
}

void ThriftWriter::FieldI32(std::int16_t id, std::int32_t v) {
  FieldHeader(id, ThriftType::kI32);
  Zigzag(v);
}

void ThriftWriter::FieldI64(std::int16_t id, std::int64_t v) {
  FieldHeader(id, ThriftType::kI64);
  Zigzag(v);
}

void ThriftWriter::FieldBool(std::int16_t id, bool v) {
  FieldHeader(id, v ? ThriftType::kBoolTrue : ThriftType::kBoolFalse);
}

void ThriftWriter::FieldBinary(std::int16_t id, std::string_view v) {
  FieldHeader(id, ThriftType::kBinary);
  Binary(v);
}

void ThriftWriter::FieldList(std::int16_t id, ThriftType element_type, std::uint32_t size) {
  FieldHeader(id, ThriftType::kList);
  if (size < 15) {
    out_.push_back(static_cast<char>((size << 4) | static_cast<int>(element_type)));
  } else {
    out_.push_back(static_cast<char>(0xf0 | static_cast<int>(element_type)));
    Varint(size);
  }
}

void ThriftWriter::I32(std::int32_t v) {
  Zigzag(v);
}

void ThriftWriter::Binary(std::string_view v) {
  Varint(v.size());
  out_.append(v);
}

}  // namespace servecast
