#include "serve/evaluate.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.h"
#include "core/value.h"
#include "model/op_builder.h"
#include "perfdb/sol.h"
#include "tables/cost_model.h"
#include "tables/table_spec.h"

namespace servecast::serve {

using model::CeilDiv;
using model::Op;
using model::OpKind;
using perfdb::DatabaseMode;

namespace {

// power x latency (W*ms); 0 without power.
double EnergyWms(const std::optional<double>& power_w, double latency_ms) {
  return power_w ? *power_w * latency_ms : 0.0;
}

OpCost FromEstimate(const perfdb::OpEstimate& e, double flops) {
  OpCost c{e.latency_ms, e.sol_ms, flops, e.source, e.detail};
  c.energy_wms = EnergyWms(e.power_w, e.latency_ms);
  return c;
}

OpCost FromTable(const perfdb::Estimate& e, double flops, std::string detail) {
  const double sol = e.sol_fraction * e.latency_ms;
  OpCost c{e.latency_ms, sol, flops, perfdb::EstimateSourceName(e.source), std::move(detail)};
  c.energy_wms = EnergyWms(e.power_w, e.latency_ms);
  return c;
}

bool SolMode(const Database& db) { return db.mode() == DatabaseMode::kSol; }
bool EmpiricalMode(const Database& db) { return db.mode() == DatabaseMode::kEmpirical; }

bool HybridMode(const Database& db) {
  return db.mode() == DatabaseMode::kHybrid;
}

// A collective's answer: as the table says; util-empirical in EMPIRICAL mode
// (AIC costs custom all-reduce and NCCL ops there by util over message size too)
// and in HYBRID mode after a table miss (CommEstimate::silicon_miss set).
OpCost CommCost(const perfdb::CommEstimate& e, const Database& db, std::string detail) {
  const bool fallback = !e.silicon_miss.empty();
  if (EmpiricalMode(db) || fallback) detail = "util-empirical over " + detail;
  if (fallback) detail += "; silicon miss: " + e.silicon_miss;
  OpCost c = FromTable(e, 0, std::move(detail));
  if (EmpiricalMode(db) || fallback) c.source = "empirical";
  return c;
}

// A collective table's answer in this mode (EMPIRICAL util-empirical, HYBRID the
// table then util-empirical, SILICON the table or a donor's GPU count), labelled
// `table`: `what`, and the donor's GPU count when one was borrowed.
template <class CommTable, class Query>
OpCost QueryComm(const CommTable& t, const Query& q, const Database& db, const std::string& table,
                 const std::string& what) {
  const perfdb::CommEstimate e = EmpiricalMode(db) ? t.QueryEmpirical(q)
                                 : HybridMode(db)  ? t.QueryHybrid(q)
                                                   : t.QueryWithDonor(q);
  std::string detail = table + ": " + what;
  if (e.borrowed_from_gpus) detail += " (borrowed from " + std::to_string(*e.borrowed_from_gpus) + " GPUs)";
  return CommCost(e, db, detail);
}

// An elementwise_perf answer in this mode, when the data has a bfloat16 slice
// for `measured_op`: SILICON the table; HYBRID the table, a typed miss falling
// back to util-empirical over the slice; EMPIRICAL util-empirical over the slice.
// nullopt (the caller's formula) in SOL mode or without the table or slice.
struct MeasuredCost {
  perfdb::Estimate estimate;
  std::string source;
  std::string detail;
};
std::optional<MeasuredCost> MeasuredElementwise(const Database& db, const std::string& measured_op, double tokens,
                                                double width) {
  if (measured_op.empty() || SolMode(db) || !db.elementwise() || !db.elementwise()->Has(measured_op, "bfloat16"))
    return std::nullopt;
  const perfdb::ElementwiseTable& t = *db.elementwise();
  const std::string what = "elementwise_perf " + measured_op + " tokens=" + FormatG6(tokens) + " width=" + FormatG6(width);
  std::string silicon_miss;
  if (!EmpiricalMode(db)) {
    try {
      const perfdb::Estimate e = t.Query(measured_op, "bfloat16", tokens, width);
      return MeasuredCost{e, perfdb::EstimateSourceName(e.source), what};
    } catch (const perfdb::MissingDataError& miss) {
      if (!HybridMode(db)) throw;
      silicon_miss = miss.what();
    }
  }
  try {
    const perfdb::Estimate e = t.QueryEmpirical(measured_op, "bfloat16", tokens, width);
    std::string detail = "util-empirical over " + what;
    if (!silicon_miss.empty()) detail += "; silicon miss: " + silicon_miss;
    return MeasuredCost{e, "empirical", detail};
  } catch (const perfdb::MissingDataError& miss) {
    if (silicon_miss.empty()) throw;
    throw perfdb::MissingDataError(what + ": silicon: " + silicon_miss + "; empirical: " + miss.what());
  }
}

// A memory-bound op: the elementwise_perf answer when the data has that op
// (MeasuredElementwise), else the memory formula.
OpCost MemoryBound(const Database& db, const std::string& measured_op, double tokens, double width, double bytes) {
  const double sol = db.sol().MemMs(bytes);
  if (const auto m = MeasuredElementwise(db, measured_op, tokens, width)) {
    OpCost c{m->estimate.latency_ms, sol, 0, m->source, m->detail};
    c.energy_wms = EnergyWms(m->estimate.power_w, m->estimate.latency_ms);
    return c;
  }
  if (SolMode(db)) return OpCost{sol, sol, 0, "sol", "bytes / peak bandwidth"};
  return OpCost{MemoryOpMs(db, bytes), sol, 0, "empirical",
                "memory formula: " + FormatG6(bytes) + " B / (bw x efficiency) + constant latency"};
}

// Every op's math figures (FLOPs and the peak rate they run at) come from its
// roofline in the cost model (tables/cost_model.h): math_ms = flops / peak rate.
void SetMath(OpCost& c, const tables::OpCost& cost, const Database& db) {
  c.flops = cost.flops;
  if (c.flops > 0) c.math_ms = 1e3 * c.flops / db.sol().PeakFlops(cost.compute_dtype);
}

OpCost Gemm(const Op& op, const Database& db, std::int64_t m) {
  auto cost = [&] {
    return tables::GemmRoofline(op.quant, static_cast<double>(m), static_cast<double>(op.n), static_cast<double>(op.k));
  };
  if (op.quant != "fp8_static" || SolMode(db)) {
    OpCost c = FromEstimate(db.estimator().Gemm(op.quant, m, op.n, op.k), 0);
    SetMath(c, cost(), db);
    return c;
  }
  // Static-scale fp8: the fp8 row (dynamic quantization + GEMM) minus the
  // dynamic scale computation, minus the activation quantization when the input
  // arrives already quantized; never below the roofline (AIC §2.3).
  perfdb::OpEstimate fp8 = db.estimator().Gemm("fp8", m, op.n, op.k);
  double lat = fp8.latency_ms;
  std::string detail = "fp8 row " + FormatG6(fp8.latency_ms) + " ms (" + fp8.source + ")";
  if (!db.compute_scale())
    throw perfdb::MissingDataError("gemm " + op.name + " (fp8_static, m=" + std::to_string(m) +
                                   "): computescale_perf is not in the data source " + db.source() +
                                   " (needed to derive static-scale fp8 from the dynamic fp8 rows)");
  const perfdb::Estimate cs = db.compute_scale()->Query({m, op.k, "fp8"});
  lat -= cs.latency_ms;
  detail += " - compute_scale " + FormatG6(cs.latency_ms);
  if (op.low_precision_input) {
    if (db.scale_matrix()) {
      const perfdb::Estimate sm = db.scale_matrix()->Query({m, op.k, "fp8"});
      lat -= sm.latency_ms;
      detail += " - scale_matrix " + FormatG6(sm.latency_ms);
    } else {
      detail += " (scale_matrix_perf absent: quantization of the fp8 input not subtracted)";
    }
  }
  const double sol = db.sol().GemmMs("fp8", static_cast<double>(m), static_cast<double>(op.n), static_cast<double>(op.k));
  OpCost c{std::max(lat, sol), sol, 0, "estimated", detail};
  SetMath(c, cost(), db);
  return c;
}

// Per-token-sized extras fused into a context attention layer by AIC's model:
// RoPE, the KV-cache write and (Qwen3) q/k norms, x 1.1. With a measured
// rotary_embedding table, RoPE is that kernel over every token instead.
double ContextExtrasMs(const Op& op, const Database& db, const PassShape& s, std::string& how) {
  const double q = static_cast<double>(op.heads * op.head_dim);
  const double k = static_cast<double>(op.kv_heads * op.head_dim);
  const double fmha_bytes = perfdb::FmhaQuant(op.fmha_quant).mem_bytes;
  auto mem = [&](double bytes) { return MemoryOpMs(db, bytes); };
  double rope = 2 * mem(2 * q + 2 * k);
  how = "rope+kv_write";
  if (const auto m = MeasuredElementwise(db, "rotary_embedding", static_cast<double>(CeilDiv(s.batch * s.seq, op.seq_split)),
                                         static_cast<double>((op.heads + op.kv_heads) * op.head_dim))) {
    rope = m->estimate.latency_ms;
    how = m->source == "empirical" ? "rope (elementwise_perf rotary_embedding, util-empirical)+kv_write"
                                   : "rope (elementwise_perf rotary_embedding)+kv_write";
  }
  double extras = rope + mem(k * fmha_bytes) + mem(k * fmha_bytes);
  if (op.qk_norm) {
    extras += 2 * (2 * mem(2 * q) + 2 * mem(2 * k));
    how += "+qk_norm";
  }
  return 1.1 * extras;
}

// One context-attention table read for `seq` new tokens after `prefix` cached
// ones: the full-sequence row x the new tokens' share of the causal pairs.
struct AttentionChunk {
  perfdb::OpEstimate table;
  double share = 1;  // (full^2 - prefix^2) / full^2
  double Ms() const { return table.latency_ms * share; }
};
AttentionChunk ContextAttentionChunk(const Op& op, const Database& db, std::int64_t batch, std::int64_t seq,
                                     std::int64_t prefix) {
  const std::int64_t full = seq + prefix;
  const double f = static_cast<double>(full), p = static_cast<double>(prefix);
  return {db.estimator().ContextAttention(
              {batch, full, op.heads, op.kv_heads, op.head_dim, op.window, op.fmha_quant, op.kv_quant}),
          (f * f - p * p) / (f * f)};
}

tables::OpCost ContextAttentionCost(const Op& op, std::int64_t batch, std::int64_t seq, std::int64_t prefix) {
  return tables::ContextAttentionRoofline(static_cast<double>(batch), static_cast<double>(seq),
                                          static_cast<double>(prefix), static_cast<double>(op.heads),
                                          static_cast<double>(op.kv_heads), static_cast<double>(op.head_dim),
                                          static_cast<double>(op.window), op.fmha_quant, op.kv_quant);
}

// With context parallelism (op.seq_split = cp > 1) SGLang's zigzag split cuts
// each prompt into 2 cp chunks of c = ceil(seq / 2cp) tokens and gives rank r
// chunks r and 2cp - 1 - r; the busiest rank, 0, holds the first chunk (after
// the prefix) and the last (after prefix + seq - c tokens): two table reads.
OpCost ContextAttention(const Op& op, const Database& db, const PassShape& s) {
  const bool zigzag = op.seq_split > 1;
  const std::int64_t c = zigzag ? std::max<std::int64_t>(1, CeilDiv(s.seq, 2 * op.seq_split)) : s.seq;
  std::vector<std::pair<std::int64_t, std::int64_t>> chunks{{c, s.prefix}};  // (new tokens, prefix)
  if (zigzag) chunks.emplace_back(c, s.prefix + s.seq - c);
  double table_ms = 0, energy = 0, sol = 0;
  tables::OpCost cost;
  std::string source, table_detail, parts;
  for (const auto& [seq, prefix] : chunks) {
    const AttentionChunk a = ContextAttentionChunk(op, db, s.batch, seq, prefix);
    const tables::OpCost part = ContextAttentionCost(op, s.batch, seq, prefix);
    table_ms += a.Ms();
    energy += EnergyWms(a.table.power_w, a.Ms());
    sol += db.sol().Ms(part);
    cost.flops += part.flops;
    cost.bytes += part.bytes;
    cost.compute_dtype = part.compute_dtype;
    if (source.empty()) source = a.table.source, table_detail = a.table.detail;
    parts += (parts.empty() ? "" : " + ") + FormatG6(a.table.latency_ms) + " ms (" + a.table.source + ")";
    if (prefix > 0) parts += " x prefix share " + FormatG6(a.share);
    if (zigzag) parts += " [" + std::to_string(seq) + " tokens after " + std::to_string(prefix) + "]";
  }
  std::string how;
  const double extras = SolMode(db) ? 0.0 : ContextExtrasMs(op, db, s, how);
  OpCost c_out{table_ms + extras, sol, cost.flops, source, table_detail};
  SetMath(c_out, cost, db);
  // Energy: the table's power over the table's share only; the fused extras
  // (RoPE, KV write, q/k norms) are formula-costed and carry none (AIC's goldens).
  c_out.energy_wms = energy;
  if (!SolMode(db)) {
    c_out.detail = (zigzag ? "zigzag cp" + std::to_string(op.seq_split) + ": table " : "table ") + parts + " + " +
                   how + " " + FormatG6(extras) + " ms";
    c_out.source = source == "silicon" ? "mixed" : source;
  }
  return c_out;
}

OpCost GenerationAttention(const Op& op, const Database& db, const PassShape& s) {
  OpCost c = FromEstimate(
      db.estimator().GenerationAttention({s.batch, s.seq, op.heads, op.kv_heads, op.head_dim, op.window, op.kv_quant}),
      0);
  SetMath(c,
          tables::GenerationAttentionRoofline(static_cast<double>(s.batch), static_cast<double>(s.seq),
                                              static_cast<double>(op.heads), static_cast<double>(op.kv_heads),
                                              static_cast<double>(op.head_dim), static_cast<double>(op.window),
                                              op.kv_quant, db.spec().gpu.sm_version),
          db);
  return c;
}

OpCost Moe(const Op& op, const Database& db, std::int64_t tokens) {
  const std::int64_t t = tokens * op.token_multiplier;
  OpCost c = FromEstimate(db.estimator().Moe({t, op.hidden, op.inter, op.topk, op.experts, op.moe_tp, op.moe_ep,
                                              op.quant, op.distribution}),
                          0);
  // The FLOP figure counts three projections (gated) whatever the slice's kernel.
  SetMath(
      c,
      tables::MoeRoofline(op.quant, static_cast<double>(t), static_cast<double>(op.hidden),
                          static_cast<double>(op.inter), static_cast<double>(op.topk), static_cast<double>(op.experts),
                          static_cast<double>(op.moe_tp), static_cast<double>(op.moe_ep), /*gated=*/true),
      db);
  return c;
}

// ---------------------------------------------------------------- MLA
// The mode rules are perfdb's (perfdb/mla.h); a table the source lacks names
// itself and what to collect.

OpCost ContextMla(const Op& op, const Database& db, const PassShape& s) {
  const std::int64_t full = s.seq + s.prefix;
  const double f = static_cast<double>(full), p = static_cast<double>(s.prefix);
  const tables::OpCost cost = tables::ContextMlaRoofline(static_cast<double>(s.batch), static_cast<double>(s.seq), p,
                                                         static_cast<double>(op.heads), op.fmha_quant, op.kv_quant);
  OpCost c = FromEstimate(perfdb::EstimateContextMla(db.mode(), db.sol(), db.context_mla(),
                                                     {s.batch, full, op.heads, op.fmha_quant, op.kv_quant}, op.name),
                          0);
  SetMath(c, cost, db);
  c.sol_ms = db.sol().Ms(cost);
  // Rows are full prefills; a cached prefix keeps the new tokens' share of the pairs (as attention).
  if (!SolMode(db) && s.prefix > 0) {
    const double share = (f * f - p * p) / (f * f);
    c.latency_ms *= share;
    c.energy_wms *= share;
    c.detail += " x prefix share " + FormatG6(share);
  } else if (SolMode(db)) {
    c.latency_ms = c.sol_ms;
  }
  return c;
}

OpCost GenerationMla(const Op& op, const Database& db, const PassShape& s) {
  OpCost c = FromEstimate(
      perfdb::EstimateGenerationMla(db.mode(), db.sol(), db.generation_mla(), {s.batch, s.seq, op.heads, op.kv_quant},
                                    op.name),
      0);
  SetMath(c,
          tables::GenerationMlaRoofline(static_cast<double>(s.batch), static_cast<double>(s.seq),
                                        static_cast<double>(op.heads), op.kv_quant, db.spec().gpu.sm_version),
          db);
  return c;
}

// ---------------------------------------------------------------- declared tables
// Any table whose declaration has an estimator read (tables/table_spec.h): the
// op's fixed key columns, each pass-bound axis from the pass, read and mode-ruled
// by perfdb's generic reader (perfdb/declared.h); math from the declared roofline.

OpCost DeclaredCost(const tables::TableSpec& spec, const Params& key, const Op& op, const Database& db) {
  OpCost c = FromEstimate(perfdb::EstimateDeclared(db.mode(), db.sol(), spec, db.declared(spec.name), key, op.name), 0);
  SetMath(c, spec.Roofline(key), db);
  return c;
}

OpCost DeclaredTableOp(const Op& op, const Database& db, const PassShape& s, std::int64_t tokens) {
  const tables::TableSpec& spec = tables::GetTableSpec(op.table);
  Params key = op.table_key;
  for (const tables::TableAxis& a : spec.Read().axes) {
    if (key.Has(a.column)) continue;  // the op fixes this axis
    const std::int64_t v = a.from == tables::AxisSource::kTokens  ? tokens
                           : a.from == tables::AxisSource::kBatch ? s.batch
                                                                  : s.seq + s.prefix;
    const double x = static_cast<double>(v) * op.table_axis_scale;
    if (x == std::floor(x))
      key.Set(a.column, Value(static_cast<std::int64_t>(x)));
    else
      key.Set(a.column, Value(x));
  }
  return DeclaredCost(spec, key, op, db);
}

// A per-head BMM of absorbed MLA decode: mla_bmm_perf, a declared table read by
// the generic path; the op keeps its kind for its weights (serve/memory.cpp).
OpCost MlaBmm(const Op& op, const Database& db, std::int64_t tokens) {
  static const tables::TableSpec& spec = tables::GetTableSpec("mla_bmm_perf");
  const Params key{
      {"op_name", op.measured_op}, {"bmm_dtype", op.quant}, {"num_heads", op.heads}, {"num_tokens", tokens}};
  return DeclaredCost(spec, key, op, db);
}

OpCost Comm(const Op& op, const Database& db, std::int64_t tokens) {
  const double size = static_cast<double>(tokens) * static_cast<double>(op.elems_per_token) * op.volume_factor;
  const std::string what = op.collective + " of " + FormatG6(size) + " elements over " + std::to_string(op.gpus) + " GPUs";
  if (op.kind == OpKind::kCustomAllReduce) {
    const double sol = db.sol().CustomAllReduceMs(size, op.gpus, op.comm_dtype);
    if (SolMode(db)) return OpCost{sol, sol, 0, "sol", what};
    if (!db.custom_allreduce())
      throw perfdb::MissingDataError(op.name + " (" + what + "): custom_allreduce_perf is not in the data source " +
                                     db.source());
    return QueryComm(*db.custom_allreduce(), perfdb::CustomAllReduceQuery{op.gpus, size, op.comm_dtype}, db,
                     "custom_allreduce_perf", what);
  }
  const double sol = db.sol().NcclMs(op.collective, size, op.gpus, op.comm_dtype);
  if (SolMode(db)) return OpCost{sol, sol, 0, "sol", what};
  if (!db.nccl())
    throw perfdb::MissingDataError(op.name + " (" + what + "): nccl_perf is not in the data of " + db.spec().name);
  return QueryComm(*db.nccl(), perfdb::NcclQuery{op.collective, op.comm_dtype, op.gpus, size}, db, "nccl_perf", what);
}

OpCost P2P(const Op& op, const Database& db, std::int64_t tokens) {
  const auto& node = db.spec().node;
  const double bytes = static_cast<double>(tokens) * static_cast<double>(op.elems_per_token) * 2.0;
  const double sol = 1e3 * bytes / node.inter_node_bw_bytes_per_s;
  if (SolMode(db)) return OpCost{sol, sol, 0, "sol", "bytes / inter-node bandwidth"};
  return OpCost{sol + 1e3 * node.p2p_latency_s, sol, 0, "empirical",
                "bytes / inter-node bandwidth + p2p latency (" + FormatG6(bytes) + " B)"};
}

}  // namespace

double MemoryOpMs(const Database& db, double bytes) {
  const auto& gpu = db.spec().gpu;
  if (SolMode(db)) return 1e3 * bytes / gpu.mem_bw_bytes_per_s;
  return 1e3 * (bytes / (gpu.mem_bw_bytes_per_s * gpu.mem_bw_efficiency) + gpu.mem_latency_s);
}

namespace {

OpCost Dispatch(const Op& op, const Database& db, const PassShape& shape) {
  std::int64_t tokens = op.tokens == model::TokenRule::kPerRequest ? shape.batch : shape.Tokens();
  if (op.seq_split > 1) tokens = CeilDiv(tokens, op.seq_split);  // context parallelism: the busiest rank's share
  switch (op.kind) {
    case OpKind::kGemm: return Gemm(op, db, tokens);
    case OpKind::kContextAttention: return ContextAttention(op, db, shape);
    case OpKind::kGenerationAttention: return GenerationAttention(op, db, shape);
    case OpKind::kElementwise: {
      const double t = static_cast<double>(tokens);
      return MemoryBound(db, op.measured_op, t, static_cast<double>(op.measured_width),
                         2.0 * static_cast<double>(op.dim_in + op.dim_out) * t);
    }
    case OpKind::kEmbedding: {
      const double t = static_cast<double>(tokens);
      return MemoryBound(db, op.measured_op, t, static_cast<double>(op.measured_width),
                         t * static_cast<double>(op.dim_in) * 2.0);
    }
    case OpKind::kCustomAllReduce:
    case OpKind::kNccl: return Comm(op, db, tokens);
    case OpKind::kP2P: return P2P(op, db, tokens);
    case OpKind::kMoe: return Moe(op, db, tokens);
    case OpKind::kContextMla: return ContextMla(op, db, shape);
    case OpKind::kGenerationMla: return GenerationMla(op, db, shape);
    case OpKind::kMlaBmm: return MlaBmm(op, db, tokens);
    case OpKind::kTable: return DeclaredTableOp(op, db, shape, tokens);
  }
  throw Error("op " + op.name + ": unknown kind");
}

}  // namespace

OpCost EvaluateOp(const Op& op, const Database& db, const PassShape& shape) {
  return Dispatch(op, db, shape);
}

}  // namespace servecast::serve
