#include "perfdb/sol.h"

#include <algorithm>
#include <cmath>

namespace servecast::perfdb {
double Sol::PeakFlops(const std::string& key) const {
  auto it = spec_.gpu.peak_flops_per_s.find(key);
  double v = it == spec_.gpu.peak_flops_per_s.end() ? 0 : it->second;
  if (key == "fp8" && v <= 0) {
    auto b = spec_.gpu.peak_flops_per_s.find("fp8_block");
    if (b != spec_.gpu.peak_flops_per_s.end()) v = b->second;
  }
  if (!(v > 0))
    throw MissingSystemFlopsError("system '" + spec_.name + "' has no peak FLOP/s for '" + key +
                                  "'; add gpu.peak_flops_per_s." + key + " to its spec");
  return v;
}

double Sol::MemMs(double bytes) const { return 1e3 * bytes / spec_.gpu.mem_bw_bytes_per_s; }

double Sol::P2pBandwidth(int gpus) const {
  return systems::GroupBandwidth(spec_, gpus);
}

double Sol::Ms(const tables::OpCost& cost) const {
  double math = cost.flops > 0 ? 1e3 * cost.flops / PeakFlops(cost.compute_dtype) : 0;
  return std::max(math, MemMs(cost.bytes));
}

double Sol::GemmMs(std::string_view quant, double m, double n, double k) const {
  return Ms(tables::GemmRoofline(quant, m, n, k));
}

double Sol::ContextAttentionMs(double b, double s, double prefix, double n, double n_kv, double h, double w,
                               std::string_view fmha_quant, std::string_view kv_dtype) const {
  return Ms(tables::ContextAttentionRoofline(b, s, prefix, n, n_kv, h, w, fmha_quant, kv_dtype));
}

double Sol::GenerationAttentionMs(double b, double s, double n, double n_kv, double h, double w,
                                  std::string_view kv_dtype) const {
  return Ms(tables::GenerationAttentionRoofline(b, s, n, n_kv, h, w, kv_dtype, spec_.gpu.sm_version));
}

double Sol::ContextMlaMs(double b, double s, double prefix, double n, std::string_view fmha_quant,
                         std::string_view kv_dtype) const {
  return Ms(tables::ContextMlaRoofline(b, s, prefix, n, fmha_quant, kv_dtype));
}

double Sol::GenerationMlaMs(double b, double s, double n, std::string_view kv_dtype) const {
  return Ms(tables::GenerationMlaRoofline(b, s, n, kv_dtype, spec_.gpu.sm_version));
}

double Sol::MlaBmmMs(std::string_view bmm_quant, double t, double n) const {
  return Ms(tables::MlaBmmRoofline(bmm_quant, t, n));
}

double Sol::MoeMs(std::string_view quant, double tokens, double hidden, double inter, double topk, double experts,
                  double tp, double ep, bool gated) const {
  return Ms(tables::MoeRoofline(quant, tokens, hidden, inter, topk, experts, tp, ep, gated));
}

double Sol::CustomAllReduceMs(double size, int tp, std::string_view dtype) const {
  if (tp <= 1) return 0;
  return tables::CustomAllReduceRooflineMs(size, tp, dtype, P2pBandwidth(tp));
}

double Sol::NcclMs(std::string_view op, double size, int gpus, std::string_view dtype) const {
  if (gpus <= 1) return 0;
  return tables::CollectiveRooflineMs(op, size, gpus, dtype, P2pBandwidth(gpus));
}

}  // namespace servecast::perfdb
