#pragma once

// Building blocks of the families' op lists (family_*.cpp): a phase's op
// builder and the parts several families share (embedding + attention block,
// logits, pipeline tail, the engines' communication around the experts).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/model_config.h"
#include "model/ops.h"

namespace servecast::model {

inline std::int64_t CeilDiv(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// UsageError(what) unless ok.
void Require(bool ok, const std::string& what);
// The parallel rules of a model without experts: no attention DP, tp divides the
// FFN width (UsageError naming the model otherwise).
void ValidateDenseParallel(const ModelConfig& m, const ParallelConfig& p);

// The ops of one phase, named "<phase>_<name>".
class PhaseBuilder {
 public:
  PhaseBuilder(std::string phase, double layers) : phase_(std::move(phase)), layers_(layers) {}

  Op& Add(const std::string& name, OpKind kind, double scale);
  Op& Gemm(const std::string& name, std::int64_t n, std::int64_t k, const std::string& quant, double scale);
  // A per-layer memory-bound op measured as `measured` (elementwise_perf) at `width`.
  Op& Elementwise(const std::string& name, std::int64_t dim_in, std::int64_t dim_out, const std::string& measured,
                  std::int64_t width);
  Op& AllReduce(const std::string& name, int gpus, std::int64_t width, const std::string& dtype, double scale);
  Op& Nccl(const std::string& name, const std::string& collective, int gpus, std::int64_t width, double volume,
           const std::string& dtype, double scale);
  double layers() const { return layers_; }
  bool context() const { return phase_ == "context"; }
  // The ops added so far (a family adjusts the scale or overlap of a block's ops).
  std::size_t size() const { return ops_.size(); }
  Op& at(std::size_t i) { return ops_.at(i); }
  std::vector<Op> Take() { return std::move(ops_); }

 private:
  std::string phase_;
  double layers_;
  std::vector<Op> ops_;
};

// Attention layers grouped by window: (window, number of layers), in first-seen order.
std::vector<std::pair<std::int64_t, std::int64_t>> WindowGroups(const ModelConfig& m);

// The token embedding (its vocabulary split over tp) and the first norm.
void AddEmbedding(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, double phase_scale);
// Embedding, first norm, QKV GEMM, attention (one op per window group),
// output projection: the part dense and MoE layers share. `phase_scale`
// converts a layer count into the phase's occurrences. With context
// parallelism (p.cp > 1) the context phase all-gathers every layer's K and V
// over the CP ranks (SGLang keeps the whole KV on every rank).
void AddAttentionBlock(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, bool context,
                       double phase_scale);
// One attention op (context or generation) occurring `layers` times: this rank's
// `heads` and `kv_heads`, the model's head dim, q/k norm and KV / fmha quantization.
Op& AddAttentionOp(PhaseBuilder& b, const ModelConfig& m, const std::string& name, bool context, double layers,
                   std::int64_t heads, std::int64_t kv_heads);
// The gated FFN of a dense layer, width intermediate_size split over tp: the
// attention output's all-reduce (tp > 1), residual add + norm, gate/up GEMM,
// SiLU-and-mul, down GEMM and its all-reduce, each b.layers() times. `prefix`
// names the ops ("dense_" for the dense layers of an MoE model).
void AddGatedFfn(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, const std::string& prefix = "");
// The logits GEMM (bf16; the context phase computes only each request's last token).
void AddLogits(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, bool context, double phase_scale);
// The embedding all-reduce (tp > 1) and the pipeline-stage transfers (pp > 1).
void AddTail(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, double phase_scale);
// The communication around the experts, per engine (AIC §2.4 dispatch rules);
// `pre` = before the experts (it also carries the attention output's reduction).
// SGLang with context parallelism: the prefill's tokens all-gathered over the CP
// ranks before the experts and reduce-scattered after; a decode step (not split,
// every rank runs every row) only all-reduces the experts' partial sums after.
void AddMoeDispatch(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, const OpListOptions& o, bool pre);
// The routed experts of `layers` expert layers, one kMoe op: the model's expert
// shape, this rank's slice (moe_tp, moe_ep; tokens x dp, every CP rank's), the expert load
// `distribution`, and the rank's weights (gate, up and down: 3 x H x I_moe each).
Op& AddRoutedExperts(PhaseBuilder& b, const ModelConfig& m, const ParallelConfig& p, const std::string& distribution,
                     double layers);

}  // namespace servecast::model
