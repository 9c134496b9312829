#pragma once

// `servecast db convert`: one perf table between CSV and Parquet.

#include <CLI/CLI.hpp>
#include <string>

namespace servecast::cli {

struct DbConvertArgs {
  std::string in, out;
  std::string codec = "zstd";
  bool replace = false;  // remove the input once the output and the provenance are written
};

CLI::App* AddDbConvertCommand(CLI::App& db, DbConvertArgs& args);

// Writes `out` from `in` (formats by extension). A table of a known name is
// written with its declaration's layout (Parquet row groups by its slice
// columns). When `in` sits in a folder whose collection_meta.yaml lists it and
// `out` is in the same folder, the table's entry is pointed at `out` and gains a
// `converted` record (from, sha256 of the input, rows, time, servecast commit).
// UsageError: input = output, an output that is a folder, a bad extension or
// codec, `--replace` across folders.
int RunDbConvert(const DbConvertArgs& args);

}  // namespace servecast::cli
