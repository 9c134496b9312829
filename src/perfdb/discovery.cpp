#include "perfdb/discovery.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <tuple>

#include "core/error.h"
#include "core/table_file.h"
#include "core/yaml_util.h"

namespace servecast::perfdb {
namespace {

namespace fs = std::filesystem;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Sub-directories of `dir`, sorted by name; hidden entries are skipped.
std::vector<fs::path> SubDirs(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    std::error_code ec2;
    if (it->is_directory(ec2)) out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// "cublaslt13.1" -> ("cublaslt", 13.1); "abc" -> ("abc", none).
std::pair<std::string, std::optional<Version>> SplitPart(const std::string& part) {
  std::size_t i = 0;
  while (i < part.size() && !std::isdigit(static_cast<unsigned char>(part[i]))) ++i;
  std::optional<Version> v;
  if (i < part.size()) v = Version::TryParse(part.substr(i));
  return {part.substr(0, i), v};
}

int Sign(std::strong_ordering o) {
  return o < 0 ? -1 : (o > 0 ? 1 : 0);
}

int CompareOptVersion(const std::optional<Version>& a, const std::optional<Version>& b) {
  if (a && b) return Sign(*a <=> *b);
  if (a) return 1;
  if (b) return -1;
  return 0;
}

std::vector<std::string> SplitDash(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    std::size_t p = s.find('-', start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

}  // namespace

std::optional<Version> LeadingVersion(const std::string& dir_name) {
  if (auto v = Version::TryParse(dir_name)) return v;
  return Version::TryParse(SplitDash(dir_name).front());
}

int CompareVersionDirs(const std::string& a, const std::string& b) {
  if (a == b) return 0;
  auto va = LeadingVersion(a);
  auto vb = LeadingVersion(b);
  if (int c = CompareOptVersion(va, vb); c != 0) return c;
  if (va && vb && !Version::TryParse(a) != !Version::TryParse(b)) {
    // "13.0" (a whole version) before "13.0-cublaslt..." (the same plus a stack).
    return Version::TryParse(a) ? -1 : 1;
  }
  if (va && vb && !Version::TryParse(a)) {
    auto pa = SplitDash(a);
    auto pb = SplitDash(b);
    for (std::size_t i = 1; i < pa.size() && i < pb.size(); ++i) {
      auto [na, xa] = SplitPart(pa[i]);
      auto [nb, xb] = SplitPart(pb[i]);
      if (na != nb) return na < nb ? -1 : 1;
      if (int c = CompareOptVersion(xa, xb); c != 0) return c;
    }
    if (pa.size() != pb.size()) return pa.size() < pb.size() ? -1 : 1;
  }
  return a < b ? -1 : 1;
}

std::vector<ReuseEntry> ReadReuseYaml(const std::string& path) {
  YAML::Node root = LoadYamlFile(path);
  std::vector<ReuseEntry> out;
  if (!root || root.IsNull()) return out;
  if (!root.IsMap())
    throw ConfigError(YamlWhere(path, root), "reuse.yaml is not a mapping", "keys schema_version, reuse");
  YamlReader top(path, root);
  if (!top.Has("reuse")) return out;
  YAML::Node list = root["reuse"];
  if (list.IsNull()) return out;
  if (!list.IsSequence())
    throw ConfigError(YamlWhere(path, list, "reuse"), "'reuse' is not a list", "a list of {table, from_version, ...}");
  for (std::size_t i = 0; i < list.size(); ++i) {
    YamlReader item(path, list[i], "reuse[" + std::to_string(i) + "]");
    ReuseEntry e;
    e.table = item.RequiredString("table");
    e.from_version = item.RequiredString("from_version");
    e.reason = item.OptionalString("reason", "");
    e.approved_by = item.OptionalString("approved_by", "");
    e.file = path;
    out.push_back(std::move(e));
  }
  return out;
}

DataTree DataTree::Scan(const std::vector<std::string>& roots) {
  DataTree tree;
  tree.roots_ = roots;
  using Key = std::tuple<std::string, std::string, std::string, std::string>;
  std::map<Key, VersionDir> found;
  std::set<std::string> reported;
  for (const std::string& root : roots) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) {
      tree.problems_.push_back("data root '" + root + "' is not a directory; skipped");
      continue;
    }
    for (const fs::path& sys : SubDirs(root)) {
      for (const fs::path& fam : SubDirs(sys)) {
        for (const fs::path& be : SubDirs(fam)) {
          for (const fs::path& ver : SubDirs(be)) {
            Key key{sys.filename().string(), fam.filename().string(), be.filename().string(), ver.filename().string()};
            VersionDir& d = found[key];
            std::tie(d.system, d.family, d.backend, d.version) = key;
            d.paths.push_back(ver.string());
            std::vector<fs::path> parquet, csv;
            for (fs::directory_iterator it(ver, ec), end; !ec && it != end; it.increment(ec)) {
              std::error_code ec2;
              if (!it->is_regular_file(ec2)) continue;
              std::string name = it->path().filename().string();
              if (name.empty() || name[0] == '.') continue;
              if (name == "reuse.yaml") {
                d.has_reuse_yaml = true;
                try {
                  auto entries = ReadReuseYaml(it->path().string());
                  d.reuse.insert(d.reuse.end(), entries.begin(), entries.end());
                } catch (const Error& e) {
                  d.reuse_error = e.what();
                  tree.problems_.push_back(e.what());
                }
              } else if (name == "collection_meta.yaml") {
                d.has_collection_meta = true;
              } else if (EndsWith(name, ".parquet")) {
                parquet.push_back(it->path());
              } else if (EndsWith(name, ".csv")) {
                csv.push_back(it->path());
              }
            }
            std::sort(parquet.begin(), parquet.end());
            std::sort(csv.begin(), csv.end());
            for (const auto* list : {&parquet, &csv})
              for (const fs::path& p : *list) d.tables[p.stem().string()].push_back(p.string());
            if (!LeadingVersion(d.version) && reported.insert(d.version).second)
              tree.problems_.push_back("version directory name '" + d.version + "' (" + ver.string() +
                                       ") is not a version; it sorts below every version");
          }
        }
      }
    }
  }
  for (auto& [key, d] : found) tree.dirs_.push_back(std::move(d));
  std::sort(tree.dirs_.begin(), tree.dirs_.end(), [](const VersionDir& a, const VersionDir& b) {
    if (std::tie(a.system, a.family, a.backend) != std::tie(b.system, b.family, b.backend))
      return std::tie(a.system, a.family, a.backend) < std::tie(b.system, b.family, b.backend);
    return VersionDirLess(a.version, b.version);
  });
  return tree;
}

std::vector<std::string> DataTree::Systems() const {
  std::set<std::string> s;
  for (const auto& d : dirs_) s.insert(d.system);
  return {s.begin(), s.end()};
}

std::vector<std::string> DataTree::Families(const std::string& system) const {
  std::set<std::string> s;
  for (const auto& d : dirs_)
    if (d.system == system) s.insert(d.family);
  return {s.begin(), s.end()};
}

std::vector<std::string> DataTree::Backends(const std::string& system) const {
  std::set<std::string> s;
  for (const auto& d : dirs_)
    if (d.system == system) s.insert(d.backend);
  return {s.begin(), s.end()};
}

std::vector<const VersionDir*> DataTree::Versions(const std::string& system, const std::string& family,
                                                  const std::string& backend) const {
  std::vector<const VersionDir*> out;
  for (const auto& d : dirs_)
    if (d.system == system && d.family == family && d.backend == backend) out.push_back(&d);
  return out;  // dirs_ is sorted, so these are oldest first
}

const VersionDir* DataTree::Find(const std::string& system, const std::string& family, const std::string& backend,
                                 const std::string& version) const {
  for (const auto& d : dirs_)
    if (d.system == system && d.family == family && d.backend == backend && d.version == version) return &d;
  return nullptr;
}

std::vector<std::string> DataTree::BackendVersions(const std::string& system, const std::string& backend,
                                                   bool with_tables_only) const {
  std::set<std::string> s;
  for (const auto& d : dirs_)
    if (d.system == system && d.backend == backend && (!with_tables_only || !d.marker_only())) s.insert(d.version);
  std::vector<std::string> out(s.begin(), s.end());
  std::sort(out.begin(), out.end(), VersionDirLess);
  return out;
}

Table LoadTableFile(const std::string& path) { return ReadTableFile(path); }

}  // namespace servecast::perfdb
