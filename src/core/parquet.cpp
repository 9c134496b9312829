#include "core/parquet.h"

#include <zstd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/fs.h"
#include "core/snappy.h"
#include "core/thrift_compact.h"

namespace servecast {
namespace {

// Enumerations of the Parquet format (parquet.thrift).
enum PhysicalType {
  kBoolean = 0,
  kInt32 = 1,
  kInt64 = 2,
  kInt96 = 3,
  kFloat = 4,
  kDouble = 5,
  kByteArray = 6,
  kFixed = 7
};
enum Repetition { kRequired = 0, kOptional = 1, kRepeated = 2 };
enum Codec { kCodecUncompressed = 0, kCodecSnappy = 1, kCodecZstd = 6 };
enum Encoding { kPlain = 0, kPlainDictionary = 2, kRle = 3, kBitPacked = 4, kRleDictionary = 8 };
enum PageType { kDataPage = 0, kIndexPage = 1, kDictionaryPage = 2, kDataPageV2 = 3 };
constexpr int kConvertedUtf8 = 0;
constexpr int kConvertedDecimal = 5;

// Pages larger than this are refused rather than allocated.
constexpr std::int64_t kMaxPageBytes = std::int64_t{1} << 31;

[[noreturn]] void Fail(const std::string& what) {
  throw DataError(what);
}

const char* PhysicalTypeName(int t) {
  static const char* kNames[] = {"BOOLEAN", "INT32",  "INT64",      "INT96",
                                 "FLOAT",   "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
  return t >= 0 && t < 8 ? kNames[t] : "unknown";
}

std::string CodecName(int c) {
  static const char* kNames[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};
  return c >= 0 && c < 8 ? kNames[c] : "codec " + std::to_string(c);
}

std::string EncodingName(int e) {
  static const char* kNames[] = {"PLAIN",          "GROUP_VAR_INT",       "PLAIN_DICTIONARY",        "RLE",
                                 "BIT_PACKED",     "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
                                 "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
  return e >= 0 && e < 10 ? kNames[e] : "encoding " + std::to_string(e);
}

// ----------------------------------------------------------------- metadata

struct SchemaElement {
  int type = -1;
  int repetition = kRequired;
  std::string name;
  int num_children = 0;
  int converted_type = -1;
  bool logical_null = false;
  bool logical_decimal = false;
};

struct ColumnMeta {
  int type = -1;
  std::vector<std::string> path;
  int codec = 0;
  std::int64_t num_values = 0;
  std::int64_t total_compressed_size = 0;
  std::int64_t data_page_offset = -1;
  std::int64_t dictionary_page_offset = -1;
  // Statistics.min_value / max_value (plain-encoded bytes), when written, and
  // null_count (-1 when absent: nulls are read as "" but statistics ignore them).
  bool has_min = false, has_max = false;
  std::string min_value, max_value;
  std::int64_t null_count = -1;
};

struct ColumnChunk {
  bool has_file_path = false;
  bool has_meta = false;
  ColumnMeta meta;
};

struct RowGroup {
  std::vector<ColumnChunk> columns;
  std::int64_t num_rows = -1;
};

struct FileMeta {
  std::vector<SchemaElement> schema;
  std::int64_t num_rows = -1;
  std::vector<RowGroup> row_groups;
  // FileMetaData.column_orders: per leaf column, whether it is TYPE_ORDER (the
  // only order the format defines). Without it min_value / max_value are
  // undefined and not used.
  std::vector<bool> type_order;
};

struct PageHeader {
  int type = -1;
  std::int32_t uncompressed_size = -1;
  std::int32_t compressed_size = -1;
  bool has_v1 = false, has_v2 = false, has_dict = false;
  // v1, v2 and dictionary headers share these.
  std::int32_t num_values = 0;
  int encoding = 0;
  int def_encoding = kRle;
  // v2 only.
  std::int32_t num_nulls = 0;
  std::int32_t def_length = 0;
  std::int32_t rep_length = 0;
  bool is_compressed = true;
};

// Reads a list of structs, calling `read_one` for each element.
template <typename F>
void ReadStructList(ThriftReader& r, ThriftType type, const char* what, F read_one) {
  ThriftReader::Expect(type, ThriftType::kList, what);
  ThriftType et;
  std::uint32_t n;
  r.ReadListHeader(et, n);
  ThriftReader::Expect(et, ThriftType::kStruct, what);
  for (std::uint32_t i = 0; i < n; ++i) read_one();
}

void ReadLogicalType(ThriftReader& r, SchemaElement& e) {
  r.BeginStruct();
  std::int16_t id;
  ThriftType t;
  while (r.ReadField(id, t)) {
    if (id == 11) e.logical_null = true;    // UNKNOWN: the null type
    if (id == 5) e.logical_decimal = true;  // DECIMAL
    r.Skip(t);
  }
  r.EndStruct();
}

SchemaElement ReadSchemaElement(ThriftReader& r) {
  SchemaElement e;
  bool has_name = false;
  r.BeginStruct();
  std::int16_t id;
  ThriftType t;
  while (r.ReadField(id, t)) {
    switch (id) {
      case 1:
        e.type = r.ReadI32(t);
        break;
      case 3:
        e.repetition = r.ReadI32(t);
        break;
      case 4:
        ThriftReader::Expect(t, ThriftType::kBinary, "SchemaElement.name");
        e.name = std::string(r.ReadBinary());
        has_name = true;
        break;
      case 5:
        e.num_children = r.ReadI32(t);
        break;
      case 6:
        e.converted_type = r.ReadI32(t);
        break;
      case 10:
        ThriftReader::Expect(t, ThriftType::kStruct, "SchemaElement.logicalType");
        ReadLogicalType(r, e);
        break;
      default:
        r.Skip(t);
    }
  }
  r.EndStruct();
  if (!has_name) Fail("schema element without a name");
  return e;
}

ColumnMeta ReadColumnMeta(ThriftReader& r) {
  ColumnMeta m;
  r.BeginStruct();
  std::int16_t id;
  ThriftType t;
  while (r.ReadField(id, t)) {
    switch (id) {
      case 1:
        m.type = r.ReadI32(t);
        break;
      case 3: {
        ThriftReader::Expect(t, ThriftType::kList, "ColumnMetaData.path_in_schema");
        ThriftType et;
        std::uint32_t n;
        r.ReadListHeader(et, n);
        ThriftReader::Expect(et, ThriftType::kBinary, "ColumnMetaData.path_in_schema");
        for (std::uint32_t i = 0; i < n; ++i) m.path.emplace_back(r.ReadBinary());
        break;
      }
      case 4:
        m.codec = r.ReadI32(t);
        break;
      case 5:
        m.num_values = r.ReadInt(t);
        break;
      case 7:
        m.total_compressed_size = r.ReadInt(t);
        break;
      case 9:
        m.data_page_offset = r.ReadInt(t);
        break;
      case 11:
        m.dictionary_page_offset = r.ReadInt(t);
        break;
      case 12: {
        // Statistics: only min_value (6) and max_value (5), whose order is the
        // column's own; the deprecated min (2) / max (1) compared byte arrays as
        // signed bytes in old writers and are not used.
        ThriftReader::Expect(t, ThriftType::kStruct, "ColumnMetaData.statistics");
        r.BeginStruct();
        std::int16_t sid;
        ThriftType st;
        while (r.ReadField(sid, st)) {
          if (sid == 5 && st == ThriftType::kBinary) {
            m.max_value = std::string(r.ReadBinary());
            m.has_max = true;
          } else if (sid == 6 && st == ThriftType::kBinary) {
            m.min_value = std::string(r.ReadBinary());
            m.has_min = true;
          } else if (sid == 3 && (st == ThriftType::kI64 || st == ThriftType::kI32)) {
            m.null_count = r.ReadInt(st);
          } else {
            r.Skip(st);
          }
        }
        r.EndStruct();
        break;
      }
      default:
        r.Skip(t);
    }
  }
  r.EndStruct();
  return m;
}

ColumnChunk ReadColumnChunk(ThriftReader& r) {
  ColumnChunk c;
  r.BeginStruct();
  std::int16_t id;
  ThriftType t;
  while (r.ReadField(id, t)) {
    if (id == 1) {
      c.has_file_path = true;
      r.Skip(t);
    } else if (id == 3) {
      ThriftReader::Expect(t, ThriftType::kStruct, "ColumnChunk.meta_data");
      c.meta = ReadColumnMeta(r);
      c.has_meta = true;
    } else {
      r.Skip(t);
    }
  }
  r.EndStruct();
  return c;
}

RowGroup ReadRowGroup(ThriftReader& r, std::size_t leaves) {
  RowGroup g;
  r.BeginStruct();
  std::int16_t id;
  ThriftType t;
  while (r.ReadField(id, t)) {
    if (id == 1) {
      // A chunk per leaf column: a longer list is malformed (and would cost far
      // more memory than its bytes in the footer).
      ReadStructList(r, t, "RowGroup.columns", [&] {
        if (g.columns.size() >= leaves)
          Fail("a row group lists more column chunks than the schema's " + std::to_string(leaves) + " columns");
        g.columns.push_back(ReadColumnChunk(r));
      });
    } else if (id == 3) {
      g.num_rows = r.ReadInt(t);
    } else {
      r.Skip(t);
    }
  }
  r.EndStruct();
  return g;
}

FileMeta ReadFileMeta(std::string_view bytes) {
  ThriftReader r(bytes);
  FileMeta f;
  r.BeginStruct();
  std::int16_t id;
  ThriftType t;
  while (r.ReadField(id, t)) {
    if (id == 2) {
      ReadStructList(r, t, "FileMetaData.schema", [&] { f.schema.push_back(ReadSchemaElement(r)); });
    } else if (id == 3) {
      f.num_rows = r.ReadInt(t);
    } else if (id == 4) {
      const std::size_t leaves = f.schema.empty() ? std::numeric_limits<std::size_t>::max() : f.schema.size() - 1;
      ReadStructList(r, t, "FileMetaData.row_groups", [&] { f.row_groups.push_back(ReadRowGroup(r, leaves)); });
    } else if (id == 7) {
      // list<ColumnOrder>; ColumnOrder is a union whose field 1 is TypeDefinedOrder.
      ReadStructList(r, t, "FileMetaData.column_orders", [&] {
        bool type_order = false;
        r.BeginStruct();
        std::int16_t oid;
        ThriftType ot;
        while (r.ReadField(oid, ot)) {
          if (oid == 1 && ot == ThriftType::kStruct) type_order = true;
          r.Skip(ot);
        }
        r.EndStruct();
        f.type_order.push_back(type_order);
      });
    } else {
      r.Skip(t);
    }
  }
  r.EndStruct();
  return f;
}

// Fields 1..4 of DataPageHeader, DictionaryPageHeader and DataPageHeaderV2.
void ReadSubHeader(ThriftReader& r, PageHeader& h, bool v2) {
  r.BeginStruct();
  std::int16_t id;
  ThriftType t;
  while (r.ReadField(id, t)) {
    if (id == 1) {
      h.num_values = r.ReadI32(t);
    } else if (!v2 && id == 2) {
      h.encoding = r.ReadI32(t);
    } else if (!v2 && id == 3 && h.has_v1) {
      h.def_encoding = r.ReadI32(t);
    } else if (v2 && id == 2) {
      h.num_nulls = r.ReadI32(t);
    } else if (v2 && id == 4) {
      h.encoding = r.ReadI32(t);
    } else if (v2 && id == 5) {
      h.def_length = r.ReadI32(t);
    } else if (v2 && id == 6) {
      h.rep_length = r.ReadI32(t);
    } else if (v2 && id == 7) {
      h.is_compressed = r.ReadBool(t);
    } else {
      r.Skip(t);
    }
  }
  r.EndStruct();
}

// Returns the header and its encoded length.
std::pair<PageHeader, std::size_t> ReadPageHeader(std::string_view bytes) {
  ThriftReader r(bytes);
  PageHeader h;
  r.BeginStruct();
  std::int16_t id;
  ThriftType t;
  while (r.ReadField(id, t)) {
    switch (id) {
      case 1:
        h.type = r.ReadI32(t);
        break;
      case 2:
        h.uncompressed_size = r.ReadI32(t);
        break;
      case 3:
        h.compressed_size = r.ReadI32(t);
        break;
      case 5:
        ThriftReader::Expect(t, ThriftType::kStruct, "PageHeader.data_page_header");
        h.has_v1 = true;
        ReadSubHeader(r, h, false);
        break;
      case 7:
        ThriftReader::Expect(t, ThriftType::kStruct, "PageHeader.dictionary_page_header");
        h.has_dict = true;
        ReadSubHeader(r, h, false);
        break;
      case 8:
        ThriftReader::Expect(t, ThriftType::kStruct, "PageHeader.data_page_header_v2");
        h.has_v2 = true;
        ReadSubHeader(r, h, true);
        break;
      default:
        r.Skip(t);
    }
  }
  r.EndStruct();
  if (h.uncompressed_size < 0 || h.compressed_size < 0) Fail("page header without valid sizes");
  return {h, r.position()};
}

// ----------------------------------------------------------------- decoding

std::string_view Decompress(int codec, std::string_view data, std::int64_t uncompressed_size, std::string& scratch) {
  if (uncompressed_size < 0 || uncompressed_size > kMaxPageBytes) {
    Fail("page uncompressed size " + std::to_string(uncompressed_size) + " out of range");
  }
  auto size = static_cast<std::size_t>(uncompressed_size);
  switch (codec) {
    case kCodecUncompressed:
      if (data.size() != size) {
        Fail("uncompressed page of " + std::to_string(data.size()) + " bytes, header says " + std::to_string(size));
      }
      return data;
    case kCodecSnappy:
      scratch = SnappyUncompress(data, size);
      if (scratch.size() != size) Fail("snappy page decompressed to the wrong size");
      return scratch;
    case kCodecZstd: {
      // Check the frame's own size first, so that a lying page header cannot make us
      // allocate a huge buffer.
      unsigned long long frame_size = ZSTD_getFrameContentSize(data.data(), data.size());
      if (frame_size == ZSTD_CONTENTSIZE_ERROR) Fail("zstd page is not a zstd frame");
      if (frame_size != ZSTD_CONTENTSIZE_UNKNOWN && frame_size != size) {
        Fail("zstd page holds " + std::to_string(frame_size) + " bytes, header says " + std::to_string(size));
      }
      scratch.resize(size);
      std::size_t got = ZSTD_decompress(scratch.data(), size, data.data(), data.size());
      if (ZSTD_isError(got)) Fail(std::string("zstd page: ") + ZSTD_getErrorName(got));
      if (got != size)
        Fail("zstd page decompressed to " + std::to_string(got) + " bytes, header says " + std::to_string(size));
      return scratch;
    }
    default:
      Fail("unsupported compression codec " + CodecName(codec) + " (supported: UNCOMPRESSED, SNAPPY, ZSTD)");
  }
}

// The RLE / bit-packed hybrid of definition levels and dictionary indices.
class HybridDecoder {
 public:
  HybridDecoder(std::string_view data, int bit_width) : data_(data), bit_width_(bit_width) {
    if (bit_width < 0 || bit_width > 32) Fail("RLE bit width " + std::to_string(bit_width) + " out of range");
  }

  std::uint32_t Next() {
    if (bit_width_ == 0) return 0;
    while (rle_left_ == 0 && packed_left_ == 0) ReadRunHeader();
    if (rle_left_ > 0) {
      --rle_left_;
      return rle_value_;
    }
    --packed_left_;
    std::uint64_t v = 0;
    for (int got = 0; got < bit_width_;) {
      std::size_t byte = bit_pos_ >> 3;
      int shift = static_cast<int>(bit_pos_ & 7);
      int take = std::min(8 - shift, bit_width_ - got);
      std::uint64_t bits = (static_cast<std::uint8_t>(data_[byte]) >> shift) & ((1u << take) - 1);
      v |= bits << got;
      got += take;
      bit_pos_ += take;
    }
    return static_cast<std::uint32_t>(v);
  }

 private:
  void ReadRunHeader() {
    std::uint64_t header = 0;
    for (int shift = 0;; shift += 7) {
      if (pos_ >= data_.size()) Fail("RLE/bit-packed data ends before all values were read");
      if (shift > 35) Fail("RLE run header too long");
      auto b = static_cast<std::uint8_t>(data_[pos_++]);
      header |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) break;
    }
    if (header & 1) {
      std::uint64_t groups = header >> 1;
      std::size_t avail = data_.size() - pos_;
      std::uint64_t bytes = groups * static_cast<std::uint64_t>(bit_width_);
      // A final run may be cut short; only whole values that are present count.
      std::uint64_t usable = std::min<std::uint64_t>(bytes, avail);
      packed_left_ = std::min<std::uint64_t>(groups * 8, usable * 8 / bit_width_);
      bit_pos_ = pos_ * 8;
      pos_ += usable;
    } else {
      rle_left_ = header >> 1;
      int nbytes = (bit_width_ + 7) / 8;
      if (data_.size() - pos_ < static_cast<std::size_t>(nbytes)) Fail("RLE run value runs past the end");
      std::uint64_t v = 0;
      for (int i = 0; i < nbytes; ++i)
        v |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(data_[pos_ + i])) << (8 * i);
      pos_ += nbytes;
      rle_value_ = static_cast<std::uint32_t>(v);
    }
  }

  std::string_view data_;
  int bit_width_;
  std::size_t pos_ = 0;
  std::uint64_t rle_left_ = 0;
  std::uint32_t rle_value_ = 0;
  std::uint64_t packed_left_ = 0;
  std::size_t bit_pos_ = 0;
};

enum class Kind { kInt, kDouble, kString };

Kind KindOf(int physical) {
  switch (physical) {
    case kBoolean:
    case kInt32:
    case kInt64:
      return Kind::kInt;
    case kFloat:
    case kDouble:
      return Kind::kDouble;
    case kByteArray:
      return Kind::kString;
    default:
      Fail(std::string("unsupported physical type ") + PhysicalTypeName(physical));
  }
}

// Values of one column; for optional columns `present` has one entry per row.
struct ColumnValues {
  std::vector<std::int64_t> ints;
  std::vector<double> doubles;
  std::vector<std::string> strings;
  std::vector<std::uint8_t> present;
  std::size_t nulls = 0;

