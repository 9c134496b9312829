#pragma once

// --data-root values: folders, or the name of an installed tool whose data tree
// servecast reads in place (docs/commands.md, "Data roots by name").

#include <string>
#include <vector>

namespace servecast::cli {

// The --help text of --data-root (every command that reads perf data).
inline constexpr const char* kDataRootHelp =
    "data root folder (repeat; default: systems/data of the installation); the name aiconfigurator: the data tree "
    "of an installed aiconfigurator; a path that is not a folder exits 2";

// Where an installed aiconfigurator keeps its perf data: the first
// <site-packages>/aiconfigurator_core/systems/data (0.12 and later) or
// <site-packages>/aiconfigurator/systems/data (earlier releases) found under, in
// order: $VIRTUAL_ENV, the interpreter named by the shebang of each
// `aiconfigurator` script on $PATH, the prefix of each `aiconfigurator` and
// `python3` on $PATH, $PYTHONPATH entries, ~/.local. `looked` receives the
// site-packages folders searched. "" when none holds it. `version` receives the
// installed version (from its .dist-info folder name) when known.
std::string FindAiconfiguratorData(std::vector<std::string>* looked, std::string* version);

// Each --data-root value as a folder: an existing path is kept; the name
// `aiconfigurator` (any case) is replaced by FindAiconfiguratorData's folder, with
// a note on stderr naming it, or a UsageError listing where it looked; any other
// value (a missing path, a file) is a UsageError naming it, after `flag` (the
// option or argument that gave it: --data-root, db query's --systems-path, ...).
std::vector<std::string> ResolveDataRoots(const std::vector<std::string>& roots,
                                          const std::string& flag = "--data-root");

}  // namespace servecast::cli
