#include "cli/db_convert.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>

#include "collect/finalize.h"
#include "collect/journal.h"
#include "collect/table_spec.h"
#include "core/build_info.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/table_file.h"
#include "core/yaml_util.h"

namespace servecast::cli {
namespace fs = std::filesystem;

CLI::App* AddDbConvertCommand(CLI::App& db, DbConvertArgs& a) {
  auto* c = db.add_subcommand("convert",
                              "convert one table between CSV and Parquet (by file extension); converting a table "
                              "in place in its data folder needs --replace, which moves its collection_meta.yaml "
                              "entry along");
  c->add_option("in", a.in, "input table (.csv or .parquet)")->required();
  c->add_option("out", a.out, "output table (.csv or .parquet)")->required();
  c->add_option("--codec", a.codec, "Parquet codec: zstd, snappy or none")->capture_default_str();
  c->add_flag("--replace", a.replace,
              "remove the input after writing the output and its provenance (same folder only)");
  return c;
}

namespace {

std::string Extension(const std::string& path) { return fs::path(path).extension().string(); }

bool SameFolder(const std::string& a, const std::string& b) {
  return fs::weakly_canonical(fs::absolute(a).parent_path()) == fs::weakly_canonical(fs::absolute(b).parent_path());
}

// The collection_meta.yaml beside `in` when it lists `in` as its table's file.
std::string MetaListing(const std::string& in) {
  const std::string meta_path = (fs::absolute(in).parent_path() / "collection_meta.yaml").string();
  if (!PathExists(meta_path)) return "";
  YAML::Node meta = LoadYamlFile(meta_path);
  const std::string table = fs::path(in).stem().string();
  if (!meta["tables"] || !meta["tables"][table]) return "";
  YAML::Node t = meta["tables"][table];
  if (!t["file"] || t["file"].as<std::string>() != fs::path(in).filename().string()) return "";
  return meta_path;
}

// The folder's provenance: the entry of the table that `in` holds, pointed at
// `out`, with a record of the conversion.
void MoveProvenance(const DbConvertArgs& a, const std::string& meta_path, const std::string& input_bytes,
                    std::size_t rows) {
  YAML::Node meta = LoadYamlFile(meta_path);
  const std::string table = fs::path(a.in).stem().string();
  YAML::Node t = meta["tables"][table];
  const std::string in_name = fs::path(a.in).filename().string();
  t["file"] = fs::path(a.out).filename().string();
  YAML::Node conv;
  conv["from"] = in_name;
  conv["sha256"] = "sha256:" + Sha256Hex(input_bytes);
  conv["rows"] = static_cast<long long>(rows);
  conv["at"] = collect::UtcNow();
  conv["servecast_commit"] = std::string(BuildCommit());
  t["converted"] = conv;
  collect::WriteCollectionMeta(meta_path, meta);
  std::printf("%s: entry '%s' now names %s\n", meta_path.c_str(), table.c_str(), t["file"].as<std::string>().c_str());
}

// One digest per row over the exact bits of every cell, sorted: equal for two
// tables that hold the same rows in any order.
std::vector<std::uint64_t> RowDigests(const Table& t) {
  std::vector<std::uint64_t> out(t.num_rows());
  for (std::size_t r = 0; r < t.num_rows(); ++r) {
    std::string row;
    for (std::size_t c = 0; c < t.num_columns(); ++c) {
      std::string cell;
      switch (t.columns()[c].type) {
        case ValueType::kInt64: {
          const std::int64_t v = t.GetInt(r, c);
          cell.assign(reinterpret_cast<const char*>(&v), sizeof v);
          break;
        }
        case ValueType::kDouble: {
          const double v = t.GetDouble(r, c);
          cell.assign(reinterpret_cast<const char*>(&v), sizeof v);
          break;
        }
        case ValueType::kString: cell = t.GetString(r, c); break;
      }
      const std::uint64_t len = cell.size();
      row.append(reinterpret_cast<const char*>(&len), sizeof len);
      row += cell;
    }
    out[r] = Fnv1a64(row);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int RunDbConvert(const DbConvertArgs& a) {
  const std::string in_ext = Extension(a.in), out_ext = Extension(a.out);
  if (in_ext != ".csv" && in_ext != ".parquet")
    throw UsageError("db convert: input '" + a.in + "' must end in .csv or .parquet");
  if (out_ext != ".csv" && out_ext != ".parquet")
    throw UsageError("db convert: output '" + a.out + "' must end in .csv or .parquet");
  if (fs::is_directory(a.out)) throw UsageError("db convert: output '" + a.out + "' is a folder; name a table file");
  if (fs::weakly_canonical(a.in) == fs::weakly_canonical(a.out))
    throw UsageError("db convert: input and output are the same file '" + a.in + "'");
  if (a.replace && !SameFolder(a.in, a.out))
    throw UsageError("db convert --replace: output '" + a.out + "' is not in the input's folder");
  const std::string meta_path = SameFolder(a.in, a.out) ? MetaListing(a.in) : "";
  if (!meta_path.empty() && !a.replace)
    throw UsageError("db convert: " + meta_path + " lists " + a.in +
                     " as this table's file and a data folder keeps a table in one format; convert in place with "
                     "--replace (the entry then names the output), or write the output to another folder");
  TableWriteOptions o;
  std::vector<ColumnSpec> csv_types;  // a known table's declared column types
  const collect::TableSpec* spec = collect::FindTableSpec(fs::path(a.in).stem().string());
  if (spec) {
    o = spec->WriteOptions();
    csv_types = spec->AllColumns(/*with_power=*/true);
  }
  if (a.codec == "zstd") o.parquet.codec = ParquetWriteOptions::Codec::kZstd;
  else if (a.codec == "snappy") o.parquet.codec = ParquetWriteOptions::Codec::kSnappy;
  else if (a.codec == "none") o.parquet.codec = ParquetWriteOptions::Codec::kUncompressed;
  else throw UsageError("db convert: --codec '" + a.codec + "'; expected zstd, snappy or none");

  const std::string bytes = ReadFile(a.in);
  Table t = ReadTableFile(a.in, csv_types);
  // Group columns the table lacks (a foreign table of a known name) are not a layout.
  std::vector<std::string> group_by;
  for (const auto& c : o.parquet.group_by)
    if (t.FindColumn(c) && t.columns()[*t.FindColumn(c)].type == ValueType::kString) group_by.push_back(c);
  o.parquet.group_by = group_by;
  // Written beside the output under a temporary name and read back (CSV with the
  // input's column types: 700.0 is written "700") before it takes the output's
  // name; nothing else changes until it reads back as the input did.
  const fs::path out_path(a.out);
  const std::string tmp = (out_path.parent_path() / ("." + out_path.stem().string() + ".converting" + out_ext)).string();
  try {
    WriteTableFile(t, tmp, o);
    const Table back = ReadTableFile(tmp, t.columns());
    if (back.columns() != t.columns() || RowDigests(back) != RowDigests(t))
      throw Error("db convert: " + a.out + " would not read back as " + a.in + " (" +
                  std::to_string(back.num_rows()) + " rows of " + std::to_string(t.num_rows()) +
                  "); nothing was changed");
    fs::rename(tmp, a.out);
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  if (!meta_path.empty()) MoveProvenance(a, meta_path, bytes, t.num_rows());
  if (a.replace) fs::remove(a.in);
  std::printf("%s: %zu rows, %zu columns -> %s%s\n", a.in.c_str(), t.num_rows(), t.num_columns(), a.out.c_str(),
              a.replace ? " (input removed)" : "");
  return 0;
}

}  // namespace servecast::cli
