#pragma once

#include <string>
#include <string_view>

#include "core/error.h"
#include "system/system_spec.h"

namespace servecast::perfdb {

// How a quantization mode moves bytes and which peak rate its math runs at
// (AIC's quant mappings): bytes per weight/activation element, and the system
// spec's peak_flops_per_s key.
struct QuantMode {
  double mem_bytes = 2;
  std::string flops_key = "bfloat16";
};
// GEMM and MoE modes: bfloat16, fp8, fp8_static, fp8_block, fp8_ootb, int8_wo,
// int4_wo, sq, nvfp4, nvfp4_wo, w4a16_nvfp4, w4afp8, w4a16_mxfp4. Unknown -> Error.
QuantMode GemmQuant(std::string_view mode);
QuantMode MoeQuant(std::string_view mode);
// Attention math: bfloat16 or fp8 (fp8_block) FMHA.
QuantMode FmhaQuant(std::string_view mode);
// KV-cache bytes per element: bfloat16 2, int8 1, fp8 1.
double KvCacheBytes(std::string_view kv_dtype);
// Collective element bytes: half/bfloat16/float16 2, int8 1, fp8 1.
double CommBytes(std::string_view dtype);

// A quant whose peak FLOP/s the system spec lacks: raised before any table lookup,
// never extrapolated from another dtype.
class MissingSystemFlopsError : public Error {
 public:
  using Error::Error;
};

// Speed-of-light times in milliseconds: max(math / peak FLOP/s, bytes / memory
// bandwidth) from the system spec (AIC §1.5 formulas). Pure functions of the
// shape; no empirical scaling.
class Sol {
 public:
  explicit Sol(systems::SystemSpec spec) : spec_(std::move(spec)) {}
  const systems::SystemSpec& spec() const { return spec_; }

  double PeakFlops(const std::string& key) const;  // MissingSystemFlopsError when absent or <= 0
  double MemMs(double bytes) const;                 // bytes / bandwidth
  // Bandwidth between `gpus` GPUs: intra-node up to a node, else inter-node.
  double P2pBandwidth(int gpus) const;

  double GemmMs(std::string_view quant, double m, double n, double k) const;
  // Prefill over `s` new tokens after `prefix` cached ones; window 0 = full causal.
  double ContextAttentionMs(double b, double s, double prefix, double n, double n_kv, double head_dim,
                            double window, std::string_view fmha_quant, std::string_view kv_dtype) const;
  // Decode with `s` = cached + new tokens (the table's isl + step); attends to
  // s - 1 keys (at most the window).
  double GenerationAttentionMs(double b, double s, double n, double n_kv, double head_dim, double window,
                               std::string_view kv_dtype) const;
  // MoE expert compute for `tokens` tokens (gated: three projections).
  double MoeMs(std::string_view quant, double tokens, double hidden, double inter, double topk, double experts,
               double moe_tp, double moe_ep, bool gated = true) const;
  // Collectives on `size` elements (all_reduce, all_gather, reduce_scatter, alltoall;
  // send_recv: each rank sends `size` to its neighbour).
  double CustomAllReduceMs(double size, int tp, std::string_view dtype = "half") const;
  double NcclMs(std::string_view op, double size, int gpus, std::string_view dtype) const;

 private:
  double Max(double flops, const std::string& key, double bytes) const;
  systems::SystemSpec spec_;
};

}  // namespace servecast::perfdb
