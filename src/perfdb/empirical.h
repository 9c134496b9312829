#pragma once

// Util-empirical estimates (AIC §1.6, docs/perfdb.md, "Database modes"): an op's latency from
// the utilisation (SOL / measured latency) of the samples of its own slice.
//
//   - each axis is mapped to t = ln(max(v, 1e-9)) and normalised by the samples'
//     (min, span) on that axis (span 0: every value maps to 0);
//   - a query is normalised the same way and clamped per axis to [0, 1];
//   - a query on a sample (normalised distance 0) takes that sample's util;
//     otherwise the 2 nearest samples (Euclidean, normalised space; ties by
//     sample order) are blended with inverse-distance weights w = 1 / d;
//   - latency = SOL(q) / util.
// No samples -> EmpiricalNotAvailableError.
//
// When an op's own slice is absent or empty, the mode layer (modes.h) may borrow
// utils from other slices along the transfer ladder xshape -> xquant -> xprofile
// (-> xop, not built), each rung gated by a TransferPolicy.

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
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

// The rungs of the transfer ladder, in the order they are tried.
enum class TransferRung {
  kXshape,    // nearest collected shape, same quant
  kXquant,    // first sibling quant with the same (mem_bytes, flops_key)
  kXprofile,  // nearest other profile, util x e(query) / e(donor)
  kXop,       // cross-op with a manual scale (not built)
};
const char* TransferRungName(TransferRung rung);  // "xshape", "xquant", "xprofile", "xop"

// --transfer-policy presets (docs/perfdb.md "Transfers"):
//   kOff           own slice only
//   kConservative  + xshape
//   kBalanced      + xshape, xquant
//   kAggressive    every rung (AIC's default, also spelled "all")
enum class TransferPolicy { kOff, kConservative, kBalanced, kAggressive };

// "off", "conservative", "balanced", "aggressive", "all" (= aggressive). Anything
// else -> UsageError listing them.
TransferPolicy ParseTransferPolicy(std::string_view name);
const char* TransferPolicyName(TransferPolicy policy);
bool TransferAllows(TransferPolicy policy, TransferRung rung);

// Util levels e(q) of AIC §1.6, the xprofile scale is e(query) / e(donor).
//   GEMM: bfloat16/float16 .70, int8_wo (w8a16) .55, int4_wo (w4a16) .45,
//         fp8/fp8_block/fp8_static/fp8_ootb .45, nvfp4 (w4a4) .30, other .45.
//   MoE:  bfloat16/float16 .53, int8_wo .45, int4_wo/w4a16_mxfp4* .07,
//         fp8/fp8_block .40, w4afp8/w4a8_mxfp4_mxfp8* .15, nvfp4 .23, other .30.
double GemmUtilLevel(std::string_view quant);
double MoeUtilLevel(std::string_view quant);

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