  std::size_t size() const { return ints.size() + doubles.size() + strings.size(); }
};

template <typename T>
T LoadLe(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Appends `count` PLAIN values of type `physical` from `data`.
void DecodePlain(int physical, std::string_view data, std::size_t count, ColumnValues& out) {
  auto need = [&](std::size_t width) {
    if (count > data.size() / width) {
      Fail("PLAIN data of " + std::to_string(data.size()) + " bytes is too short for " + std::to_string(count) + " " +
           PhysicalTypeName(physical) + " values");
    }
  };
  const char* p = data.data();
  switch (physical) {
    case kBoolean:
      if (count > data.size() * 8) Fail("PLAIN boolean data too short");
      for (std::size_t i = 0; i < count; ++i) out.ints.push_back((static_cast<std::uint8_t>(p[i >> 3]) >> (i & 7)) & 1);
      return;
    case kInt32:
      need(4);
      for (std::size_t i = 0; i < count; ++i) out.ints.push_back(LoadLe<std::int32_t>(p + 4 * i));
      return;
    case kInt64:
      need(8);
      for (std::size_t i = 0; i < count; ++i) out.ints.push_back(LoadLe<std::int64_t>(p + 8 * i));
      return;
    case kFloat:
      need(4);
      for (std::size_t i = 0; i < count; ++i) out.doubles.push_back(LoadLe<float>(p + 4 * i));
      return;
    case kDouble:
      need(8);
      for (std::size_t i = 0; i < count; ++i) out.doubles.push_back(LoadLe<double>(p + 8 * i));
      return;
    case kByteArray: {
      std::size_t pos = 0;
      for (std::size_t i = 0; i < count; ++i) {
        if (data.size() - pos < 4) Fail("PLAIN byte array data ends after " + std::to_string(i) + " values");
        std::uint32_t len = LoadLe<std::uint32_t>(p + pos);
        pos += 4;
        if (len > data.size() - pos) Fail("PLAIN byte array value runs past the end of the page");
        out.strings.emplace_back(data.substr(pos, len));
        pos += len;
      }
      return;
    }
    default:
      Fail(std::string("unsupported physical type ") + PhysicalTypeName(physical));
  }
}

// Decodes dictionary indices (bit width byte + hybrid runs) into values from `dict`.
void DecodeDictionary(std::string_view data, std::size_t count, const ColumnValues& dict, Kind kind,
                      ColumnValues& out) {
  if (count == 0) return;
  if (data.empty()) Fail("dictionary-encoded page without a bit width");
  HybridDecoder dec(data.substr(1), static_cast<std::uint8_t>(data[0]));
  std::size_t dict_size = dict.size();
  for (std::size_t i = 0; i < count; ++i) {
    std::uint32_t idx = dec.Next();
    if (idx >= dict_size) {
      Fail("dictionary index " + std::to_string(idx) + " beyond the dictionary of " + std::to_string(dict_size));
    }
    switch (kind) {
      case Kind::kInt:
        out.ints.push_back(dict.ints[idx]);
        break;
      case Kind::kDouble:
        out.doubles.push_back(dict.doubles[idx]);
        break;
      case Kind::kString:
        out.strings.push_back(dict.strings[idx]);
        break;
    }
  }
}

struct ColumnReader {
  std::string name;
  int physical = -1;
  Kind kind = Kind::kString;
  bool optional = false;
  bool wanted = true;  // decoded (a projection leaves the others out)
  ColumnValues values;
};

// Definition levels of `num_values` entries; returns how many are present.
std::size_t DecodeLevels(std::string_view data, std::size_t num_values, ColumnValues& out) {
  HybridDecoder dec(data, 1);
  std::size_t present = 0;
  for (std::size_t i = 0; i < num_values; ++i) {
    std::uint32_t level = dec.Next();
    if (level > 1) Fail("definition level " + std::to_string(level) + " above the maximum 1");
    out.present.push_back(static_cast<std::uint8_t>(level));
    present += level;
  }
  out.nulls += num_values - present;
  return present;
}

void DecodeValues(ColumnReader& col, int encoding, std::string_view data, std::size_t count, const ColumnValues* dict) {
  if (encoding == kPlain) {
    DecodePlain(col.physical, data, count, col.values);
  } else if (encoding == kPlainDictionary || encoding == kRleDictionary) {
    if (dict == nullptr) Fail("dictionary-encoded page before any dictionary page");
    DecodeDictionary(data, count, *dict, col.kind, col.values);
  } else if (encoding == kRle && col.physical == kBoolean) {
    // Booleans as RLE / bit-packed runs of width 1 behind a 4-byte length.
    if (data.size() < 4) Fail("RLE boolean data without its length");
    std::uint32_t len = LoadLe<std::uint32_t>(data.data());
    if (len > data.size() - 4) Fail("RLE boolean data runs past the end of the page");
    HybridDecoder dec(data.substr(4, len), 1);
    for (std::size_t i = 0; i < count; ++i) col.values.ints.push_back(dec.Next() & 1);
  } else {
    Fail("unsupported encoding " + EncodingName(encoding) +
         " (supported: PLAIN, PLAIN_DICTIONARY, RLE_DICTIONARY, RLE for booleans)");
  }
}

void ReadColumnChunk(std::string_view file, std::size_t data_end, const ColumnMeta& meta, std::int64_t rows,
                     ColumnReader& col) {
  std::int64_t start = meta.data_page_offset;
  if (meta.dictionary_page_offset > 0 && meta.dictionary_page_offset < start) start = meta.dictionary_page_offset;
  if (start < 4 || static_cast<std::uint64_t>(start) >= data_end || meta.total_compressed_size < 0 ||
      static_cast<std::uint64_t>(meta.total_compressed_size) > data_end - static_cast<std::uint64_t>(start)) {
    Fail("column chunk at offset " + std::to_string(start) + " of " + std::to_string(meta.total_compressed_size) +
         " bytes lies outside the file's data (" + std::to_string(data_end) + " bytes)");
  }
  std::size_t pos = static_cast<std::size_t>(start);
  std::size_t end = pos + static_cast<std::size_t>(meta.total_compressed_size);
  std::int64_t read = 0;
  ColumnValues dict;
  bool has_dict = false;
  std::string scratch;
  while (read < rows) {
    if (pos >= end) {
      Fail("column chunk ends after " + std::to_string(read) + " of " + std::to_string(rows) + " values");
    }
    auto [h, header_len] = ReadPageHeader(file.substr(pos, end - pos));
    pos += header_len;
    if (static_cast<std::size_t>(h.compressed_size) > end - pos) Fail("page runs past the end of its column chunk");
    std::string_view page = file.substr(pos, static_cast<std::size_t>(h.compressed_size));
    pos += static_cast<std::size_t>(h.compressed_size);
    if (h.type == kDictionaryPage) {
      if (!h.has_dict) Fail("dictionary page without its header");
      if (h.encoding != kPlain && h.encoding != kPlainDictionary) {
        Fail("unsupported dictionary page encoding " + EncodingName(h.encoding));
      }
      if (h.num_values < 0) Fail("negative dictionary size");
      std::string_view body = Decompress(meta.codec, page, h.uncompressed_size, scratch);
      dict = ColumnValues{};
      DecodePlain(col.physical, body, static_cast<std::size_t>(h.num_values), dict);
      has_dict = true;
    } else if (h.type == kDataPage) {
      if (!h.has_v1) Fail("data page without its header");
      if (h.num_values < 0 || h.num_values > rows - read) Fail("data page holds more values than the row group");
      auto n = static_cast<std::size_t>(h.num_values);
      std::string_view body = Decompress(meta.codec, page, h.uncompressed_size, scratch);
      std::size_t present = n;
      if (col.optional) {
        if (h.def_encoding != kRle) Fail("unsupported definition level encoding " + EncodingName(h.def_encoding));
        if (body.size() < 4) Fail("data page too short for its definition levels");
        std::uint32_t len = LoadLe<std::uint32_t>(body.data());
        if (len > body.size() - 4) Fail("definition levels run past the end of the page");
        present = DecodeLevels(body.substr(4, len), n, col.values);
        body = body.substr(4 + len);
      }
      DecodeValues(col, h.encoding, body, present, has_dict ? &dict : nullptr);
      read += h.num_values;
    } else if (h.type == kDataPageV2) {
      if (!h.has_v2) Fail("data page v2 without its header");
      if (h.num_values < 0 || h.num_values > rows - read) Fail("data page holds more values than the row group");
      if (h.rep_length != 0) Fail("repetition levels in a flat column");
      if (h.def_length < 0 || h.def_length > h.compressed_size || h.def_length > h.uncompressed_size) {
        Fail("definition levels length out of range");
      }
      auto n = static_cast<std::size_t>(h.num_values);
      auto levels_len = static_cast<std::size_t>(h.def_length);
      std::size_t present = n;
      if (col.optional) {
        present = DecodeLevels(page.substr(0, levels_len), n, col.values);
      } else if (levels_len != 0) {
        Fail("definition levels in a required column");
      }
      std::string_view rest = page.substr(levels_len);
      std::int64_t rest_size = std::int64_t{h.uncompressed_size} - h.def_length;
      std::string_view body = h.is_compressed ? Decompress(meta.codec, rest, rest_size, scratch)
                                              : Decompress(kCodecUncompressed, rest, rest_size, scratch);
      DecodeValues(col, h.encoding, body, present, has_dict ? &dict : nullptr);
      read += h.num_values;
    } else if (h.type == kIndexPage) {
      continue;
    } else {
      Fail("unknown page type " + std::to_string(h.type));
    }
  }
}

// What a read asks for: every row or one slice, every column or one.
struct ReadPlan {
  const RowSlice* slice = nullptr;
  const std::string* only_column = nullptr;
};

// Whether a column chunk's min_value / max_value describe every value read from
// it: the file declares TYPE_ORDER for the column, and no value is a null (read
// as "", which statistics leave out).
bool StatsUsable(const FileMeta& meta, std::size_t col, const ColumnMeta& m, bool optional) {
  return col < meta.type_order.size() && meta.type_order[col] && m.has_min && m.has_max &&
         (!optional || m.null_count == 0);
}

// Whether a row group's statistics for a string column rule `value` out.
bool StatsExclude(const ColumnMeta& m, const std::string& value) {
  return value < m.min_value || value > m.max_value;
}

Table ParseParquetImpl(std::string_view bytes, const ReadPlan& plan = {}) {
  if (bytes.size() < 12) Fail("file of " + std::to_string(bytes.size()) + " bytes is too short for Parquet");
  if (bytes.substr(0, 4) != "PAR1") Fail("bad magic at the start (expected PAR1)");
  if (bytes.substr(bytes.size() - 4) != "PAR1") Fail("bad magic at the end (expected PAR1; truncated file?)");
  std::uint32_t footer_len = LoadLe<std::uint32_t>(bytes.data() + bytes.size() - 8);
  if (footer_len > bytes.size() - 12) {
    Fail("footer length " + std::to_string(footer_len) + " exceeds the file size " + std::to_string(bytes.size()));
  }
  std::size_t data_end = bytes.size() - 8 - footer_len;
  FileMeta meta = ReadFileMeta(bytes.substr(data_end, footer_len));

  if (meta.schema.empty()) Fail("empty schema");
  const SchemaElement& root = meta.schema[0];
  if (static_cast<std::size_t>(root.num_children) != meta.schema.size() - 1) {
    Fail("nested schema (root has " + std::to_string(root.num_children) + " children, " +
         std::to_string(meta.schema.size() - 1) + " elements follow); only flat tables are supported");
  }
  std::vector<ColumnReader> cols;
  std::vector<ColumnSpec> specs;
  for (std::size_t i = 1; i < meta.schema.size(); ++i) {
    const SchemaElement& e = meta.schema[i];
    if (e.num_children > 0 || e.type < 0) Fail("nested column '" + e.name + "'; only flat tables are supported");
    if (e.repetition == kRepeated) Fail("repeated column '" + e.name + "'; only flat tables are supported");
    if (e.repetition != kRequired && e.repetition != kOptional) Fail("column '" + e.name + "' has a bad repetition");
    if (e.converted_type == kConvertedDecimal || e.logical_decimal)
      Fail("DECIMAL column '" + e.name + "' is not supported");
    ColumnReader c;
    c.name = e.name;
    c.physical = e.type;
    try {
      c.kind = KindOf(e.type);
    } catch (const DataError& err) {
      Fail(std::string(err.what()) + " in column '" + e.name + "'");
    }
    c.optional = e.repetition == kOptional;
    if (plan.only_column) c.wanted = c.name == *plan.only_column;
    cols.push_back(std::move(c));
  }
  auto find_col = [&](const std::string& name, const char* what) {
    for (std::size_t c = 0; c < cols.size(); ++c)
      if (cols[c].name == name) {
        if (cols[c].kind != Kind::kString) Fail(std::string(what) + " column '" + name + "' is not a string column");
        return c;
      }
    std::string have;
    for (const auto& c : cols) have += (have.empty() ? "" : ", ") + c.name;
    Fail(std::string("no ") + what + " column '" + name + "'; columns: " + have);
  };
  std::size_t slice_col = 0;
  if (plan.slice) {
    slice_col = find_col(plan.slice->column, "slice");
    cols[slice_col].wanted = true;
  }
  if (plan.only_column) find_col(*plan.only_column, "requested");

  // Reserve for the announced rows, bounded so that a lying footer cannot force a
  // huge allocation.
  if (meta.num_rows > 0) {
    auto reserve = static_cast<std::size_t>(std::min<std::uint64_t>(meta.num_rows, 16 * bytes.size()));
    for (ColumnReader& c : cols) {
      if (c.kind == Kind::kInt) c.values.ints.reserve(reserve);
      if (c.kind == Kind::kDouble) c.values.doubles.reserve(reserve);
      if (c.kind == Kind::kString) c.values.strings.reserve(reserve);
      if (c.optional) c.values.present.reserve(reserve);
    }
  }
  std::int64_t total_rows = 0;  // in every row group (the footer's count)
  std::int64_t kept_rows = 0;   // in the row groups decoded
  for (std::size_t g = 0; g < meta.row_groups.size(); ++g) {
    const RowGroup& rg = meta.row_groups[g];
    if (rg.num_rows < 0) Fail("row group " + std::to_string(g) + " has no row count");
    if (rg.columns.size() != cols.size()) {
      Fail("row group " + std::to_string(g) + " has " + std::to_string(rg.columns.size()) + " columns, schema has " +
           std::to_string(cols.size()));
    }
    total_rows += rg.num_rows;
    for (std::size_t c = 0; c < cols.size(); ++c) {
      const ColumnChunk& chunk = rg.columns[c];
      if (chunk.has_file_path) Fail("column chunks in external files are not supported");
      if (!chunk.has_meta) Fail("column chunk without metadata");
      if (chunk.meta.type != cols[c].physical) Fail("column '" + cols[c].name + "' chunk type differs from the schema");
    }
    if (plan.slice && StatsUsable(meta, slice_col, rg.columns[slice_col].meta, cols[slice_col].optional) &&
        StatsExclude(rg.columns[slice_col].meta, plan.slice->value))
      continue;
    kept_rows += rg.num_rows;
    for (std::size_t c = 0; c < cols.size(); ++c) {
      if (!cols[c].wanted) continue;
      const ColumnChunk& chunk = rg.columns[c];
      try {
        ReadColumnChunk(bytes, data_end, chunk.meta, rg.num_rows, cols[c]);
      } catch (const DataError& err) {
        Fail("row group " + std::to_string(g) + ", column '" + cols[c].name + "': " + err.what());
      }
    }
  }
  if (meta.num_rows >= 0 && meta.num_rows != total_rows) {
    Fail("footer says " + std::to_string(meta.num_rows) + " rows, row groups hold " + std::to_string(total_rows));
  }

  // Null policy (docs/parquet.md): all-null columns become string columns of "";
  // nulls in string columns become ""; nulls in numeric columns are an error.
  auto rows = static_cast<std::size_t>(kept_rows);
  std::vector<bool> all_null(cols.size(), false);
  for (std::size_t c = 0; c < cols.size(); ++c) {
    ColumnReader& col = cols[c];
    if (!col.wanted) continue;
    bool null_type = meta.schema[c + 1].logical_null;
    all_null[c] = (rows > 0 && col.values.nulls == rows) || (null_type && col.values.size() == 0);
    ValueType type = col.kind == Kind::kInt      ? ValueType::kInt64
                     : col.kind == Kind::kDouble ? ValueType::kDouble
                                                 : ValueType::kString;
    if (all_null[c]) type = ValueType::kString;
    if (!all_null[c] && col.values.nulls > 0 && col.kind != Kind::kString) {
      Fail("numeric column '" + col.name + "' has " + std::to_string(col.values.nulls) + " null values of " +
           std::to_string(rows) + " (tables have no nulls)");
    }
    specs.push_back({col.name, type});
  }
  // Whole columns at once; nulls (optional columns) expand to "" in string columns.
  std::vector<Table::ColumnData> data;
  data.reserve(cols.size());
  for (std::size_t c = 0; c < cols.size(); ++c) {
    ColumnReader& col = cols[c];
    if (!col.wanted) continue;
    if (all_null[c]) {
      data.emplace_back(std::vector<std::string>(rows));
      continue;
    }
    switch (col.kind) {
      case Kind::kInt: data.emplace_back(std::move(col.values.ints)); break;
      case Kind::kDouble: data.emplace_back(std::move(col.values.doubles)); break;
      case Kind::kString: {
        if (!col.optional || col.values.nulls == 0) {
          data.emplace_back(std::move(col.values.strings));
          break;
        }
        std::vector<std::string> out(rows);
        std::size_t next = 0;
        for (std::size_t r = 0; r < rows; ++r)
          if (col.values.present[r]) out[r] = std::move(col.values.strings[next++]);
        data.emplace_back(std::move(out));
        break;
      }
    }
  }
  Table table = Table::FromColumns(std::move(specs), std::move(data));
  if (!plan.slice) return table;
  // Row groups the statistics could not rule out may hold other slices too.
  const std::vector<std::size_t> keep = table.RowsOf(*plan.slice, "");
  if (keep.size() == table.num_rows()) return table;
  return table.Select(keep);
}

// ----------------------------------------------------------------- writing

void PutLe32(std::string& out, std::uint32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);
  out.append(b, 4);
}

// RLE / bit-packed hybrid: blocks of 8 equal values extend RLE runs, other blocks
// go into bit-packed runs.
std::string EncodeHybrid(const std::vector<std::uint32_t>& values, int bit_width) {
  std::string out;
  auto varint = [&](std::uint64_t v) {
    while (v >= 0x80) {
      out.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out.push_back(static_cast<char>(v));
  };
  const std::size_t n = values.size();
  auto uniform = [&](std::size_t at) {
    std::size_t stop = std::min(n, at + 8);
    for (std::size_t k = at + 1; k < stop; ++k)
      if (values[k] != values[at]) return false;
    return true;
  };
  std::size_t i = 0;
  while (i < n) {
    if (uniform(i)) {
      std::size_t j = i;
      while (j < n && uniform(j) && values[j] == values[i]) j = std::min(n, j + 8);
      varint(static_cast<std::uint64_t>(j - i) << 1);
      for (int b = 0; b < (bit_width + 7) / 8; ++b) out.push_back(static_cast<char>((values[i] >> (8 * b)) & 0xff));
      i = j;
    } else {
      std::size_t j = i;
      while (j < n && !uniform(j)) j += 8;
      std::size_t groups = (j - i + 7) / 8;
      varint((static_cast<std::uint64_t>(groups) << 1) | 1);
      std::size_t start = out.size();
      out.append(groups * static_cast<std::size_t>(bit_width), '\0');
      std::size_t bit = 0;
      for (std::size_t k = i; k < i + groups * 8; ++k) {
        std::uint32_t v = k < n ? values[k] : 0;
        for (int b = 0; b < bit_width; ++b, ++bit) {
          if ((v >> b) & 1) out[start + (bit >> 3)] |= static_cast<char>(1 << (bit & 7));
        }
      }
      i = std::min(n, j);
    }
  }
  return out;
}

std::string Compress(ParquetWriteOptions::Codec codec, int level, std::string_view raw) {
  switch (codec) {
    case ParquetWriteOptions::Codec::kUncompressed:
      return std::string(raw);
    case ParquetWriteOptions::Codec::kSnappy:
      return SnappyCompress(raw);
    case ParquetWriteOptions::Codec::kZstd: {
      std::string out(ZSTD_compressBound(raw.size()), '\0');
      std::size_t got = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), level);
      if (ZSTD_isError(got)) throw Error(std::string("zstd compression failed: ") + ZSTD_getErrorName(got));
      out.resize(got);
      return out;
    }
  }
  return std::string(raw);
}

int CodecCode(ParquetWriteOptions::Codec codec) {
  switch (codec) {
    case ParquetWriteOptions::Codec::kUncompressed:
      return kCodecUncompressed;
    case ParquetWriteOptions::Codec::kSnappy:
      return kCodecSnappy;
    case ParquetWriteOptions::Codec::kZstd:
      return kCodecZstd;
  }
  return kCodecUncompressed;
}

struct ChunkInfo {
  int type = 0;
  std::int64_t offset = 0;
  std::int64_t dictionary_offset = -1;
  std::int64_t data_offset = 0;
  std::int64_t uncompressed = 0;
  std::int64_t compressed = 0;
  std::int64_t num_values = 0;
  bool has_stats = false;
  std::string min_value, max_value;  // plain-encoded
};

std::int32_t CheckedPageSize(std::size_t n) {
  if (n > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw DataError("Parquet page of " + std::to_string(n) + " bytes is too large; lower row_group_rows");
  }
  return static_cast<std::int32_t>(n);
}

// Appends one page (header + compressed body) and updates the chunk sizes.
void WritePage(std::string& out, ChunkInfo& info, const ParquetWriteOptions& options, std::string_view raw,
               bool dictionary_page, std::int32_t num_values, int encoding) {
  std::string body = Compress(options.codec, options.zstd_level, raw);
  ThriftWriter w;
  w.BeginStruct();
  w.FieldI32(1, dictionary_page ? kDictionaryPage : kDataPage);
  w.FieldI32(2, CheckedPageSize(raw.size()));
  w.FieldI32(3, CheckedPageSize(body.size()));
  w.FieldStruct(dictionary_page ? 7 : 5);
  w.BeginStruct();
  w.FieldI32(1, num_values);
  w.FieldI32(2, encoding);
  if (dictionary_page) {
    w.FieldBool(3, false);
  } else {
    w.FieldI32(3, kRle);
    w.FieldI32(4, kRle);
  }
  w.EndStruct();
  w.EndStruct();
  out += w.bytes();
  out += body;
  info.uncompressed += static_cast<std::int64_t>(w.bytes().size() + raw.size());
  info.compressed += static_cast<std::int64_t>(w.bytes().size() + body.size());
}

}  // namespace

