#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace servecast {

// The Thrift compact protocol, as much as Parquet metadata needs: a bounds-checked
// reader that can skip any value generically, and a writer for the subset we emit.
// Every read past the end or malformed value throws DataError.

enum class ThriftType : std::uint8_t {
  kStop = 0,
  kBoolTrue = 1,
  kBoolFalse = 2,
  kByte = 3,
  kI16 = 4,
  kI32 = 5,
  kI64 = 6,
  kDouble = 7,
  kBinary = 8,
  kList = 9,
  kSet = 10,
  kMap = 11,
  kStruct = 12,
  kUuid = 13,
};

class ThriftReader {
 public:
  explicit ThriftReader(std::string_view bytes) : bytes_(bytes) {}

  std::size_t position() const { return pos_; }

  // Struct framing: call BeginStruct, then ReadField until it returns false (the
  // STOP field), then EndStruct.
  void BeginStruct();
  void EndStruct();
  // Reads the next field header; false at STOP. For booleans the value is in the type
  // (kBoolTrue / kBoolFalse).
  bool ReadField(std::int16_t& id, ThriftType& type);

  // Values. ReadInt accepts any integer type (byte, i16, i32, i64).
  std::int64_t ReadInt(ThriftType type);
  std::int32_t ReadI32(ThriftType type);
  bool ReadBool(ThriftType type);  // field booleans (type carries the value)
  double ReadDouble();
  std::string_view ReadBinary();
  // List or set header: element type and count.
  void ReadListHeader(ThriftType& element_type, std::uint32_t& size);

  // Skips a value of any type, including nested structs, lists, sets and maps.
  void Skip(ThriftType type, int depth = 0);

  // Throws DataError unless `type` is one of the integer types / is `expected`.
  static void ExpectInt(ThriftType type, const char* what);
  static void Expect(ThriftType type, ThriftType expected, const char* what);

 private:
  std::uint8_t Byte();
  std::uint64_t Varint();
  std::int64_t Zigzag();
  void Need(std::size_t n) const;

  std::string_view bytes_;
  std::size_t pos_ = 0;
  std::vector<std::int16_t> last_ids_;
  std::int16_t last_id_ = 0;
};

class ThriftWriter {
 public:
  const std::string& bytes() const { return out_; }

  void BeginStruct();                 // for a struct value (top level or list element)
  void EndStruct();                   // writes STOP
  void FieldStruct(std::int16_t id);  // header of a struct field; follow with BeginStruct
  void FieldI32(std::int16_t id, std::int32_t v);
  void FieldI64(std::int16_t id, std::int64_t v);
  void FieldBool(std::int16_t id, bool v);
  void FieldBinary(std::int16_t id, std::string_view v);
  void FieldList(std::int16_t id, ThriftType element_type, std::uint32_t size);

  // List elements.
  void I32(std::int32_t v);
  void Binary(std::string_view v);

 private:
  void FieldHeader(std::int16_t id, ThriftType type);
  void Varint(std::uint64_t v);
  void Zigzag(std::int64_t v);

  std::string out_;
  std::vector<std::int16_t> last_ids_;
  std::int16_t last_id_ = 0;
};

}  // namespace servecast
