#include "tables/table_spec.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace servecast::tables {
namespace {

using VT = ValueType;

// Keys that can attend: causal prefill of `s` queries over a window `w` (0 = full)
// sums min(i + 1, w) over positions i.
double CausalPairs(double s, double w) {
  if (w <= 0 || w >= s) return s * (s + 1) / 2;
  return w * (w + 1) / 2 + (s - w) * w;
}

OpCost GemmCost(const Params& p) {
  double m = p.Num("m"), n = p.Num("n"), k = p.Num("k");
  const std::string& dt = p.Str("gemm_dtype");
  double in_bytes = DtypeBytes(dt);
  double out_bytes = (dt == "float32") ? 4 : 2;  // fp8 GEMMs write bf16
  return OpCost{2 * m * n * k, (m * k + k * n) * in_bytes + m * n * out_bytes, dt};
}

OpCost ContextAttentionCost(const Params& p) {
  double b = p.Num("batch_size"), s = p.Num("isl"), n = p.Num("num_heads");
  double kv = p.Num("num_key_value_heads"), h = p.Num("head_dim"), w = p.Num("window_size");
  if (kv == 0) kv = n;  // AIC's tables may write 0 for MHA
  const std::string& adt = p.Str("attn_dtype");
  double q_bytes = DtypeBytes(adt), kv_bytes = DtypeBytes(p.Str("kv_cache_dtype"));
  double flops = 4 * b * n * h * CausalPairs(s, w);
  double bytes = b * s * h * (2 * n * q_bytes + 2 * kv * kv_bytes);
  return OpCost{flops, bytes, adt};
}

OpCost GenerationAttentionCost(const Params& p) {
  double b = p.Num("batch_size"), n = p.Num("num_heads");
  double kv = p.Num("num_key_value_heads"), h = p.Num("head_dim"), w = p.Num("window_size");
  if (kv == 0) kv = n;
  double keys = p.Num("isl") + p.Num("step");
  if (w > 0) keys = std::min(keys, w);
  const std::string& adt = p.Str("attn_dtype");
  double kv_bytes = DtypeBytes(p.Str("kv_cache_dtype"));
  double flops = 4 * b * n * h * keys;
  double bytes = b * keys * 2 * kv * h * kv_bytes + 2 * b * n * h * DtypeBytes(adt);
  return OpCost{flops, bytes, adt};
}

OpCost ElementwiseCost(const Params& p) {
  double t = p.Num("num_tokens"), w = p.Num("hidden_size");
  const std::string& op = p.Str("op_name");
  const std::string& dt = p.Str("dtype");
  double e = DtypeBytes(dt);
  if (op == "rmsnorm") return OpCost{4 * t * w, (2 * t * w + w) * e, dt};
  if (op == "rmsnorm_residual") return OpCost{5 * t * w, (4 * t * w + w) * e, dt};
  if (op == "silu_and_mul") return OpCost{5 * t * w, 3 * t * w * e, dt};
  if (op == "residual_add") return OpCost{t * w, 3 * t * w * e, dt};
  if (op == "rotary_embedding") return OpCost{3 * t * w, 2 * t * w * e, dt};
  if (op == "embedding") return OpCost{0, 2 * t * w * e, dt};
  throw Error("elementwise_perf: no cost model for op_name '" + op + "'");
}

// MoE layer on expert-parallel rank 0 (the most loaded): at least its balanced
// share of the T x topk assignments, each through gate+up (2 x inter/tp) and down
// (inter/tp) GEMMs; at least ceil(share / T) local experts' weights read (an expert
// takes each token once), plus the activations in and out.
OpCost MoeCost(const Params& p) {
  double t = p.Num("num_tokens"), h = p.Num("hidden_size"), inter = p.Num("inter_size") / p.Num("moe_tp_size");
  double topk = p.Num("topk"), ep = p.Num("moe_ep_size"), e = p.Num("num_experts");
  const std::string& dt = p.Str("moe_dtype");
  double share = t * topk / ep;
  double experts_touched = std::min(e / ep, std::ceil(share / t));
  double flops = 2 * share * h * 3 * inter;
  double bytes = experts_touched * 3 * h * inter * DtypeBytes(dt) + 2 * t * h * 2;
  return OpCost{flops, bytes, dt == "fp8_block" ? "fp8" : dt};
}

// Collectives: the bytes each GPU must send over its links (nccl-tests' bus
// bytes: all_reduce 2(n-1)/n S, all_gather and reduce_scatter (n-1)/n S of the
// whole buffer, alltoall (n-1)/n S, send_recv S), with S the message's bytes. The
// gate bounds them by device-memory bandwidth, a loose but valid floor (every byte
// sent is first read from device memory); the link bound is tighter, and
// `check --against` compares with measured tables.
double CommBusBytes(const std::string& op, double bytes, double n) {
  if (n <= 1) return 0;
  if (op == "all_reduce") return 2 * (n - 1) / n * bytes;
  if (op == "all_gather" || op == "reduce_scatter" || op == "alltoall") return (n - 1) / n * bytes;
  if (op == "send_recv") return bytes;
  throw Error("comm tables: no cost model for op_name '" + op + "'");
}

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
  std::vector<ColumnSpec> attention_keys = {
      {"batch_size", VT::kInt64},          {"isl", VT::kInt64},         {"num_heads", VT::kInt64},
      {"num_key_value_heads", VT::kInt64}, {"head_dim", VT::kInt64},    {"window_size", VT::kInt64},
      {"beam_width", VT::kInt64},          {"attn_dtype", VT::kString}, {"kv_cache_dtype", VT::kString},
      {"step", VT::kInt64}};
  // num_key_value_heads 0: MHA in AIC's tables; window_size 0: full attention; step 0: the first decode step.
  const std::vector<std::pair<std::string, std::int64_t>> attention_minimum = {
      {"num_key_value_heads", 0}, {"window_size", 0}, {"step", 0}};
  specs.push_back(TableSpec{"context_attention_perf", "attention", attention_keys, false, ContextAttentionCost});
  specs.back().key_minimum = attention_minimum;
  specs.push_back(
      TableSpec{"generation_attention_perf", "attention", attention_keys, false, GenerationAttentionCost});
  specs.back().key_minimum = attention_minimum;
  specs.push_back(TableSpec{"elementwise_perf",
                            "elementwise",
                            {{"dtype", VT::kString}, {"num_tokens", VT::kInt64}, {"hidden_size", VT::kInt64}},
                            false,
                            ElementwiseCost});
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
    if (t.columns()[*c].type == ValueType::kString)
      return RowProblem{0, "latency", "is a text column", "numbers (ms)"};
    checks.push_back({*c, true, false, 0});
  }
  if (spec)
    for (const auto& k : spec->key_columns) {
      if (k.type == ValueType::kString) continue;
      auto c = t.FindColumn(k.name);
      if (!c) continue;
      if (t.columns()[*c].type == ValueType::kString)
        return RowProblem{0, k.name, "is a text column", "integers (a key of " + table_name + ")"};
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

std::vector<std::string> TableSpec::IdentityColumns() const {
  std::vector<std::string> out = KeyColumnNames();
  out.insert(out.begin(), "op_name");
  return out;
}

namespace {
std::vector<TableSpec>& MutableSpecs() {
  static std::vector<TableSpec> specs = BuildSpecs();
  return specs;
}
}  // namespace

const std::vector<TableSpec>& AllTableSpecs() { return MutableSpecs(); }

void AddTableSpec(TableSpec spec) {
  if (FindTableSpec(spec.name)) throw Error("table '" + spec.name + "' is already defined");
  MutableSpecs().push_back(std::move(spec));
}

const TableSpec* FindTableSpec(std::string_view name) {
  for (const auto& s : AllTableSpecs())
    if (s.name == name) return &s;
  return nullptr;
}

double DtypeBytes(std::string_view dtype) {
  if (dtype == "float32") return 4;
  if (dtype == "bfloat16" || dtype == "float16" || dtype == "half") return 2;
  if (dtype == "fp8" || dtype == "fp8_block" || dtype == "int8") return 1;
  if (dtype == "nvfp4") return 0.5625;  // 4 bits plus one 8-bit scale per 16 values
  throw Error("unknown dtype '" + std::string(dtype) +
              "'; expected one of float32, bfloat16, float16, half, fp8, fp8_block, int8, nvfp4");
}

}  // namespace servecast::tables