Table ParseParquet(std::string_view bytes, const std::string& origin) {
  try {
    return ParseParquetImpl(bytes);
  } catch (const DataError& e) {
    throw DataError(origin + ": " + e.what());
  }
}

Table ReadParquet(const std::string& path) {
  return ParseParquet(ReadFile(path), path);
}

Table ParseParquet(std::string_view bytes, const std::string& origin, const RowSlice& slice) {
  try {
    return ParseParquetImpl(bytes, ReadPlan{&slice, nullptr});
  } catch (const DataError& e) {
    throw DataError(origin + ": " + e.what());
  }
}

Table ReadParquet(const std::string& path, const RowSlice& slice) {
  return ParseParquet(ReadFile(path), path, slice);
}

std::vector<std::string> ParquetColumnValues(const std::string& path, const std::string& column) {
  std::vector<std::string> out;
  try {
    // Only the footer is read when it describes a well-formed flat file whose
    // every non-empty row group holds one value of the column by its statistics
    // (TYPE_ORDER, no nulls). The footer is found from the file's last 8 bytes; one
    // read of the last 64 KiB holds it for any table servecast writes. Anything
    // else decodes that column alone, which also reports a malformed file.
    auto from_footer = [&]() -> bool {
      std::size_t file_size = 0;
      std::string tail = ReadFileTail(path, 64 * 1024, &file_size);
      if (tail.size() < 8 || tail.compare(tail.size() - 4, 4, "PAR1") != 0) return false;
      const std::size_t footer_len = LoadLe<std::uint32_t>(tail.data() + tail.size() - 8);
      if (file_size < 12 || footer_len > file_size - 12) return false;
      if (footer_len + 8 > tail.size()) tail = ReadFileTail(path, footer_len + 8, &file_size);
      if (footer_len + 8 > tail.size()) return false;
      const FileMeta meta = ReadFileMeta(std::string_view(tail).substr(tail.size() - 8 - footer_len, footer_len));
      if (meta.schema.empty() || static_cast<std::size_t>(meta.schema[0].num_children) != meta.schema.size() - 1)
        return false;
      std::size_t col = meta.schema.size();
      for (std::size_t i = 1; i < meta.schema.size(); ++i) {
        const SchemaElement& e = meta.schema[i];
        if (e.num_children > 0 || e.type < 0 || e.repetition == kRepeated) return false;
        if (e.name == column) {
          if (col != meta.schema.size() || e.type != kByteArray) return false;  // twice, or not text
          col = i - 1;
        }
      }
      if (col == meta.schema.size()) return false;
      const bool optional = meta.schema[col + 1].repetition == kOptional;
      std::int64_t rows = 0;
      for (const RowGroup& rg : meta.row_groups) {
        if (rg.num_rows < 0 || rg.columns.size() != meta.schema.size() - 1) return false;
        rows += rg.num_rows;
        if (rg.num_rows == 0) continue;
        const ColumnMeta& m = rg.columns[col].meta;
        if (!rg.columns[col].has_meta || !StatsUsable(meta, col, m, optional) || m.min_value != m.max_value)
          return false;
        if (std::find(out.begin(), out.end(), m.min_value) == out.end()) out.push_back(m.min_value);
      }
      return meta.num_rows < 0 || meta.num_rows == rows;
    };
    if (from_footer()) return out;
    const std::string bytes = ReadFile(path);
    return ParseParquetImpl(bytes, ReadPlan{nullptr, &column}).DistinctText(column, path);
  } catch (const DataError& e) {
    throw DataError(path + ": " + e.what());
  }
}

