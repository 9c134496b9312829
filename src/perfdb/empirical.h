#pragma once

// Util-empirical estimates (AIC §1.6, docs/perfdb_modes.md): an op's latency from
// the utilisation (SOL / measured latency) of the samples of its own slice.
//
//   - each axis is mapped to t = ln(max(v, 1e-9)) and normalised by the samples'
//     (min, span) on that axis (span 0: every value maps to 0);
//   - a query is normalised the same way and clamped per axis to [0, 1];
//   - a query on a sample (normalised distance 0) takes that sample's util;
//     otherwise the 2 nearest samples (Euclidean, normalised space; ties by
//     sample order) are blended with inverse-distance weights w = 1 / d;
//   - latency = SOL(q) / util.
// No samples -> EmpiricalNotAvailableError. Transfers from other slices
// (xshape, xquant, xprofile, xop) are not built.

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "perfdb/perf_database.h"

namespace servecast::perfdb {

// An op whose own slice has no samples: util-empirical cannot answer. The message
// names the op's slice, the query and why.
class EmpiricalNotAvailableError : public MissingDataError {
 public:
  EmpiricalNotAvailableError(const std::string& slice, const std::string& query, const std::string& reason);
  const std::string& slice() const { return slice_; }

 private:
  std::string slice_;
};

struct UtilSample {
  std::vector<double> coords;  // one per axis
  double util = 0;             // SOL / latency
};

// Which samples answered a query and how.
struct UtilLookup {
  double util = 0;
  bool exact = false;        // the query normalised onto a sample
  std::size_t nearest[2]{};  // sample indices (nearest first); [1] unused when exact or one sample
  std::size_t used = 0;      // samples blended: 1 or 2
};

class UtilGrid {
 public:
  // Samples with a non-finite or non-positive util, or the wrong arity, are
  // dropped (counted in dropped()).
  UtilGrid(std::string name, std::vector<std::string> axis_names, std::vector<UtilSample> samples);

  const std::string& name() const { return name_; }
  const std::vector<std::string>& axis_names() const { return axis_names_; }
  const std::vector<UtilSample>& samples() const { return samples_; }
  std::size_t dropped() const { return dropped_; }
  bool empty() const { return samples_.empty(); }

  // Normalised, clamped coordinates of a query (one per axis, each in [0, 1]).
  std::vector<double> Normalise(std::span<const double> q) const;
  // Throws EmpiricalNotAvailableError when empty, Error on a wrong arity.
  UtilLookup Lookup(std::span<const double> q) const;
  double Util(std::span<const double> q) const { return Lookup(q).util; }
  // "m [1, 8192] x n [128, 32768], 1234 samples"
  std::string CoveredRange() const;

 private:
  std::string FormatQuery(std::span<const double> q) const;
  std::string name_;
  std::vector<std::string> axis_names_;
  std::vector<UtilSample> samples_;
  std::vector<double> min_, span_;  // per axis, in ln space
  std::vector<double> norm_;        // samples x axes, row-major
  std::size_t dropped_ = 0;
};

}  // namespace servecast::perfdb
