#include "cli/data_roots.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"

namespace servecast::cli {

namespace fs = std::filesystem;

namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> Split(const char* value, char sep) {
  std::vector<std::string> out;
  if (!value) return out;
  std::stringstream ss(value);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

bool IsDir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// <prefix>/lib/python*/site-packages and <prefix>/lib/python3/dist-packages.
void AddPrefix(const fs::path& prefix, std::vector<std::string>& out) {
  for (const char* lib : {"lib", "lib64"}) {
    const fs::path dir = prefix / lib;
    if (!IsDir(dir)) continue;
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("python", 0) != 0) continue;
      for (const char* sp : {"site-packages", "dist-packages"})
        if (IsDir(e.path() / sp)) found.push_back((e.path() / sp).string());
    }
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
}

// The interpreter of a script's "#!" line ("#!/usr/bin/env python3" names none).
std::string Shebang(const fs::path& script) {
  std::ifstream in(script);
  std::string line;
  if (!in || !std::getline(in, line) || line.rfind("#!", 0) != 0) return "";
  std::string interp = line.substr(2);
  interp.erase(0, interp.find_first_not_of(" \t"));
  interp = interp.substr(0, interp.find_first_of(" \t\r"));
  if (interp.empty() || fs::path(interp).filename() == "env") return "";
  return interp;
}

}  // namespace

std::string FindAiconfiguratorData(std::vector<std::string>* looked, std::string* version) {
  std::vector<std::string> sites;
  if (const char* venv = std::getenv("VIRTUAL_ENV"); venv && *venv) AddPrefix(venv, sites);
  for (const std::string& dir : Split(std::getenv("PATH"), ':')) {
    const fs::path tool = fs::path(dir) / "aiconfigurator";
    std::error_code ec;
    if (fs::is_regular_file(tool, ec)) {
      const std::string interp = Shebang(tool);
      if (!interp.empty()) AddPrefix(fs::path(interp).parent_path().parent_path(), sites);
      AddPrefix(fs::path(dir).parent_path(), sites);
    }
    if (fs::is_regular_file(fs::path(dir) / "python3", ec)) AddPrefix(fs::path(dir).parent_path(), sites);
  }
  for (const std::string& dir : Split(std::getenv("PYTHONPATH"), ':')) sites.push_back(dir);
  if (const char* home = std::getenv("HOME"); home && *home) AddPrefix(fs::path(home) / ".local", sites);
  std::set<std::string> seen;
  for (const std::string& site : sites) {
    if (!seen.insert(site).second) continue;
    if (looked) looked->push_back(site);
    for (const char* package : {"aiconfigurator_core", "aiconfigurator"}) {
      const fs::path data = fs::path(site) / package / "systems" / "data";
      if (!IsDir(data)) continue;
      if (version) {
        version->clear();
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(site, ec)) {
          const std::string name = e.path().filename().string();
          const std::string stem = std::string(package) + "-";
          if (name.rfind(stem, 0) == 0 && name.size() > stem.size() + 10 &&
              name.compare(name.size() - 10, 10, ".dist-info") == 0)
            *version = name.substr(stem.size(), name.size() - stem.size() - 10);
        }
      }
      return data.string();
    }
  }
  return "";
}

std::vector<std::string> ResolveDataRoots(const std::vector<std::string>& roots, const std::string& flag) {
  std::vector<std::string> out;
  for (const std::string& r : roots) {
    if (IsDir(r)) {
      out.push_back(r);
      continue;
    }
    if (Lower(r) != "aiconfigurator") {
      // A root that is not a folder would be skipped by the scan and end as "no perf
      // data" (exit 1) without naming it: refused here, with the path and the reason.
      std::error_code ec;
      const bool exists = fs::exists(r, ec);
      throw UsageError(flag + " " + r + ": " +
                       (exists ? std::string("not a folder") : std::string("no such folder")) +
                       "; expected a data root (a folder of <system>/<family>/<backend>/<version>/ tables, e.g. "
                       "systems/data) or the name aiconfigurator (an installed aiconfigurator's data)");
    }
    std::vector<std::string> looked;
    std::string version;
    const std::string data = FindAiconfiguratorData(&looked, &version);
    if (data.empty()) {
      std::string where;
      for (const std::string& l : looked) where += "\n  " + l;
      throw UsageError(flag + " " + r +
                       ": no installed aiconfigurator data tree (<site-packages>/aiconfigurator_core/systems/data) "
                       "was found; looked in $VIRTUAL_ENV, the aiconfigurator and python3 on $PATH, $PYTHONPATH "
                       "and ~/.local:" +
                       (where.empty() ? std::string(" no site-packages folder there") : where) +
                       "\ngive the folder itself, or activate the environment aiconfigurator is installed in");
    }
    std::fprintf(stderr, "note: --data-root %s: %s (aiconfigurator %s)\n", r.c_str(), data.c_str(),
                 version.empty() ? "of unknown version" : version.c_str());
    out.push_back(data);
  }
  return out;
}

}  // namespace servecast::cli
