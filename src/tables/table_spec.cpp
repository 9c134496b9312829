#include "tables/table_spec.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <iterator>
#include <limits>

#include "core/error.h"

namespace servecast::tables {
namespace {

using VT = ValueType;

// The floors of tables/cost_model.h over a row's key columns.
OpCost GemmCost(const Params& p) {
  return GemmFloor(p.Str("gemm_dtype"), p.Num("m"), p.Num("n"), p.Num("k"));
}

OpCost ContextAttentionCost(const Params& p) {
  return ContextAttentionFloor(p.Num("batch_size"), p.Num("isl"), p.Num("num_heads"), p.Num("num_key_value_heads"),
                               p.Num("head_dim"), p.Num("window_size"), p.Str("attn_dtype"), p.Str("kv_cache_dtype"));
}

OpCost GenerationAttentionCost(const Params& p) {
  return GenerationAttentionFloor(p.Num("batch_size"), p.Num("isl"), p.Num("step"), p.Num("num_heads"),
                                  p.Num("num_key_value_heads"), p.Num("head_dim"), p.Num("window_size"),
                                  p.Str("attn_dtype"), p.Str("kv_cache_dtype"));
}

OpCost ContextMlaCost(const Params& p) {
  return ContextMlaFloor(p.Num("batch_size"), p.Num("isl"), p.Num("num_heads"), p.Str("mla_dtype"),
                         p.Str("kv_cache_dtype"));
}

OpCost GenerationMlaCost(const Params& p) {
  return GenerationMlaFloor(p.Num("batch_size"), p.Num("isl"), p.Num("step"), p.Num("num_heads"), p.Str("mla_dtype"),
                            p.Str("kv_cache_dtype"));
}

OpCost MlaBmmCost(const Params& p) {
  return MlaBmmFloor(p.Str("op_name"), p.Str("bmm_dtype"), p.Num("num_tokens"), p.Num("num_heads"));
}

// The estimator's roofline of a mla_bmm_perf key (SOL, util-empirical); an
// op_name the estimator does not model is refused when the table loads.
OpCost MlaBmmReadRoofline(const Params& p) {
  const std::string& op_name = p.Str("op_name");
  if (op_name != "mla_gen_pre" && op_name != "mla_gen_post")
    throw Error("mla_bmm_perf: unknown op_name '" + op_name + "' (expected mla_gen_pre or mla_gen_post)");
  return MlaBmmRoofline(p.Str("bmm_dtype"), p.Num("num_tokens"), p.Num("num_heads"));
}

// Recurrent layers (AIC's schemas): phase context | generation; heads per GPU.
OpCost GdnCost(const Params& p) {
  return GdnFloor(p.Str("phase"), p.Num("batch_size"), p.Num("seq_len"), p.Num("d_conv"), p.Num("num_k_heads"),
                  p.Num("head_k_dim"), p.Num("num_v_heads"), p.Num("head_v_dim"));
}
OpCost GdnReadRoofline(const Params& p) {
  return GdnRoofline(p.Str("phase"), p.Num("batch_size"), p.Num("seq_len"), p.Num("d_conv"), p.Num("num_k_heads"),
                     p.Num("head_k_dim"), p.Num("num_v_heads"), p.Num("head_v_dim"));
}
OpCost Mamba2Cost(const Params& p) {
  return Mamba2Floor(p.Str("phase"), p.Num("batch_size"), p.Num("seq_len"), p.Num("d_conv"), p.Num("nheads"),
                     p.Num("head_dim"), p.Num("n_groups"), p.Num("d_state"));
}
OpCost Mamba2ReadRoofline(const Params& p) {
  return Mamba2Roofline(p.Str("phase"), p.Num("batch_size"), p.Num("seq_len"), p.Num("d_conv"), p.Num("nheads"),
                        p.Num("head_dim"), p.Num("n_groups"), p.Num("d_state"));
}

// A DSA module row: op_name dsa_{context,generation}_module, or its
// _skip_indexer variant (AIC's sglang rows; no indexer).
OpCost DsaCost(const std::string& phase, const Params& p) {
  const std::string op = p.Has("op_name") ? p.Str("op_name") : "dsa_" + phase + "_module";
  const bool skip = op.size() > 13 && op.compare(op.size() - 13, 13, "_skip_indexer") == 0;
  return DsaModuleCost(phase, p.Str("architecture"), p.Str("gemm_type"), p.Str("kv_cache_dtype"), p.Num("num_heads"),
                       p.Num("batch_size"), p.Num("isl"), p.Num("step"), !skip);
}

OpCost ElementwiseRowCost(const Params& p) {
  return ElementwiseCost(p.Str("op_name"), p.Str("dtype"), p.Num("num_tokens"), p.Num("hidden_size"));
}

OpCost MoeCost(const Params& p) {
  // Non-gated experts run two projections; a key without a kernel_source is gated (three).
  const bool gated = !p.Has("kernel_source") || !IsNongatedMoeKernel(p.Str("kernel_source"));
  return MoeFloor(p.Str("moe_dtype"), p.Num("num_tokens"), p.Num("hidden_size"), p.Num("inter_size"), p.Num("topk"),
                  p.Num("num_experts"), p.Num("moe_tp_size"), p.Num("moe_ep_size"), gated);
}

// Collectives: CommBusBytes, the bytes each GPU must send over its links (nccl-tests' bus
// bytes: all_reduce 2(n-1)/n S, all_gather and reduce_scatter (n-1)/n S of the
// whole buffer, alltoall (n-1)/n S, send_recv S), with S the message's bytes. The
// gate bounds them by device-memory bandwidth, a loose but valid floor (every byte
// sent is first read from device memory); the link bound is tighter, and
// `check --against` compares with measured tables.
OpCost NcclCost(const Params& p) {
  const std::string& dt = p.Str("nccl_dtype");
  double e = DtypeBytes(dt);
  return OpCost{0, CommBusBytes(p.Str("op_name"), p.Num("message_size") * e, p.Num("num_gpus")), "bfloat16"};
}

OpCost CustomAllReduceCost(const Params& p) {
  const std::string& dt = p.Str("allreduce_dtype");
  double e = DtypeBytes(dt);
  return OpCost{0, CommBusBytes("all_reduce", p.Num("message_size") * e, p.Num("num_gpus")), "bfloat16"};
}

// A compute_scale row is a difference of two timings (dynamic minus static
// quantization), which has no physical floor above zero: no bound.
OpCost ComputeScaleCost(const Params& p) {
  DtypeBytes(p.Str("quant_dtype"));  // validates the dtype
  return OpCost{0, 0, "bfloat16"};
}

std::vector<TableSpec> BuildSpecs() {
  std::vector<TableSpec> specs;
  specs.push_back(TableSpec{"gemm_perf",
                            "gemm",
                            {{"gemm_dtype", VT::kString}, {"m", VT::kInt64}, {"n", VT::kInt64}, {"k", VT::kInt64}},
                            false,
                            GemmCost});
  specs.back().slice_columns = {"gemm_dtype"};
  specs.back().load_key_op_name = false;
  std::vector<ColumnSpec> attention_keys = {
      {"batch_size", VT::kInt64},          {"isl", VT::kInt64},         {"num_heads", VT::kInt64},
      {"num_key_value_heads", VT::kInt64}, {"head_dim", VT::kInt64},    {"window_size", VT::kInt64},
      {"beam_width", VT::kInt64},          {"attn_dtype", VT::kString}, {"kv_cache_dtype", VT::kString},
      {"step", VT::kInt64}};
  // num_key_value_heads 0: MHA in AIC's tables; window_size 0: full attention; step 0: the first decode step.
  const std::vector<std::pair<std::string, std::int64_t>> attention_minimum = {
      {"num_key_value_heads", 0}, {"window_size", 0}, {"step", 0}};
  specs.push_back(TableSpec{"context_attention_perf", "attention", attention_keys, false, ContextAttentionCost});
  specs.push_back(
      TableSpec{"generation_attention_perf", "attention", attention_keys, false, GenerationAttentionCost});
  for (std::size_t i = specs.size() - 2; i < specs.size(); ++i) {
    specs[i].key_minimum = attention_minimum;
    specs[i].load_key_op_name = false;
    specs[i].load_key_ignored = {"beam_width"};
    specs[i].load_key_defaults = {{"window_size", Value(std::int64_t{0})}};
  }
  // MLA (AIC's schemas, upstream/aic-collector.md §4.7-4.8): num_heads is the local
  // head count of a GPU, tp_size the tensor parallelism that gave it (the loader
  // keys rows by the local count; kernels of equal local heads are the same).
  std::vector<ColumnSpec> mla_keys = {{"mla_dtype", VT::kString}, {"kv_cache_dtype", VT::kString},
                                      {"num_heads", VT::kInt64},  {"batch_size", VT::kInt64},
                                      {"isl", VT::kInt64},        {"tp_size", VT::kInt64},
                                      {"step", VT::kInt64}};
  specs.push_back(TableSpec{"context_mla_perf", "mla", mla_keys, false, ContextMlaCost});
  specs.push_back(TableSpec{"generation_mla_perf", "mla", mla_keys, false, GenerationMlaCost});
  for (std::size_t i = specs.size() - 2; i < specs.size(); ++i) {
    specs[i].key_minimum = {{"step", 0}};
    specs[i].load_key_op_name = false;
    specs[i].load_key_ignored = {"tp_size"};
    specs[i].slice_columns = {"kv_cache_dtype"};
  }
  // op_name mla_gen_pre (q_nope x W_UK per head) or mla_gen_post (out x W_UV).
  specs.push_back(TableSpec{"mla_bmm_perf",
                            "mla_bmm",
                            {{"bmm_dtype", VT::kString}, {"num_tokens", VT::kInt64}, {"num_heads", VT::kInt64}},
                            false,
                            MlaBmmCost});
  // Read through the generic path (perfdb/declared.h): one slice per (op_name,
  // bmm_dtype, local heads), num_tokens blended raw; a dtype without rows of its
  // own for the op (fp8) reads the bfloat16 rows (AIC's fallback).
  specs.back().estimator =
      EstimatorRead{{"op_name", "bmm_dtype", "num_heads"},
                    {{"num_tokens", AxisBlend::kLinear, AxisSource::kTokens}},
                    MlaBmmReadRoofline,
                    std::pair<std::string, std::string>{"bmm_dtype", "bfloat16"},
                    "on the GPU with servecast collect --backend cuda --ops mla_gen_pre mla_gen_post"};
  // Recurrent layers (issue 25), AIC's schemas (upstream/aic-collector.md §4.14):
  // heads per GPU; a row is one kernel of the layer (kernel_source), the op's
  // answer the sum of its kernels; num_tokens = batch x seq_len, d_model and
  // model_name only say which model the shape came from.
  const std::string recurrent_gap =
      "issue 25: servecast's Mamba2 op (collect --backend cuda --ops mamba2) has not been collected into this data";
  const std::string gdn_gap =
      "issue 25: servecast's Gated DeltaNet op (collect --backend cuda --ops gdn) has not been collected into the "
      "bundled data yet";
  specs.push_back(TableSpec{"gdn_perf",
                            "linear_attention",
                            {{"phase", VT::kString},
                             {"batch_size", VT::kInt64},
                             {"seq_len", VT::kInt64},
                             {"num_tokens", VT::kInt64},
                             {"d_model", VT::kInt64},
                             {"d_conv", VT::kInt64},
                             {"num_k_heads", VT::kInt64},
                             {"head_k_dim", VT::kInt64},
                             {"num_v_heads", VT::kInt64},
                             {"head_v_dim", VT::kInt64},
                             {"model_name", VT::kString}},
                            false,
                            GdnCost});
  specs.back().load_key_ignored = {"num_tokens", "d_model", "model_name"};
  specs.back().estimator = EstimatorRead{
      {"phase", "d_conv", "num_k_heads", "head_k_dim", "num_v_heads", "head_v_dim"},
      {{"batch_size", AxisBlend::kLinear, AxisSource::kBatch}, {"seq_len", AxisBlend::kLinear, AxisSource::kSeq}},
      GdnReadRoofline};
  specs.back().estimator->parts = "kernel_source";
  specs.back().estimator->uncollected = gdn_gap;
  specs.back().estimator->collect = "on the GPU with servecast collect --backend cuda --ops gdn";
  specs.push_back(TableSpec{"mamba2_perf",
                            "linear_attention",
                            {{"phase", VT::kString},
                             {"batch_size", VT::kInt64},
                             {"seq_len", VT::kInt64},
                             {"num_tokens", VT::kInt64},
                             {"d_model", VT::kInt64},
                             {"d_state", VT::kInt64},
                             {"d_conv", VT::kInt64},
                             {"nheads", VT::kInt64},
                             {"head_dim", VT::kInt64},
                             {"n_groups", VT::kInt64},
                             {"chunk_size", VT::kInt64},
                             {"model_name", VT::kString}},
                            false,
                            Mamba2Cost});
  specs.back().load_key_ignored = {"num_tokens", "d_model", "model_name"};
  specs.back().estimator = EstimatorRead{
      {"phase", "d_state", "d_conv", "nheads", "head_dim", "n_groups", "chunk_size"},
      {{"batch_size", AxisBlend::kLinear, AxisSource::kBatch}, {"seq_len", AxisBlend::kLinear, AxisSource::kSeq}},
      Mamba2ReadRoofline};
  specs.back().estimator->parts = "kernel_source";
  specs.back().estimator->uncollected = recurrent_gap;
  // DeepSeek Sparse Attention modules (issue 25), AIC's schema: one layer's whole
  // attention module; num_heads per GPU, tp_size the parallelism that gave it;
  // model says which checkpoint (the geometry is the architecture's).
  const std::vector<ColumnSpec> dsa_keys = {
      {"model", VT::kString},     {"architecture", VT::kString}, {"mla_dtype", VT::kString},
      {"kv_cache_dtype", VT::kString}, {"gemm_type", VT::kString}, {"num_heads", VT::kInt64},
      {"batch_size", VT::kInt64}, {"isl", VT::kInt64},           {"tp_size", VT::kInt64},
      {"step", VT::kInt64}};
  const std::string dsa_gap =
      "issue 25: servecast's DSA module ops (collect --backend cuda --ops dsa_context_module dsa_generation_module) "
      "have not been collected into this data";
  for (const std::string phase : {"context", "generation"}) {
    specs.push_back(TableSpec{"dsa_" + phase + "_module_perf", "sparse_attention", dsa_keys, false,
                              [phase](const Params& p) { return DsaCost(phase, p); }});
    specs.back().key_minimum = {{"step", 0}};
    specs.back().load_key_ignored = {"model", "tp_size"};
    // Prefill: isl new tokens (sqrt: quadratic pairs) after `step` cached ones;
    // decode: isl 1, step cached keys.
    std::vector<TableAxis> axes = {{"batch_size", AxisBlend::kLinear, AxisSource::kBatch}};
    if (phase == "context") {
      axes.push_back({"isl", AxisBlend::kSqrt, AxisSource::kSeq});
      axes.push_back({"step", AxisBlend::kLinear, AxisSource::kSeq});
    } else {
      axes.push_back({"isl", AxisBlend::kLinear, AxisSource::kTokens});
      axes.push_back({"step", AxisBlend::kLinear, AxisSource::kSeq});
    }
    specs.back().estimator =
        EstimatorRead{{"op_name", "architecture", "mla_dtype", "kv_cache_dtype", "gemm_type", "num_heads"}, axes};
    specs.back().estimator->uncollected = dsa_gap;
    specs.back().estimator->collect = "on the GPU with servecast collect --backend cuda --ops dsa_" + phase + "_module";
  }
  specs.push_back(TableSpec{"elementwise_perf",
                            "elementwise",
                            {{"dtype", VT::kString}, {"num_tokens", VT::kInt64}, {"hidden_size", VT::kInt64}},
                            false,
                            ElementwiseRowCost});
  // compute_scale: the extra time of dynamic over static activation quantization
  // (AIC's semantics, clamped at zero, so zero is legal).
  specs.push_back(TableSpec{"computescale_perf",
                            "quantize",
                            {{"quant_dtype", VT::kString}, {"m", VT::kInt64}, {"k", VT::kInt64}},
                            true,
                            ComputeScaleCost});
  specs.push_back(TableSpec{"moe_perf",
                            "moe",
                            {{"moe_dtype", VT::kString},
                             {"num_tokens", VT::kInt64},
                             {"hidden_size", VT::kInt64},
                             {"inter_size", VT::kInt64},
                             {"topk", VT::kInt64},
                             {"num_experts", VT::kInt64},
                             {"moe_tp_size", VT::kInt64},
                             {"moe_ep_size", VT::kInt64},
                             {"distribution", VT::kString}},
                            false,
                            MoeCost});
  specs.back().slice_columns = {"moe_dtype"};
  // Collectives (family comm): message_size in elements of the dtype, as AIC.
  // "half" is the 16-bit float class of AIC's NCCL table.
  std::vector<ColumnSpec> bandwidths = {{"algbw_gbps", VT::kDouble}, {"busbw_gbps", VT::kDouble}};
  specs.push_back(TableSpec{"nccl_perf",
                            "comm",
                            {{"nccl_dtype", VT::kString}, {"num_gpus", VT::kInt64}, {"message_size", VT::kInt64}},
                            false,
                            NcclCost,
                            bandwidths});
  std::vector<ColumnSpec> ar_extra = bandwidths;
  ar_extra.push_back({"implementation", VT::kString});
  specs.push_back(TableSpec{"custom_allreduce_perf",
                            "comm",
                            {{"allreduce_dtype", VT::kString}, {"num_gpus", VT::kInt64}, {"message_size", VT::kInt64}},
                            false,
                            CustomAllReduceCost,
                            ar_extra});
  return specs;
}

}  // namespace

const std::vector<ColumnSpec>& PrefixColumns() {
  static const std::vector<ColumnSpec> cols = {{"framework", VT::kString},
                                               {"version", VT::kString},
                                               {"device", VT::kString},
                                               {"op_name", VT::kString},
                                               {"kernel_source", VT::kString}};
  return cols;
}

const std::vector<ColumnSpec>& MetricColumns() {
  static const std::vector<ColumnSpec> cols = {
      {"latency", VT::kDouble},          {"latency_p10", VT::kDouble},     {"latency_p90", VT::kDouble},
      {"samples", VT::kInt64},           {"rsd", VT::kDouble},             {"timing", VT::kString},
      {"l2", VT::kString},               {"clock_mhz_before", VT::kDouble}, {"clock_mhz_after", VT::kDouble},
      {"throttled", VT::kInt64}};
  return cols;
}

const std::vector<ColumnSpec>& PowerColumns() {
  static const std::vector<ColumnSpec> cols = {{"power", VT::kDouble}, {"power_limit", VT::kDouble}};
  return cols;
}

std::int64_t TableSpec::KeyMinimum(std::string_view column) const {
  for (const auto& [name, min] : key_minimum)
    if (name == column) return min;
  return 1;
}

namespace {

// The first row of a text column whose cell is not a number (a numeric column
// read as text holds at least one), or row 0 when every cell reads as one.
std::size_t FirstNonNumericRow(const Table& t, std::size_t col) {
  for (std::size_t r = 0; r < t.num_rows(); ++r) {
    double v = 0;
    if (!ParseNumber(t.GetString(r, col), v)) return r;
  }
  return 0;
}

}  // namespace

std::optional<RowProblem> FirstBadRow(const std::string& table_name, const Table& t) {
  const TableSpec* spec = FindTableSpec(table_name);
  const bool zero_ok = spec && spec->zero_latency_legal;
  struct Check {
    std::size_t col;
    bool latency;
    bool integer;
    double minimum;
  };
  std::vector<Check> checks;
  if (auto c = t.FindColumn("latency")) {
    if (t.columns()[*c].type == ValueType::kString) {
      const std::size_t r = FirstNonNumericRow(t, *c);
      return RowProblem{r, "latency", "is '" + t.GetString(r, *c) + "', not a number", "a finite latency (ms)"};
    }
    checks.push_back({*c, true, false, 0});
  }
  if (spec)
    for (const auto& k : spec->key_columns) {
      if (k.type == ValueType::kString) continue;
      auto c = t.FindColumn(k.name);
      if (!c) continue;
      if (t.columns()[*c].type == ValueType::kString) {
        const std::size_t r = FirstNonNumericRow(t, *c);
        return RowProblem{r, k.name, "is '" + t.GetString(r, *c) + "', not a number",
                          std::string(k.type == ValueType::kInt64 ? "an integer" : "a number") + " (a key of " +
                              table_name + ")"};
      }
      checks.push_back({*c, false, k.type == ValueType::kInt64,
                        k.type == ValueType::kInt64 ? static_cast<double>(spec->KeyMinimum(k.name))
                                                    : -std::numeric_limits<double>::infinity()});
    }
  for (std::size_t r = 0; r < t.num_rows(); ++r)
    for (const Check& ch : checks) {
      const double v = t.GetDouble(r, ch.col);
      const std::string& name = t.columns()[ch.col].name;
      if (ch.latency) {
        if (!std::isfinite(v) || v < 0 || (v == 0 && !zero_ok))
          return RowProblem{r, name, "is " + ToString(t.Get(r, ch.col)),
                            std::string("a finite latency ") + (zero_ok ? ">= 0" : "> 0") + " (ms)"};
        continue;
      }
      if (!std::isfinite(v) || (ch.integer && v != std::floor(v)) || v < ch.minimum)
        return RowProblem{r, name, "is " + ToString(t.Get(r, ch.col)),
                          ch.integer ? "an integer >= " + std::to_string(static_cast<std::int64_t>(ch.minimum)) +
                                           " (a key of " + table_name + ")"
                                     : "a finite number (a key of " + table_name + ")"};
    }
  return std::nullopt;
}

std::vector<ColumnSpec> IntegerKeysStoredAsDouble(const std::string& table_name, const Table& t) {
  std::vector<ColumnSpec> out;
  if (const TableSpec* spec = FindTableSpec(table_name))
    for (const auto& k : spec->key_columns)
      if (k.type == ValueType::kInt64)
        if (auto c = t.FindColumn(k.name); c && t.columns()[*c].type == ValueType::kDouble) out.push_back(k);
  return out;
}

TableWriteOptions TableSpec::WriteOptions() const {
  TableWriteOptions o;
  o.parquet.group_by = slice_columns;
  return o;
}

std::vector<ColumnSpec> TableSpec::AllColumns(bool with_power) const {
  std::vector<ColumnSpec> cols = PrefixColumns();
  cols.insert(cols.end(), key_columns.begin(), key_columns.end());
  const auto& metrics = MetricColumns();
  cols.insert(cols.end(), metrics.begin(), metrics.end());
  cols.insert(cols.end(), extra_columns.begin(), extra_columns.end());
  if (with_power) cols.insert(cols.end(), PowerColumns().begin(), PowerColumns().end());
  return cols;
}

std::vector<std::string> TableSpec::KeyColumnNames() const {
  std::vector<std::string> out;
  for (const auto& c : key_columns) out.push_back(c.name);
  return out;
}

std::vector<std::string> TableSpec::LoadKeyColumns(bool has_op_name) const {
  std::vector<std::string> out;
  if (has_op_name && load_key_op_name) out.push_back("op_name");
  for (const auto& c : key_columns)
    if (std::find(load_key_ignored.begin(), load_key_ignored.end(), c.name) == load_key_ignored.end())
      out.push_back(c.name);
  if (estimator && !estimator->parts.empty()) out.push_back(estimator->parts);
  return out;
}

const ColumnSpec& TableSpec::KeyColumn(std::string_view column) const {
  for (const auto& c : key_columns)
    if (c.name == column) return c;
  std::string keys;
  for (const auto& c : key_columns) keys += (keys.empty() ? "" : ", ") + c.name;
  throw Error("table " + name + " declares no key column '" + std::string(column) + "' (keys: " + keys + ")");
}

std::size_t TableSpec::KeyIndex(const Table& t, std::string_view column) const {
  return t.ColumnIndex(KeyColumn(column).name);
}

std::optional<std::size_t> TableSpec::FindKey(const Table& t, std::string_view column) const {
  return t.FindColumn(KeyColumn(column).name);
}

const EstimatorRead& TableSpec::Read() const {
  if (!estimator) throw Error("table " + name + " declares no estimator read (tables/table_spec.h, EstimatorRead)");
  return *estimator;
}

namespace {

// The rules of an estimator read (table_spec.h, EstimatorRead), checked when the
// table is declared: Error naming the rule a read breaks.
void CheckRead(const TableSpec& spec) {
  if (!spec.estimator) return;
  const EstimatorRead& r = *spec.estimator;
  const std::string& name = spec.name;
  const auto& key_columns = spec.key_columns;
  const auto& load_key_ignored = spec.load_key_ignored;
  auto KeyColumn = [&](const std::string& c) -> const ColumnSpec& { return spec.KeyColumn(c); };
  auto bad = [&](const std::string& why) -> Error { return Error("table " + name + ": estimator read " + why); };
  auto is_key = [&](const std::string& c) {
    for (const auto& k : key_columns)
      if (k.name == c) return true;
    return false;
  };
  auto listed = [](const std::vector<std::string>& v, const std::string& c) {
    return std::find(v.begin(), v.end(), c) != v.end();
  };
  if (r.axes.empty()) throw bad("has no axis");
  int sqrt_axes = 0;
  std::vector<std::string> axis_names;
  for (const TableAxis& a : r.axes) {
    if (KeyColumn(a.column).type == ValueType::kString) throw bad("axis '" + a.column + "' is a string column");
    if (listed(axis_names, a.column) || listed(r.slice_keys, a.column))
      throw bad("names column '" + a.column + "' twice");
    axis_names.push_back(a.column);
    if (a.blend == AxisBlend::kSqrt) ++sqrt_axes;
  }
  if (sqrt_axes > 1) throw bad("blends more than one axis in sqrt space (perfdb::Grid blends one)");
  for (const std::string& k : r.slice_keys)
    if (k != "op_name" && !is_key(k)) KeyColumn(k);  // the Error naming the keys
  for (const auto& k : key_columns)
    if (!listed(r.slice_keys, k.name) && !listed(axis_names, k.name) && !listed(load_key_ignored, k.name))
      throw bad("leaves key column '" + k.name + "' unread (a slice key, an axis or load_key_ignored)");
  if (!r.parts.empty()) {
    const auto& prefix = PrefixColumns();
    const bool in_prefix = std::any_of(prefix.begin(), prefix.end(), [&](const ColumnSpec& c) {
      return c.name == r.parts && c.name != "op_name";
    });
    if (!in_prefix) throw bad("takes its parts from '" + r.parts + "', not a prefix column other than op_name");
  }
  if (r.fallback && !listed(r.slice_keys, r.fallback->first))
    throw bad("falls back on '" + r.fallback->first + "', not a slice key");
}

}  // namespace

OpCost TableSpec::Roofline(const Params& key) const {
  const EstimatorRead& r = Read();
  return r.roofline ? r.roofline(key) : cost(key);
}

std::vector<const TableSpec*> EstimatorTables() {
  std::vector<const TableSpec*> out;
  for (const auto& s : AllTableSpecs())
    if (s.estimator) out.push_back(&s);
  return out;
}

std::vector<std::string> TableSpec::IdentityColumns() const {
  std::vector<std::string> out = KeyColumnNames();
  out.insert(out.begin(), "op_name");
  return out;
}

std::vector<std::string> TableSpec::RowIdentityColumns() const {
  std::vector<std::string> out = IdentityColumns();
  if (estimator && !estimator->parts.empty()) out.push_back(estimator->parts);
  return out;
}

namespace {
// A deque: AddTableSpec appends without moving the specs already handed out
// (ops keep a reference to their table's spec).
std::deque<TableSpec>& MutableSpecs() {
  static std::deque<TableSpec> specs = [] {
    std::vector<TableSpec> built = BuildSpecs();
    for (const TableSpec& spec : built) CheckRead(spec);
    return std::deque<TableSpec>(std::make_move_iterator(built.begin()), std::make_move_iterator(built.end()));
  }();
  return specs;
}
}  // namespace

const std::deque<TableSpec>& AllTableSpecs() { return MutableSpecs(); }

void AddTableSpec(TableSpec spec) {
  if (FindTableSpec(spec.name)) throw Error("table '" + spec.name + "' is already defined");
  CheckRead(spec);
  MutableSpecs().push_back(std::move(spec));
}

const TableSpec* FindTableSpec(std::string_view name) {
  for (const auto& s : AllTableSpecs())
    if (s.name == name) return &s;
  return nullptr;
}

bool IsNongatedMoeKernel(std::string_view kernel_source) {
  return kernel_source.find("nongated") != std::string_view::npos;
}

std::optional<double> ExpertLoadAlpha(std::string_view distribution) {
  if (distribution == "balanced") return 0.0;
  constexpr std::string_view kPrefix = "power_law_";
  double alpha = 0;
  if (distribution.substr(0, kPrefix.size()) == kPrefix && ParseNumber(distribution.substr(kPrefix.size()), alpha) &&
      std::isfinite(alpha) && alpha > 0)
    return alpha;
  return std::nullopt;
}

const TableSpec& GetTableSpec(std::string_view name) {
  if (const TableSpec* s = FindTableSpec(name)) return *s;
  throw Error("no declaration of table '" + std::string(name) + "' (tables/table_spec.cpp)");
}

}  // namespace servecast::tables
