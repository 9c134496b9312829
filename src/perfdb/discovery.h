#pragma once

// Discovery of perf-data directories (docs/perfdb.md, "Layout").
//
//   <root>/<system>/<family>/<backend>/<version>/<table>.{parquet,csv}
//                                               collection_meta.yaml, reuse.yaml
//
// Several roots may be given (a `--systems-path` list); a system's data is the
// union over them. One (system, family, backend, version) found under several roots
// is one logical directory whose table files are listed in root order.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/table.h"
#include "core/version.h"

namespace servecast::perfdb {

// Ordering of version directory names. A name Version parses ("1.3.0rc20",
// "0.5.6.post2") orders by PEP 440. Otherwise the name is split on '-': the first
// part is the leading version ("13.0" of "13.0-cublaslt13.1-cudnn9.14-nccl2.28"),
// the other parts ("cublaslt13.1") order by their letters, then their number.
// A name with no leading version is unparsable and sorts below every parsable one.
// Distinct names never compare equal (the text breaks ties).
std::optional<Version> LeadingVersion(const std::string& dir_name);
int CompareVersionDirs(const std::string& a, const std::string& b);  // <0, 0, >0
inline bool VersionDirLess(const std::string& a, const std::string& b) {
  return CompareVersionDirs(a, b) < 0;
}

// One entry of reuse.yaml: `reuse: [{table, from_version, reason, approved_by}]`.
struct ReuseEntry {
  std::string table;
  std::string from_version;
  std::string reason;
  std::string approved_by;
  std::string file;  // the reuse.yaml it came from
};
// Reads reuse.yaml; throws ConfigError (file, line, key) when malformed.
std::vector<ReuseEntry> ReadReuseYaml(const std::string& path);

// One logical version directory (merged over roots).
struct VersionDir {
  std::string system;
  std::string family;
  std::string backend;
  std::string version;
  std::vector<std::string> paths;  // the directory under each root holding it, root order
  // table name (file stem) -> files, root order; within a root .parquet before .csv.
  std::map<std::string, std::vector<std::string>> tables;
  std::vector<ReuseEntry> reuse;  // from every reuse.yaml, root order
  std::string reuse_error;        // set when a reuse.yaml is malformed (raised when it is needed)
  bool has_reuse_yaml = false;
  bool has_collection_meta = false;

  // A directory with no table file (only markers) is never a primary source.
  bool marker_only() const { return tables.empty(); }
  bool HasTable(const std::string& table) const { return tables.count(table) != 0; }
};

// The scanned data tree. Scanning reads directory listings and reuse.yaml files
// only; tables are loaded later, on demand.
class DataTree {
 public:
  // Roots that do not exist are reported in problems(), not an error.
  static DataTree Scan(const std::vector<std::string>& roots);

  const std::vector<std::string>& roots() const { return roots_; }
  // All version directories, sorted by (system, family, backend, version order).
  const std::vector<VersionDir>& dirs() const { return dirs_; }
  // Things worth telling a user: missing roots, unparsable version names, ...
  const std::vector<std::string>& problems() const { return problems_; }

  std::vector<std::string> Systems() const;
  std::vector<std::string> Families(const std::string& system) const;
  std::vector<std::string> Backends(const std::string& system) const;  // over all families
  // Version dirs of (system, family, backend), oldest first.
  std::vector<const VersionDir*> Versions(const std::string& system, const std::string& family,
                                          const std::string& backend) const;
  const VersionDir* Find(const std::string& system, const std::string& family, const std::string& backend,
                         const std::string& version) const;
  // Distinct version names of (system, backend) over all families, oldest first;
  // with `with_tables_only`, marker-only directories do not count.
  std::vector<std::string> BackendVersions(const std::string& system, const std::string& backend,
                                           bool with_tables_only) const;

 private:
  std::vector<std::string> roots_;
  std::vector<VersionDir> dirs_;
  std::vector<std::string> problems_;
};

// Loads one table file: `.csv` through Table::ReadCsv, `.parquet` through the
// Parquet reader. Throws DataError for other extensions or unreadable files.
Table LoadTableFile(const std::string& path);

}  // namespace servecast::perfdb