namespace {

// The write order of the rows and the row groups over it: rows grouped stably
// by the `group_by` columns, no row group across two groups, at most
// `row_group_rows` rows each.
struct RowLayout {
  std::vector<std::size_t> order;                           // table row of each written row
  std::vector<std::pair<std::size_t, std::size_t>> groups;  // [first, last) into `order`
};

RowLayout LayRows(const Table& table, const ParquetWriteOptions& options) {
  const std::size_t nrows = table.num_rows();
  const std::size_t group_rows = std::max<std::size_t>(1, options.row_group_rows);
  RowLayout layout;
  std::vector<std::size_t> cuts;  // positions in `order` where a group begins
  if (options.group_by.empty()) {
    layout.order.resize(nrows);
    for (std::size_t r = 0; r < nrows; ++r) layout.order[r] = r;
    cuts.push_back(0);
  } else {
    std::vector<std::size_t> cols;
    for (const auto& name : options.group_by) cols.push_back(table.ColumnIndex(name));
    std::unordered_map<std::string, std::size_t> group_of;
    std::vector<std::vector<std::size_t>> members;
    for (std::size_t r = 0; r < nrows; ++r) {
      std::string key;
      for (std::size_t c : cols) {
        key += ToString(table.Get(r, c));
        key.push_back('\0');
      }
      auto [it, inserted] = group_of.emplace(std::move(key), members.size());
      if (inserted) members.emplace_back();
      members[it->second].push_back(r);
    }
    layout.order.reserve(nrows);
    for (const auto& m : members) {
      cuts.push_back(layout.order.size());
      layout.order.insert(layout.order.end(), m.begin(), m.end());
    }
  }
  cuts.push_back(nrows);
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i)
    for (std::size_t first = cuts[i]; first < cuts[i + 1]; first += group_rows)
      layout.groups.emplace_back(first, std::min(cuts[i + 1], first + group_rows));
  return layout;
}

