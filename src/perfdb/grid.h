#pragma once

// The generic grid resolver of the perf database (docs/perfdb.md, "The grid resolver"): measured
// leaves at collected coordinates over N numeric axes (outer -> inner), and the
// rules that turn them into a latency at any query point (AIC §1.4):
//   1. exact hit -> the leaf verbatim (source silicon);
//   2. inside the data -> recursive bracket and blend, raw or sqrt value space per
//      axis, power blended linearly; a ragged branch (one child missing) is the
//      survivor times SOL(q) / SOL(q snapped to the survivor's key);
//   3. beyond the data -> util-hold anchored on measured leaves (extrapolated);
//   4. nothing to anchor on -> InterpolationMissError.

#include <cmath>
#include <cstddef>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "perfdb/perf_database.h"

namespace servecast::perfdb {

enum class EstimateSource { kSilicon, kInterpolated, kExtrapolated };
const char* EstimateSourceName(EstimateSource s);  // "silicon", "interpolated", "extrapolated"

// One answer of a table query.
struct Estimate {
  double latency_ms = 0;
  std::optional<double> power_w;  // when the table has a power column
  EstimateSource source = EstimateSource::kSilicon;
  double sol_fraction = 0;  // SOL(q) / latency_ms
};

// A query the data cannot answer. The message names the slice, the query, the
// reason, and the range the slice covers.
class InterpolationMissError : public MissingDataError {
 public:
  InterpolationMissError(const std::string& slice, const std::string& query, const std::string& reason,
                         const std::string& covered);
  const std::string& slice() const { return slice_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string slice_, reason_;
};

struct GridPoint {
  std::vector<double> coords;  // one per axis, outer -> inner
  double latency_ms = 0;
  std::optional<double> power_w;
};

// A table cell of the optional power column as a point's power: a NaN (the
// cell of a merged source without the column) or infinite value is no power.
inline std::optional<double> PowerCell(double v) {
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

struct GridOptions {
  std::string name;                     // slice name for messages ("context_attention_perf{...}")
  std::vector<std::string> axis_names;  // outer -> inner; its size is the number of axes
  int transform_axis = -1;              // axis blended in sqrt space; -1: none
  int k_tail = 1;                       // 1-axis hold: boundary points whose median util anchors
  int nn_leaves = 4;                    // multi-axis hold: nearest valid leaves
};

// Speed-of-light time (ms) at a coordinate vector of the grid's axes.
using GridSolFn = std::function<double(std::span<const double>)>;

class Grid {
 public:
  // Points with equal coordinates: the first one wins (later ones are counted in
  // duplicates_dropped()). Throws Error when a point's arity differs from the axes.
  Grid(GridOptions options, std::vector<GridPoint> points, GridSolFn sol);

  // Throws InterpolationMissError when nothing anchors the query.
  Estimate Query(std::span<const double> q) const;
  Estimate Query(std::initializer_list<double> q) const { return Query(std::span<const double>(q.begin(), q.size())); }

  const GridOptions& options() const { return options_; }
  const std::vector<GridPoint>& points() const { return points_; }  // kept leaves, input order
  std::size_t duplicates_dropped() const { return duplicates_dropped_; }
  double Sol(std::span<const double> q) const { return sol_(q); }
  // "num_heads [1, 96] x seq [1, 16384] x batch [1, 256], 1234 leaves"
  std::string CoveredRange() const;
  // Whether leaf `i` is strictly inside its siblings' key range on every axis
  // (removing it leaves a bracket on each level).
  bool IsInterior(std::size_t i) const;
  // A copy without leaf `i` (for leave-one-out checks).
  Grid Without(std::size_t i) const;

 private:
  enum class Status { kOk, kOutOfRange, kMiss };
  struct Partial {
    Status status = Status::kMiss;
    double latency_ms = 0;
    double power_w = 0;
    bool has_power = false;
    bool blended = false;
  };
  struct Node {
    std::size_t first = 0;  // into keys_ / children_
    std::size_t count = 0;
  };
  std::size_t Build(std::vector<std::size_t>::iterator begin, std::vector<std::size_t>::iterator end, std::size_t axis,
                    bool interior);
  Partial Resolve(std::size_t node, std::size_t axis, std::span<const double> q, std::vector<double>& scratch) const;
  Estimate Hold(std::span<const double> q, double sol_q) const;
  [[noreturn]] void Miss(std::span<const double> q, const std::string& reason) const;
  std::string FormatQuery(std::span<const double> q) const;

  GridOptions options_;
  GridSolFn sol_;
  std::vector<GridPoint> points_;
  std::vector<double> leaf_sol_;  // SOL at each leaf
  std::vector<Node> nodes_;       // nodes_[0] is the root
  std::vector<double> keys_;
  std::vector<std::size_t> children_;  // node index, or leaf index on the last axis
  std::vector<char> interior_;         // per leaf: see IsInterior
  std::size_t duplicates_dropped_ = 0;
};

// One sorted 1-D curve (token counts, message sizes): the fast path equal to a
// 1-axis Grid with k_tail = 1, raw blending.
class AxisCurve {
 public:
  using SolFn = std::function<double(double)>;
  // Equal keys: the first point wins.
  AxisCurve(std::string name, std::string axis_name, std::vector<GridPoint> points, SolFn sol);
  Estimate Query(double x) const;  // throws InterpolationMissError
  std::size_t size() const { return keys_.size(); }

 private:
  std::string name_, axis_name_;
  SolFn sol_;
  std::vector<double> keys_, lat_, power_, sol_at_;
  bool has_power_ = true;
};

}  // namespace servecast::perfdb
