#pragma once

// The HTML report of a deployment search (docs/search.md, "Reports"): one
// self-contained file (inline CSS and SVG, no scripts, fonts or images) with the
// summary, the chosen deployment, a Pareto chart, the top-N tables and the skip
// counts of each mode.

#include <string>
#include <string_view>

#include "report/terminal.h"
#include "search/search.h"

namespace servecast::report {

// Where the Pareto chart puts things: pixel plot area inside a width x height
// canvas, and axes from 0 to x_max (tokens/s/user) and 0 to y_max (tokens/s/GPU).
struct ChartLayout {
  int width = 960, height = 540;
  double left = 84, right = 28, top = 28, bottom = 64;  // margins, px
  double x_max = 1, y_max = 1;                          // axis ends (multiples of the tick steps)
  double x_step = 1, y_step = 1;                        // tick spacing
  double X(double tokens_per_s_user) const;
  double Y(double tokens_per_s_gpu) const;
  double PlotWidth() const { return width - left - right; }
  double PlotHeight() const { return height - top - bottom; }
};

// The layout for a search: axes cover every feasible point and the TPOT limit
// (1000 / tpot tokens/s/user) with round tick steps.
ChartLayout ParetoLayout(const search::SearchResult& r, const search::SearchInputs& in, int width = 960,
                         int height = 540);

// An SVG Pareto chart: every feasible point faint, each mode's frontier as a line
// with markers, the TPOT limit as a vertical line, the chosen point labelled, a legend.
// Elements carry classes for tests and styling: `point-<mode>`, `frontier-<mode>`,
// `sla`, `chosen`.
std::string ParetoSvg(const search::SearchResult& r, const search::SearchInputs& in, int width = 960, int height = 540);

// The whole report page.
std::string HtmlReport(const search::SearchResult& r, const ReportContext& c);

// Text escaped for HTML and SVG content and attribute values (& < > " ').
std::string HtmlEscape(std::string_view s);

// A round tick step (1, 2, 2.5 or 5 x 10^k) giving about `ticks` intervals up to `max`.
double NiceStep(double max, int ticks = 6);

}  // namespace servecast::report
