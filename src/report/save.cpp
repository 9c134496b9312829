#include "report/save.h"

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "core/error.h"
#include "core/fs.h"
#include "report/csv_out.h"
#include "report/html.h"

namespace servecast::report {

namespace {

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

std::string SanitizeName(std::string_view s) {
  std::string out;
  for (char ch : s) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                    ch == '_' || ch == '-';
    out += ok ? ch : '_';
  }
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

std::string ReportFolderName(const ReportContext& c) {
  const search::SearchInputs& in = c.inputs;
  // A model given as a folder is named by the folder's last component, not its path.
  std::string model = c.model ? c.model->name : "model";
  if (PathExists(model)) {
    const std::filesystem::path p = std::filesystem::path(model).lexically_normal();
    const std::string last = (p.has_filename() ? p : p.parent_path()).filename().string();
    if (!last.empty() && last != "." && last != "..") model = last;
  }
  std::string name = SanitizeName(model) + "_" + SanitizeName(c.system) + "_" + SanitizeName(c.engine) + "_isl" +
                     std::to_string(in.isl) + "_osl" + std::to_string(in.osl) + "_ttft" + Num(in.ttft_ms);
  name += in.request_latency_ms > 0 ? "_reqlat" + Num(in.request_latency_ms) : "_tpot" + Num(in.tpot_ms);
  return SanitizeName(name);
}

std::string SaveReport(const search::SearchResult& r, const ReportContext& c, const std::string& save_dir) {
  namespace fs = std::filesystem;
  MakeDirs(save_dir);
  const std::string base = ReportFolderName(c);
  fs::path dir;
  // create_directory is the claim: it fails with no error when the name is taken,
  // so two searches saving at once never share a folder.
  for (int k = 1;; ++k) {
    dir = fs::path(save_dir) / (k == 1 ? base : base + "-" + std::to_string(k));
    std::error_code ec;
    if (fs::create_directory(dir, ec)) break;
    if (ec) throw SystemError("cannot create directory " + dir.string(), ec.value());
    if (k >= 100000) throw SystemError("no free folder name for " + (fs::path(save_dir) / base).string(), EEXIST);
  }
  const std::string d = dir.string();
  WriteFileAtomic(d + "/summary.json", JsonReport(r, c).dump(2) + "\n");
  for (const search::ModeResult& m : r.modes) {
    const std::string md = d + "/" + search::ModeName(m.mode);
    WriteFileAtomic(md + "/pareto.csv", AllPointsCsv(m));
    WriteFileAtomic(md + "/frontier.csv", PointsCsv(m, m.frontier));
    WriteFileAtomic(md + "/best_config_topn.csv", PointsCsv(m, m.best, /*ranked=*/true));
  }
  WriteFileAtomic(d + "/report.html", HtmlReport(r, c));
  return d;
}

}  // namespace servecast::report
