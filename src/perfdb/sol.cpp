#include "perfdb/sol.h"

#include <algorithm>
#include <cmath>

namespace servecast::perfdb {
namespace {

bool In(std::string_view x, std::initializer_list<std::string_view> set) {
  for (auto s : set)
    if (x == s) return true;
  return false;
}

}  // namespace

QuantMode GemmQuant(std::string_view mode) {
  if (mode == "bfloat16" || mode == "float16") return {2, "bfloat16"};
  if (In(mode, {"fp8", "fp8_static", "fp8_block", "fp8_ootb"})) return {1, "fp8"};
  if (mode == "int8_wo") return {1, "bfloat16"};
  if (mode == "int4_wo") return {0.5, "bfloat16"};
  if (mode == "sq") return {1, "int8"};
  if (mode == "nvfp4") return {9.0 / 16.0, "nvfp4"};
  if (In(mode, {"nvfp4_wo", "w4a16_nvfp4"})) return {9.0 / 16.0, "bfloat16"};
  throw Error("unknown GEMM quantization '" + std::string(mode) +
              "'; expected bfloat16, fp8, fp8_static, fp8_block, fp8_ootb, int8_wo, int4_wo, sq, nvfp4, nvfp4_wo");
}

QuantMode MoeQuant(std::string_view mode) {
  if (mode == "bfloat16" || mode == "float16") return {2, "bfloat16"};
  if (In(mode, {"fp8", "fp8_block"})) return {1, "fp8"};
  if (mode == "int4_wo") return {0.5, "bfloat16"};
  if (In(mode, {"w4afp8", "w4a8_mxfp4_mxfp8", "w4a8_mxfp4_mxfp8_trtllm"})) return {0.5, "fp8"};
  if (mode == "nvfp4") return {9.0 / 16.0, "nvfp4"};
  if (In(mode, {"nvfp4_wo", "w4a16_nvfp4"})) return {9.0 / 16.0, "bfloat16"};
  if (In(mode, {"w4a16_mxfp4", "w4a16_mxfp4_cutlass"})) return {0.5, "bfloat16"};
  throw Error("unknown MoE quantization '" + std::string(mode) + "'");
}

QuantMode FmhaQuant(std::string_view mode) {
  if (mode == "bfloat16" || mode == "float16") return {2, "bfloat16"};
  if (mode == "fp8" || mode == "fp8_block") return {1, "fp8"};
  throw Error("unknown attention quantization '" + std::string(mode) + "'; expected bfloat16, fp8 or fp8_block");
}

double KvCacheBytes(std::string_view kv) {
  if (kv == "bfloat16" || kv == "float16") return 2;
  if (kv == "int8" || kv == "fp8") return 1;
  throw Error("unknown KV-cache dtype '" + std::string(kv) + "'; expected bfloat16, int8 or fp8");
}

double CommBytes(std::string_view dtype) {
  if (In(dtype, {"half", "bfloat16", "float16"})) return 2;
  if (dtype == "int8" || dtype == "fp8") return 1;
  throw Error("unknown collective dtype '" + std::string(dtype) + "'; expected half, bfloat16, int8 or fp8");
}

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

double Sol::Max(double flops, const std::string& key, double bytes) const {
  double math = flops > 0 ? 1e3 * flops / PeakFlops(key) : 0;
  return std::max(math, MemMs(bytes));
}

double Sol::GemmMs(std::string_view quant, double m, double n, double k) const {
  QuantMode q = GemmQuant(quant);
  return Max(2 * m * n * k, q.flops_key, q.mem_bytes * (m * n + m * k + n * k));
}

double Sol::ContextAttentionMs(double b, double s, double prefix, double n, double n_kv, double h, double w,
                               std::string_view fmha_quant, std::string_view kv_dtype) const {
  if (n_kv == 0) n_kv = n;  // the MHA sentinel
  QuantMode q = FmhaQuant(fmha_quant);
  double full = s + prefix;
  double flops = (w > 0 && full > w) ? 2 * b * (full - prefix) * w * n * h * 2
                                     : 2 * b * (full * full - prefix * prefix) * n * h * 2 / 2;
  double bytes = 2 * b * 2 * n * (full - prefix) * h + KvCacheBytes(kv_dtype) * b * 2 * n_kv * full * h;
  return Max(flops, q.flops_key, bytes);
}

double Sol::GenerationAttentionMs(double b, double s, double n, double n_kv, double h, double w,
                                  std::string_view kv_dtype) const {
  if (n_kv == 0) n_kv = n;
  double kv_len = std::max(0.0, s - 1);
  if (w > 0) kv_len = std::min(kv_len, w);
  double kv_bytes = KvCacheBytes(kv_dtype);
  // Decode math runs at fp8 rate only with an fp8 KV cache on SM >= 89.
  std::string key = (kv_dtype == "fp8" && spec_.gpu.sm_version >= 89) ? "fp8" : "bfloat16";
  double flops = 2 * b * n * h * 2 * kv_len;
  double bytes = b * (2 * n * h + 2 * n_kv * kv_len * h * kv_bytes + 2 * n * h);
  return Max(flops, key, bytes);
}

double Sol::MoeMs(std::string_view quant, double tokens, double hidden, double inter, double topk, double experts,
                  double tp, double ep, bool gated) const {
  QuantMode q = MoeQuant(quant);
  double g = gated ? 3 : 2;
  double tot = tokens * topk;
  double flops = tot * hidden * inter * g * 2 / ep / tp;
  double per_ep = std::floor(tot / ep);
  double bytes = q.mem_bytes * (per_ep * hidden * 2 + per_ep * inter * g / tp +
                                hidden * inter * g / tp * std::min(std::floor(experts / ep), per_ep));
  return Max(flops, q.flops_key, bytes);
}

double Sol::CustomAllReduceMs(double size, int tp, std::string_view dtype) const {
  if (tp <= 1) return 0;
  (void)CommBytes(dtype);
  return 1e3 * 2 * size * 2 / tp * (tp - 1) / P2pBandwidth(tp);
}

double Sol::NcclMs(std::string_view op, double size, int gpus, std::string_view dtype) const {
  if (gpus <= 1) return 0;
  double t = 1e3 * CommBytes(dtype) * size * (gpus - 1) / gpus / P2pBandwidth(gpus);
  if (op == "all_reduce") return 2 * t;
  if (op == "all_gather" || op == "reduce_scatter" || op == "alltoall") return t;
  // Point-to-point: each rank sends the whole message to its neighbour.
  if (op == "send_recv") return t * gpus / (gpus - 1);
  throw Error("unknown collective '" + std::string(op) +
              "'; expected all_reduce, all_gather, reduce_scatter, alltoall or send_recv");
}

}  // namespace servecast::perfdb