std::string LeBytes(const void* p) { return std::string(static_cast<const char*>(p), 8); }

}  // namespace

std::string SerializeParquet(const Table& table, const ParquetWriteOptions& options) {
  const std::size_t ncols = table.num_columns();
  const std::size_t nrows = table.num_rows();
  const RowLayout layout = LayRows(table, options);
  std::string out = "PAR1";
  std::vector<std::vector<ChunkInfo>> groups;
  for (const auto& [first, last] : layout.groups) {
    auto count = static_cast<std::int32_t>(last - first);
    std::vector<ChunkInfo> chunks;
    for (std::size_t c = 0; c < ncols; ++c) {
      ChunkInfo info;
      info.offset = static_cast<std::int64_t>(out.size());
      info.num_values = count;
      std::string raw;
      ValueType type = table.columns()[c].type;
      if (type == ValueType::kInt64) {
        info.type = kInt64;
        std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = std::numeric_limits<std::int64_t>::min();
        for (std::size_t i = first; i < last; ++i) {
          std::int64_t v = table.GetInt(layout.order[i], c);
          lo = std::min(lo, v);
          hi = std::max(hi, v);
          raw.append(reinterpret_cast<const char*>(&v), 8);
        }
        if (count > 0) {
          info.has_stats = true;
          info.min_value = LeBytes(&lo);
          info.max_value = LeBytes(&hi);
        }
      } else if (type == ValueType::kDouble) {
        info.type = kDouble;
        double lo = std::numeric_limits<double>::infinity(), hi = -lo;
        bool nan = false;
        for (std::size_t i = first; i < last; ++i) {
          double v = table.GetDouble(layout.order[i], c);
          if (v != v) nan = true;
          lo = std::min(lo, v);
          hi = std::max(hi, v);
          raw.append(reinterpret_cast<const char*>(&v), 8);
        }
        if (count > 0 && !nan) {
          // The format asks for -0.0 as a zero minimum and +0.0 as a zero maximum.
          if (lo == 0) lo = -0.0;
          if (hi == 0) hi = 0.0;
          info.has_stats = true;
          info.min_value = LeBytes(&lo);
          info.max_value = LeBytes(&hi);
        }
      } else {
        info.type = kByteArray;
        // std::string orders by unsigned bytes, the order of UTF-8 statistics.
        const std::string* lo = nullptr;
        const std::string* hi = nullptr;
        for (std::size_t i = first; i < last; ++i) {
          const std::string& v = table.GetString(layout.order[i], c);
          if (!lo || v < *lo) lo = &v;
          if (!hi || v > *hi) hi = &v;
        }
        if (lo) {
          info.has_stats = true;
          info.min_value = *lo;
          info.max_value = *hi;
        }
        if (options.dictionary) {
          std::unordered_map<std::string_view, std::uint32_t> ids;
          std::vector<std::uint32_t> indices;
          std::string dict_raw;
          for (std::size_t i = first; i < last; ++i) {
            const std::string& s = table.GetString(layout.order[i], c);
            auto [it, inserted] = ids.emplace(s, static_cast<std::uint32_t>(ids.size()));
            if (inserted) {
              PutLe32(dict_raw, static_cast<std::uint32_t>(s.size()));
              dict_raw += s;
            }
            indices.push_back(it->second);
          }
          int bit_width = 1;
          while (bit_width < 32 && (std::uint64_t{1} << bit_width) < ids.size()) ++bit_width;
          info.dictionary_offset = static_cast<std::int64_t>(out.size());
          WritePage(out, info, options, dict_raw, true, static_cast<std::int32_t>(ids.size()), kPlain);
          raw.push_back(static_cast<char>(bit_width));
          raw += EncodeHybrid(indices, bit_width);
          info.data_offset = static_cast<std::int64_t>(out.size());
          WritePage(out, info, options, raw, false, count, kRleDictionary);
          chunks.push_back(info);
          continue;
        }
        for (std::size_t i = first; i < last; ++i) {
          const std::string& s = table.GetString(layout.order[i], c);
          PutLe32(raw, static_cast<std::uint32_t>(s.size()));
          raw += s;
        }
      }
      info.data_offset = static_cast<std::int64_t>(out.size());
      WritePage(out, info, options, raw, false, count, kPlain);
      chunks.push_back(info);
    }
    groups.push_back(std::move(chunks));
  }

  ThriftWriter w;
  w.BeginStruct();
  w.FieldI32(1, 1);
  w.FieldList(2, ThriftType::kStruct, static_cast<std::uint32_t>(ncols + 1));
  w.BeginStruct();
  w.FieldBinary(4, "schema");
  w.FieldI32(5, static_cast<std::int32_t>(ncols));
  w.EndStruct();
  for (const ColumnSpec& spec : table.columns()) {
    w.BeginStruct();
    w.FieldI32(1, spec.type == ValueType::kInt64 ? kInt64 : spec.type == ValueType::kDouble ? kDouble : kByteArray);
    w.FieldI32(3, kRequired);
    w.FieldBinary(4, spec.name);
    if (spec.type == ValueType::kString) {
      w.FieldI32(6, kConvertedUtf8);
      w.FieldStruct(10);  // logicalType: STRING
      w.BeginStruct();
      w.FieldStruct(1);
      w.BeginStruct();
      w.EndStruct();
      w.EndStruct();
    }
    w.EndStruct();
  }
  w.FieldI64(3, static_cast<std::int64_t>(nrows));
  w.FieldList(4, ThriftType::kStruct, static_cast<std::uint32_t>(groups.size()));
  for (std::size_t g = 0; g < groups.size(); ++g) {
    w.BeginStruct();
    w.FieldList(1, ThriftType::kStruct, static_cast<std::uint32_t>(ncols));
    std::int64_t total = 0;
    for (std::size_t c = 0; c < ncols; ++c) {
      const ChunkInfo& info = groups[g][c];
      total += info.uncompressed;
      w.BeginStruct();
      w.FieldI64(2, info.offset);
      w.FieldStruct(3);
      w.BeginStruct();
      w.FieldI32(1, info.type);
      bool dict = info.dictionary_offset >= 0;
      w.FieldList(2, ThriftType::kI32, dict ? 3 : 2);
      w.I32(kPlain);
      w.I32(kRle);
      if (dict) w.I32(kRleDictionary);
      w.FieldList(3, ThriftType::kBinary, 1);
      w.Binary(table.columns()[c].name);
      w.FieldI32(4, CodecCode(options.codec));
      w.FieldI64(5, info.num_values);
      w.FieldI64(6, info.uncompressed);
      w.FieldI64(7, info.compressed);
      w.FieldI64(9, info.data_offset);
      if (dict) w.FieldI64(11, info.dictionary_offset);
      if (info.has_stats) {
        w.FieldStruct(12);  // Statistics
        w.BeginStruct();
        w.FieldI64(3, 0);   // null_count
        w.FieldBinary(5, info.max_value);
        w.FieldBinary(6, info.min_value);
        w.EndStruct();
      }
      w.EndStruct();
      w.EndStruct();
    }
    w.FieldI64(2, total);
    w.FieldI64(3, static_cast<std::int64_t>(layout.groups[g].second - layout.groups[g].first));
    w.EndStruct();
  }
  w.FieldBinary(6, "servecast");
  // column_orders: TYPE_ORDER for every column, which makes min_value / max_value defined.
  w.FieldList(7, ThriftType::kStruct, static_cast<std::uint32_t>(ncols));
  for (std::size_t c = 0; c < ncols; ++c) {
    w.BeginStruct();
    w.FieldStruct(1);  // TYPE_ORDER: TypeDefinedOrder {}
    w.BeginStruct();
    w.EndStruct();
    w.EndStruct();
  }
  w.EndStruct();
  out += w.bytes();
  PutLe32(out, static_cast<std::uint32_t>(w.bytes().size()));
  out += "PAR1";
  return out;
}

void WriteParquet(const Table& table, const std::string& path, const ParquetWriteOptions& options) {
  WriteFileAtomic(path, SerializeParquet(table, options));
}

}  // namespace servecast
