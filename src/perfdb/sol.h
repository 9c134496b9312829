#pragma once

#include <string>
#include <string_view>

#include "core/error.h"
#include "system/system_spec.h"
#include "tables/cost_model.h"

namespace servecast::perfdb {

// The quantization profiles and dtype sizes are the cost model's
// (tables/cost_model.h); perfdb names them unqualified.
using tables::CommBytes;
using tables::FmhaQuant;
using tables::GemmQuant;
using tables::KvCacheBytes;
using tables::MoeQuant;
using tables::QuantMode;

// A quant whose peak FLOP/s the system spec lacks: raised before any table lookup,
// never extrapolated from another dtype.
class MissingSystemFlopsError : public Error {
 public:
  using Error::Error;
};

// Speed-of-light times in milliseconds: max(math / peak FLOP/s, bytes / memory
// bandwidth) of the op's roofline cost (tables/cost_model.h, AIC §1.5) at the
// system spec's rates. Pure functions of the shape; no empirical scaling.
class Sol {
 public:
  explicit Sol(systems::SystemSpec spec) : spec_(std::move(spec)) {}
  const systems::SystemSpec& spec() const { return spec_; }

  double PeakFlops(const std::string& key) const;  // MissingSystemFlopsError when absent or <= 0
  double MemMs(double bytes) const;                 // bytes / bandwidth
  // Bandwidth between `gpus` GPUs: intra-node up to a node, else inter-node.
  double P2pBandwidth(int gpus) const;

  // max(flops / PeakFlops(compute_dtype), bytes / bandwidth); no peak rate is
  // asked for when flops is 0.
  double Ms(const tables::OpCost& cost) const;

  double GemmMs(std::string_view quant, double m, double n, double k) const;
  // Prefill over `s` new tokens after `prefix` cached ones; window 0 = full causal.
  double ContextAttentionMs(double b, double s, double prefix, double n, double n_kv, double head_dim,
                            double window, std::string_view fmha_quant, std::string_view kv_dtype) const;
  // Decode with `s` = cached + new tokens (the table's isl + step); attends to
  // s - 1 keys (at most the window).
  double GenerationAttentionMs(double b, double s, double n, double n_kv, double head_dim, double window,
                               std::string_view kv_dtype) const;
  // MLA (tables/cost_model.h, DeepSeek geometry): prefill of `s` new tokens after
  // `prefix` cached ones; absorbed decode with `s` = cached + new tokens; the decode
  // BMMs over `t` tokens. `n` = local heads.
  double ContextMlaMs(double b, double s, double prefix, double n, std::string_view fmha_quant,
                      std::string_view kv_dtype) const;
  double GenerationMlaMs(double b, double s, double n, std::string_view kv_dtype) const;
  double MlaBmmMs(std::string_view bmm_quant, double t, double n) const;
  // MoE expert compute for `tokens` tokens (gated: three projections).
  double MoeMs(std::string_view quant, double tokens, double hidden, double inter, double topk, double experts,
               double moe_tp, double moe_ep, bool gated = true) const;
  // Collectives on `size` elements (all_reduce, all_gather, reduce_scatter, alltoall;
  // send_recv: each rank sends `size` to its neighbour).
  double CustomAllReduceMs(double size, int tp, std::string_view dtype = "half") const;
  double NcclMs(std::string_view op, double size, int gpus, std::string_view dtype) const;

 private:
  systems::SystemSpec spec_;
};

}  // namespace servecast::perfdb
