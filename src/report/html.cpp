#include "report/html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "core/build_info.h"

#include "model/family.h"
#include "report/format.h"

namespace servecast::report {

using search::Mode;
using search::ModeResult;
using search::Point;
using search::SearchResult;

namespace {

// Pixel coordinates with one decimal: small files, sub-pixel placement.
std::string Px(double v) {
  return Fmt("%.1f", v);
}

// A tick label: no trailing zeros, thousands as "k" above 10000.
std::string TickLabel(double v, double step) {
  if (v >= 10000 && std::fmod(v, 1000) == 0) return Fmt("%.0fk", v / 1000);
  if (step >= 1) return Fmt("%.0f", v);
  if (step >= 0.1) return Fmt("%.1f", v);
  return Fmt("%.2f", v);
}

struct ModeStyle {
  const char* colour;
  const char* label;
};

ModeStyle StyleOf(Mode m) {
  return m == Mode::kAgg ? ModeStyle{"#1f6fd1", "aggregated"} : ModeStyle{"#e0620d", "disaggregated"};
}

// A frontier marker: circles for agg, squares for disagg (tellable apart without colour).
std::string Marker(Mode m, double x, double y, double r, const std::string& cls, const std::string& extra = "") {
  if (m == Mode::kAgg)
    return "<circle class=\"" + cls + "\" cx=\"" + Px(x) + "\" cy=\"" + Px(y) + "\" r=\"" + Px(r) + "\"" + extra + "/>";
  return "<rect class=\"" + cls + "\" x=\"" + Px(x - r) + "\" y=\"" + Px(y - r) + "\" width=\"" + Px(2 * r) +
         "\" height=\"" + Px(2 * r) + "\"" + extra + "/>";
}

std::string ParallelOf(const model::ParallelConfig& c) { return c.Compact(); }

std::string LimitsText(const search::SearchInputs& in) {
  return "TTFT &le; " + Fmt("%g", in.ttft_ms) + " ms, " +
         (in.request_latency_ms > 0 ? "request latency &le; " + Fmt("%g", in.request_latency_ms) + " ms"
                                    : "TPOT &le; " + Fmt("%g", in.tpot_ms) + " ms");
}

std::string TopTable(const ModeResult& m) {
  const bool agg = m.mode == Mode::kAgg;
  std::vector<std::string> head = {"#",          "tokens/s per GPU", "tokens/s per user", "TTFT ms",         "TPOT ms",
                                   "request ms", "concur&shy;rency", "repli&shy;cas",     "GPUs per replica"};
  if (agg)
    head.insert(head.end(), {"parallel", "batch", "ctx tokens"});
  else
    head.insert(head.end(), {"prefill<br>workers &times; parallel", "prefill<br>batch",
                             "decode<br>workers &times; parallel", "decode<br>batch"});
  head.push_back("mem GiB");
  std::string out = "<table class=\"top\"><thead><tr>";
  for (std::size_t i = 0; i < head.size(); ++i)
    out += std::string(i < 9 ? "<th class=\"num\">" : "<th>") + head[i] + "</th>";
  out += "</tr></thead><tbody>\n";
  int rank = 0;
  for (std::size_t i : m.best) {
    const Point& p = m.points[i];
    out += p.meets_sla ? "<tr>" : "<tr class=\"miss\" title=\"misses the limits\">";
    const std::vector<std::string> nums = {std::to_string(++rank) + (p.meets_sla ? "" : "!"),
                                           Fmt("%.1f", p.tokens_per_s_gpu_cluster),
                                           Fmt("%.1f", p.tokens_per_s_user),
                                           Fmt("%.1f", p.ttft_ms),
                                           Fmt("%.2f", p.tpot_ms),
                                           Fmt("%.0f", p.request_latency_ms),
                                           std::to_string(p.concurrency * p.replicas),
                                           std::to_string(p.replicas),
                                           std::to_string(p.gpus_per_replica)};
    for (const auto& v : nums) out += "<td class=\"num\">" + v + "</td>";
    std::vector<std::string> rest;
    if (agg)
      rest = {ParallelOf(p.par), std::to_string(p.batch), std::to_string(p.ctx_tokens)};
    else
      rest = {std::to_string(p.prefill_workers) + " &times; " + ParallelOf(p.par), std::to_string(p.prefill_batch),
              std::to_string(p.decode_workers) + " &times; " + ParallelOf(p.decode_par), std::to_string(p.batch)};
    rest.push_back(Fmt("%.1f", p.memory_gib));
    for (std::size_t k = 0; k < rest.size(); ++k) {
      const bool par = k == 0 || (!agg && k == 2);  // the parallel layouts, the widest cells
      out += std::string(par ? "<td class=\"par\">" : "<td>") + rest[k] + "</td>";
    }
    out += "</tr>\n";
  }
  return out + "</tbody></table>\n";
}

const char* kCss = R"(
:root { --ink: #1d2433; --muted: #5b6475; --line: #d9dee7; --bg: #f6f7f9; --agg: #1f6fd1; --disagg: #e0620d; }
* { box-sizing: border-box; }
body { margin: 0; padding: 24px 32px 40px; background: var(--bg); color: var(--ink);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
h1 { font-size: 22px; margin: 0 0 2px; }
h2 { font-size: 17px; margin: 0 0 10px; }
.sub { color: var(--muted); margin: 0 0 18px; }
section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 16px 20px; margin: 0 0 16px; }
.facts { display: grid; grid-template-columns: repeat(auto-fill, minmax(220px, 1fr)); gap: 8px 24px; margin: 0; }
.facts div { min-width: 0; }
.facts div.wide { grid-column: 1 / -1; }
.facts dt { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.facts dd { margin: 0; font-weight: 600; overflow-wrap: anywhere; }
.chosen-box { border-left: 5px solid var(--ink); }
.chosen-box.agg { border-left-color: var(--agg); }
.chosen-box.disagg { border-left-color: var(--disagg); }
.headline { font-size: 26px; font-weight: 700; margin: 2px 0 6px; }
.headline small { font-size: 14px; font-weight: 400; color: var(--muted); }
.verdict { font-size: 15px; margin: 10px 0 0; }
.warn { color: #b42318; font-weight: 600; }
.tag { display: inline-block; padding: 1px 8px; border-radius: 10px; color: #fff; font-size: 12px; font-weight: 600;
       vertical-align: 2px; }
.tag.agg { background: var(--agg); } .tag.disagg { background: var(--disagg); }
.chart svg { width: 100%; height: auto; max-width: 1100px; display: block; }
.tablewrap { overflow-x: auto; }
table.top { border-collapse: collapse; font-size: 13px; white-space: nowrap; }
table.top th, table.top td { padding: 4px 6px; border-bottom: 1px solid var(--line); text-align: left; }
table.top th { background: #eef1f5; font-weight: 600; vertical-align: bottom; white-space: normal; }
table.top td.par { font-size: 12px; }
table.top .num { text-align: right; font-variant-numeric: tabular-nums; }
table.top tbody tr:first-child { font-weight: 600; }
table.top tr.miss td { color: #b42318; }
.stats { color: var(--muted); margin: 0 0 10px; }
ul.skips { margin: 10px 0 0; padding-left: 20px; color: var(--muted); }
footer { color: var(--muted); font-size: 12px; }
)";

}  // namespace

std::string HtmlEscape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

double NiceStep(double max, int ticks) {
  if (!(max > 0) || !std::isfinite(max)) return 1;
  const double raw = max / std::max(1, ticks);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  const double nice = f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10;
  return nice * mag;
}

double ChartLayout::X(double v) const {
  return left + v / x_max * PlotWidth();
}
double ChartLayout::Y(double v) const {
  return top + PlotHeight() - v / y_max * PlotHeight();
}

ChartLayout ParetoLayout(const SearchResult& r, const search::SearchInputs& in, int width, int height) {
  ChartLayout l;
  l.width = width;
  l.height = height;
  double xmax = 0, ymax = 0;
  for (const auto& m : r.modes)
    for (const Point& p : m.points) {
      xmax = std::max(xmax, p.tokens_per_s_user);
      ymax = std::max(ymax, p.tokens_per_s_gpu_cluster);
    }
  if (in.request_latency_ms <= 0 && in.tpot_ms > 0) xmax = std::max(xmax, 1000.0 / in.tpot_ms);
  xmax = xmax > 0 ? xmax * 1.04 : 1;
  ymax = ymax > 0 ? ymax * 1.06 : 1;
  // The tightest round axis end over 5 to 10 ticks (fewer ticks on a tie).
  auto fit = [](double max, double& step, double& end) {
    end = 0;
    for (int ticks = 5; ticks <= 10; ++ticks) {
      const double st = NiceStep(max, ticks), e = std::ceil(max / st - 1e-9) * st;
      if (end == 0 || e < end - 1e-9 * e) step = st, end = e;
    }
  };
  fit(xmax, l.x_step, l.x_max);
  fit(ymax, l.y_step, l.y_max);
  return l;
}

std::string ParetoSvg(const SearchResult& r, const search::SearchInputs& in, int width, int height) {
  const ChartLayout l = ParetoLayout(r, in, width, height);
  const double x0 = l.left, x1 = l.left + l.PlotWidth(), y0 = l.top, y1 = l.top + l.PlotHeight();
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + std::to_string(width) + " " +
                  std::to_string(height) + "\" width=\"" + std::to_string(width) + "\" height=\"" +
                  std::to_string(height) +
                  "\" role=\"img\" aria-label=\"Pareto frontier: tokens/s/GPU against tokens/s/user\" "
                  "font-family=\"system-ui, sans-serif\" font-size=\"12\">\n";
  s += "<rect x=\"0\" y=\"0\" width=\"" + std::to_string(width) + "\" height=\"" + std::to_string(height) +
       "\" fill=\"#fff\"/>\n";

  // The region below the TPOT limit (slower per user than allowed), shaded.
  const bool tpot_line = in.request_latency_ms <= 0 && in.tpot_ms > 0;
  const double sla_x = tpot_line ? 1000.0 / in.tpot_ms : 0;
  if (tpot_line)
    s += "<rect class=\"sla-miss\" x=\"" + Px(x0) + "\" y=\"" + Px(y0) + "\" width=\"" + Px(l.X(sla_x) - x0) +
         "\" height=\"" + Px(y1 - y0) + "\" fill=\"#f3f4f6\"/>\n";

  // Grid and ticks.
  s += "<g class=\"grid\" stroke=\"#e5e7eb\" stroke-width=\"1\">\n";
  const int nx = static_cast<int>(std::lround(l.x_max / l.x_step)),
            ny = static_cast<int>(std::lround(l.y_max / l.y_step));
  for (int i = 1; i <= nx; ++i)
    s += "<line x1=\"" + Px(l.X(i * l.x_step)) + "\" y1=\"" + Px(y0) + "\" x2=\"" + Px(l.X(i * l.x_step)) + "\" y2=\"" +
         Px(y1) + "\"/>";
  for (int i = 1; i <= ny; ++i)
    s += "<line x1=\"" + Px(x0) + "\" y1=\"" + Px(l.Y(i * l.y_step)) + "\" x2=\"" + Px(x1) + "\" y2=\"" +
         Px(l.Y(i * l.y_step)) + "\"/>";
  s += "\n</g>\n<g class=\"axes\" fill=\"#374151\">\n";
  s += "<line x1=\"" + Px(x0) + "\" y1=\"" + Px(y1) + "\" x2=\"" + Px(x1) + "\" y2=\"" + Px(y1) +
       "\" stroke=\"#374151\"/><line x1=\"" + Px(x0) + "\" y1=\"" + Px(y0) + "\" x2=\"" + Px(x0) + "\" y2=\"" + Px(y1) +
       "\" stroke=\"#374151\"/>\n";
  for (int i = 0; i <= nx; ++i) {
    const double v = i * l.x_step, x = l.X(v);
    s += "<line x1=\"" + Px(x) + "\" y1=\"" + Px(y1) + "\" x2=\"" + Px(x) + "\" y2=\"" + Px(y1 + 5) +
         "\" stroke=\"#374151\"/><text class=\"xtick\" x=\"" + Px(x) + "\" y=\"" + Px(y1 + 19) +
         "\" text-anchor=\"middle\">" + TickLabel(v, l.x_step) + "</text>\n";
  }
  for (int i = 0; i <= ny; ++i) {
    const double v = i * l.y_step, y = l.Y(v);
    s += "<line x1=\"" + Px(x0 - 5) + "\" y1=\"" + Px(y) + "\" x2=\"" + Px(x0) + "\" y2=\"" + Px(y) +
         "\" stroke=\"#374151\"/><text class=\"ytick\" x=\"" + Px(x0 - 9) + "\" y=\"" + Px(y + 4) +
         "\" text-anchor=\"end\">" + TickLabel(v, l.y_step) + "</text>\n";
  }
  s += "<text x=\"" + Px((x0 + x1) / 2) + "\" y=\"" + Px(height - 14.0) +
       "\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"600\">tokens/s/user</text>\n";
  s += "<text x=\"18\" y=\"" + Px((y0 + y1) / 2) +
       "\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"600\" "
       "transform=\"rotate(-90 18 " +
       Px((y0 + y1) / 2) + ")\">tokens/s/GPU</text>\n</g>\n";

  // Every feasible point, faint.
  for (const ModeResult& m : r.modes) {
    const std::string name = search::ModeName(m.mode);
    s += "<g class=\"points point-" + name + "\" fill=\"" + StyleOf(m.mode).colour + "\" fill-opacity=\"0.16\">";
    for (const Point& p : m.points)
      s += "<circle cx=\"" + Px(l.X(p.tokens_per_s_user)) + "\" cy=\"" + Px(l.Y(p.tokens_per_s_gpu_cluster)) +
           "\" r=\"2\"/>";
    s += "</g>\n";
  }

  // The TPOT limit.
  if (tpot_line) {
    const double x = l.X(sla_x);
    s += "<line class=\"sla\" data-tokens-per-s-user=\"" + Fmt("%.6g", sla_x) + "\" x1=\"" + Px(x) + "\" y1=\"" +
         Px(y0) + "\" x2=\"" + Px(x) + "\" y2=\"" + Px(y1) +
         "\" stroke=\"#b42318\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\n";
    const bool left_side = l.X(sla_x) > (x0 + x1) / 2;
    s += "<text class=\"sla-label\" x=\"" + Px(x + (left_side ? -6 : 6)) + "\" y=\"" + Px(y0 + 14) +
         "\" text-anchor=\"" + (left_side ? "end" : "start") + "\" fill=\"#b42318\">TPOT " + Fmt("%g", in.tpot_ms) +
         " ms = " + Fmt("%.3g", sla_x) + " tokens/s/user</text>\n";
  }

  // Frontiers: a line and markers per mode.
  for (const ModeResult& m : r.modes) {
    if (m.frontier.empty()) continue;
    const std::string name = search::ModeName(m.mode);
    const char* colour = StyleOf(m.mode).colour;
    std::string pts;
    for (std::size_t i : m.frontier) {
      const Point& p = m.points[i];
      if (!pts.empty()) pts += ' ';
      pts += Px(l.X(p.tokens_per_s_user)) + "," + Px(l.Y(p.tokens_per_s_gpu_cluster));
    }
    s += "<polyline class=\"frontier frontier-" + name + "\" points=\"" + pts + "\" fill=\"none\" stroke=\"" + colour +
         "\" stroke-width=\"2.2\" stroke-linejoin=\"round\"/>\n<g class=\"markers-" + name + "\" fill=\"" + colour +
         "\" stroke=\"#fff\" stroke-width=\"1\">";
    for (std::size_t i : m.frontier) {
      const Point& p = m.points[i];
      s += Marker(m.mode, l.X(p.tokens_per_s_user), l.Y(p.tokens_per_s_gpu_cluster), 3.8, "marker");
    }
    s += "</g>\n";
  }

  // The chosen deployment.
  if (const Point* c = search::ChosenPoint(r)) {
    const double x = l.X(c->tokens_per_s_user), y = l.Y(c->tokens_per_s_gpu_cluster);
    s += "<g class=\"chosen\">";
    s += "<circle cx=\"" + Px(x) + "\" cy=\"" + Px(y) +
         "\" r=\"9\" fill=\"none\" stroke=\"#111827\" "
         "stroke-width=\"2.2\"/>";
    s += "<circle cx=\"" + Px(x) + "\" cy=\"" + Px(y) + "\" r=\"4.5\" fill=\"#facc15\" stroke=\"#111827\"/>";
    const bool right_half = x > (x0 + x1) / 2;
    const bool near_top = y < y0 + 40;
    const double tx = x + (right_half ? -14 : 14), ty = near_top ? y + 26 : y - 14;
    const std::string anchor = right_half ? "end" : "start";
    const std::string line1 = "chosen: " + std::string(search::ModeName(c->mode)) + " " + HtmlEscape(c->Parallel());
    const std::string line2 =
        Fmt("%.1f tokens/s/GPU at ", c->tokens_per_s_gpu_cluster) + Fmt("%.1f tokens/s/user", c->tokens_per_s_user);
    for (const auto& [text, dy, weight] : {std::tuple{line1, 0.0, "700"}, std::tuple{line2, 15.0, "400"}}) {
      s += "<text x=\"" + Px(tx) + "\" y=\"" + Px(ty + dy) + "\" text-anchor=\"" + anchor + "\" font-weight=\"" +
           weight + "\" fill=\"#111827\" stroke=\"#fff\" stroke-width=\"4\" paint-order=\"stroke\">" + text + "</text>";
    }
    s += "</g>\n";
  }

  // Legend (top right: a Pareto frontier leaves that corner empty).
  std::vector<std::string> items;
  for (const ModeResult& m : r.modes) {
    const std::string name = search::ModeName(m.mode);
    const char* colour = StyleOf(m.mode).colour;
    items.push_back("<line x1=\"0\" y1=\"0\" x2=\"26\" y2=\"0\" stroke=\"" + std::string(colour) +
                    "\" stroke-width=\"2.2\"/>" +
                    Marker(m.mode, 13, 0, 3.8, "", " fill=\"" + std::string(colour) + "\" stroke=\"#fff\"") +
                    "<text x=\"34\" y=\"4\">" + name + " frontier</text>");
  }
  for (const ModeResult& m : r.modes)
    items.push_back("<circle cx=\"13\" cy=\"0\" r=\"3\" fill=\"" + std::string(StyleOf(m.mode).colour) +
                    "\" fill-opacity=\"0.35\"/><text x=\"34\" y=\"4\">" + search::ModeName(m.mode) +
                    " feasible points</text>");
  if (tpot_line)
    items.push_back(
        "<line x1=\"0\" y1=\"0\" x2=\"26\" y2=\"0\" stroke=\"#b42318\" stroke-width=\"1.5\" "
        "stroke-dasharray=\"6 4\"/><text x=\"34\" y=\"4\">TPOT limit</text>");
  if (search::ChosenPoint(r))
    items.push_back(
        "<circle cx=\"13\" cy=\"0\" r=\"6\" fill=\"none\" stroke=\"#111827\" stroke-width=\"2\"/>"
        "<circle cx=\"13\" cy=\"0\" r=\"3\" fill=\"#facc15\" stroke=\"#111827\"/>"
        "<text x=\"34\" y=\"4\">chosen deployment</text>");
  const double lw = 206, lh = 12 + 20.0 * static_cast<double>(items.size());
  const double lx = x1 - lw - 10, ly = y0 + 10;
  s += "<g class=\"legend\" transform=\"translate(" + Px(lx) + " " + Px(ly) + ")\"><rect width=\"" + Px(lw) +
       "\" height=\"" + Px(lh) + "\" rx=\"5\" fill=\"#fff\" fill-opacity=\"0.92\" stroke=\"#d1d5db\"/>";
  for (std::size_t i = 0; i < items.size(); ++i)
    s += "<g transform=\"translate(12 " + Px(16 + 20.0 * static_cast<double>(i)) + ")\">" + items[i] + "</g>";
  s += "</g>\n</svg>\n";
  return s;
}

std::string HtmlReport(const SearchResult& r, const ReportContext& c) {
  const search::SearchInputs& in = c.inputs;
  const std::string model = HtmlEscape(c.model ? c.model->name : std::string("?"));
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>servecast: " +
      model + " on " + std::to_string(in.total_gpus) + " &times; " + HtmlEscape(c.system) + "</title>\n<style>" + kCss +
      "</style>\n</head>\n<body>\n";
  h += "<h1>" + model + " on " + std::to_string(in.total_gpus) + " &times; " + HtmlEscape(c.device) + "</h1>\n";
  h += "<p class=\"sub\">servecast default &middot; deployment search &middot; engine " + HtmlEscape(c.engine) +
       " &middot; data " + HtmlEscape(c.data) + " (" + HtmlEscape(c.database_mode) + ")</p>\n";

  // Inputs.
  auto fact = [](const std::string& k, const std::string& v, bool wide = false) {
    return std::string(wide ? "<div class=\"wide\">" : "<div>") + "<dt>" + k + "</dt><dd>" + v + "</dd></div>";
  };
  h += "<section class=\"inputs\"><h2>Search</h2><dl class=\"facts\">";
  if (c.model) {
    std::string q = "gemm " + HtmlEscape(c.model->quant.gemm);
    if (model::FamilyOf(*c.model).HasExperts()) q += ", moe " + HtmlEscape(c.model->quant.moe);
    q += ", kv " + HtmlEscape(c.model->quant.kv);
    h += fact("Model", model + " <small>[" + HtmlEscape(model::FamilyOf(*c.model).Name()) + "]</small>");
    h += fact("Quantization", q);
  }
  h += fact("System", HtmlEscape(c.system) + " (" + HtmlEscape(c.device) + ")");
  h += fact("GPUs", std::to_string(in.total_gpus));
  h += fact("Engine", HtmlEscape(c.engine));
  h += fact("Perf data", HtmlEscape(c.data) + ", " + HtmlEscape(c.database_mode));
  h += fact("Workload", "ISL " + std::to_string(in.isl) + ", OSL " + std::to_string(in.osl) +
                            (in.prefix > 0 ? ", prefix " + std::to_string(in.prefix) : std::string()));
  h += fact("Limits", LimitsText(in));
  std::string modes;
  for (const ModeResult& m : r.modes) modes += (modes.empty() ? "" : ", ") + std::string(search::ModeName(m.mode));
  h += fact("Modes", modes.empty() ? "none" : modes);
  h += "</dl></section>\n";

  // The chosen deployment and the verdict.
  if (const Point* p = search::ChosenPoint(r)) {
    const ModeResult& cm = r.modes[static_cast<std::size_t>(r.chosen)];
    const std::string mode = search::ModeName(p->mode);
    h += "<section class=\"chosen-box " + mode + "\"><h2>Chosen deployment <span class=\"tag " + mode + "\">" + mode +
         "</span> " + HtmlEscape(p->Parallel()) + "</h2>\n";
    h += "<div class=\"headline\">" + Fmt("%.0f", p->tokens_per_s_gpu_cluster * in.total_gpus) +
         " tokens/s <small>on " + std::to_string(in.total_gpus) + " GPUs</small></div>\n<dl class=\"facts\">";
    h += fact("Per GPU", Fmt("%.1f tokens/s", p->tokens_per_s_gpu_cluster));
    h += fact("Per user", Fmt("%.1f tokens/s", p->tokens_per_s_user));
    h += fact("Requests", Fmt("%.2f /s", p->seq_per_s * p->replicas));
    h += fact("TTFT", Fmt("%.1f ms", p->ttft_ms));
    h += fact("TPOT", Fmt("%.2f ms", p->tpot_ms));
    h += fact("Request latency", Fmt("%.0f ms", p->request_latency_ms));
    h += fact("Replicas", std::to_string(p->replicas) + " &times; " + std::to_string(p->gpus_per_replica) + " GPUs");
    h += fact("Concurrency", std::to_string(p->concurrency * p->replicas));
    if (p->mode == Mode::kAgg) {
      h += fact("Worker", ParallelOf(p->par) + ", batch " + std::to_string(p->batch) + ", ctx tokens " +
                              std::to_string(p->ctx_tokens));
    } else {
      h += fact("Prefill", std::to_string(p->prefill_workers) + " &times; " + ParallelOf(p->par) + ", batch " +
                               std::to_string(p->prefill_batch));
      h += fact("Decode", std::to_string(p->decode_workers) + " &times; " + ParallelOf(p->decode_par) + ", batch " +
                              std::to_string(p->batch));
    }
    h += fact("Memory", Fmt("%.1f GiB per GPU", p->memory_gib));
    std::string data;
    for (const auto& n : c.data_notes) data += (data.empty() ? "" : "<br>") + HtmlEscape(n);
    // A full row: the notes are sentences, too long for one grid cell.
    h += fact("Data", data.empty() ? std::string("every op cost from measured or interpolated rows") : data, true);
    h += "</dl>\n<p class=\"verdict\">";
    const ModeResult* other = nullptr;
    for (const ModeResult& m : r.modes)
      if (&m != &cm) other = &m;
    if (!other) {
      h += "Only " + mode + " serving was searched.";
    } else if (r.chosen_ratio > 0) {
      const std::string o = search::ModeName(other->mode);
      h += "<b>" + mode + "</b> wins: its best deployment gives " + Fmt("%.2f&times;", r.chosen_ratio) +
           " the tokens/s/GPU of the best " + o + " deployment (" + Fmt("%.1f", p->tokens_per_s_gpu_cluster) +
           " against " +
           Fmt("%.1f", other->best.empty() ? 0.0 : other->points[other->best.front()].tokens_per_s_gpu_cluster) + ").";
    } else {
      h += "No " + std::string(search::ModeName(other->mode)) + " deployment could be estimated; " + mode +
           " is the only candidate.";
    }
    h += "</p>\n";
    if (!cm.best_meets_sla)
      h += "<p class=\"warn\">Nothing met the limits (" + LimitsText(in) +
           "): this is the nearest deployment, and it misses them.</p>\n";
    h += "</section>\n";
  } else {
    h += "<section class=\"chosen-box\"><h2>No deployment</h2><p class=\"warn\">No deployment could be estimated; "
         "see the skip counts below.</p></section>\n";
  }

  // Chart.
  h += "<section class=\"chart\"><h2>Pareto frontier</h2>\n" + ParetoSvg(r, in) +
       "<p class=\"stats\">Up: output tokens/s per GPU of the cluster (idle leftover GPUs counted); across: output "
       "tokens/s seen by one user. Faint dots are every feasible deployment (TTFT within the limit, fits in "
       "memory); lines join the non-dominated ones.";
  if (in.request_latency_ms <= 0)
    h += " Left of the dashed line the time per output token exceeds " + Fmt("%g", in.tpot_ms) + " ms.";
  h += "</p></section>\n";

  // Per-mode tables and skip counts.
  for (const ModeResult& m : r.modes) {
    const std::string name = search::ModeName(m.mode);
    h += "<section class=\"mode mode-" + name + "\"><h2><span class=\"tag " + name + "\">" + name + "</span> " +
         StyleOf(m.mode).label + " serving: top " + std::to_string(m.best.size()) + "</h2>\n";
    h += "<p class=\"stats\">" + std::to_string(m.parallel_configs) + " parallel configurations, " +
         std::to_string(m.evaluated) + " estimates, " + std::to_string(m.points.size()) + " feasible points, " +
         std::to_string(m.frontier.size()) + " on the frontier.</p>\n";
    if (!m.best.empty()) {
      h += "<div class=\"tablewrap\">" + TopTable(m) + "</div>\n";
      if (!m.best_meets_sla)
        h += "<p class=\"warn\">No " + name + " deployment meets the limits; the nearest are shown (marked !).</p>\n";
    } else {
      h += "<p class=\"warn\">No " + name + " deployment could be estimated.</p>\n";
    }
    if (!m.skipped.empty()) {
      h += "<ul class=\"skips\">";
      for (const SkipGroup& g : GroupSkips(m.skipped)) {
        h += "<li>skipped " + std::to_string(g.count) + ": " + HtmlEscape(g.reason);
        if (g.keys > 1)
          h += " (" + std::to_string(g.keys) + " keys, each in summary.json), e.g. " +
               HtmlEscape(g.example.substr(g.example.find(": ") + 2));
        h += "</li>";
      }
      h += "</ul>\n";
    }
    h += "</section>\n";
  }
  if (!c.launch_files.empty()) {
    h += "<section class=\"launch\"><h2>Launch files</h2><p class=\"stats\">Written beside this report by "
         "servecast generate: launch commands, manifests and a benchmark per mode (bench.sh) that checks the "
         "prediction on your cluster.</p><ul>";
    for (const auto& f : c.launch_files) h += "<li><a href=\"" + HtmlEscape(f) + "\">" + HtmlEscape(f) + "</a></li>";
    h += "</ul></section>\n";
  }
  h += "<footer>servecast " + HtmlEscape(BuildVersion()) + " (commit " + HtmlEscape(BuildCommit()) + ") &middot; " +
       Fmt("searched in %.2f s", r.seconds) + Fmt(" + %.2f s loading", c.load_seconds) +
       "</footer>\n</body>\n</html>\n";
  return h;
}

}  // namespace servecast::report
