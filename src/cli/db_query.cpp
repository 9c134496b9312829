#include "cli/db_query.h"

#include <cstdio>
#include <memory>
#include <optional>

#include "cli/data_roots.h"
#include "cli/value_checks.h"
#include "collect/journal.h"
#include "core/error.h"
#include "perfdb/attention.h"
#include "perfdb/comm.h"
#include "perfdb/declared.h"
#include "perfdb/gemm.h"
#include "perfdb/mla.h"
#include "perfdb/modes.h"
#include "perfdb/moe.h"
#include "perfdb/perf_database.h"
#include "perfdb/quantize.h"
#include "perfdb/sol.h"
#include "system/system_spec.h"
#include "tables/table_spec.h"

namespace servecast::cli {

CLI::App* AddDbQueryCommand(CLI::App& db, DbQueryArgs& a) {
  auto* c = db.add_subcommand("query", "latency of one op at one shape: measured, interpolated or extrapolated");
  c->add_option("--systems-path", a.roots, "data roots (repeat; the first wins a key)")->required();
  c->add_option("--system", a.system, "system, e.g. h200_sxm (also names systems/<system>.yaml for SOL)")->required();
  c->add_option("--backend", a.backend, "data backend: cuda, cpu (servecast) or trtllm, vllm, sglang (AIC)")
      ->required();
  c->add_option("--version", a.version, "data version (default: the newest with tables)");
  c->add_option("--op", a.op,
                "gemm, context_attention, generation_attention, moe, context_mla, generation_mla, mla_bmm "
                "(every --database-mode); "
                "nccl, custom_allreduce (silicon, hybrid, empirical); compute_scale, scale_matrix (silicon); "
                "or any table declared with an estimator read (e.g. toy_axpy_perf), keyed by --key")
      ->required();
  c->add_option("--key", a.keys, "a declared table's key column: column=value (repeat; its slice keys and axes)");
  c->add_option("--transfer-policy", a.policy,
                "hybrid / empirical: which transfers may lend a utilization when the op's own slice is "
                "empty: off, conservative (xshape), balanced (+xquant), aggressive or all (+xprofile)")
      ->capture_default_str();
  c->add_option("--tokens", a.tokens, "moe: tokens")->capture_default_str()
      ->check(IntIn(1, kMaxTokens));
  c->add_option("--hidden", a.hidden, "moe: hidden size")
      ->check(IntIn(1, kMaxTokens));
  c->add_option("--inter", a.inter, "moe: expert intermediate size")
      ->check(IntIn(1, kMaxTokens));
  c->add_option("--topk", a.topk, "moe: experts per token")->capture_default_str()
      ->check(IntIn(1, kMaxTokens));
  c->add_option("--experts", a.experts, "moe: experts")->capture_default_str()
      ->check(IntIn(1, kMaxTokens));
  c->add_option("--moe-tp", a.moe_tp, "moe: tensor parallel")->capture_default_str()
      ->check(IntIn(1, kMaxGpus));
  c->add_option("--moe-ep", a.moe_ep, "moe: expert parallel")->capture_default_str()
      ->check(IntIn(1, kMaxGpus));
  c->add_option("--distribution", a.distribution, "moe: uniform, power_law_1.01, power_law_1.2")->capture_default_str();
  c->add_option("--collective", a.collective, "nccl: all_reduce, all_gather, reduce_scatter, alltoall")
      ->capture_default_str();
  c->add_option("--gpus", a.gpus, "nccl / custom_allreduce: GPUs (tp)")->capture_default_str()
      ->check(IntIn(1, kMaxGpus));
  c->add_option("--size", a.size, "nccl / custom_allreduce: message size in elements")
      ->check(NumberIn(0, 1e15, true));
  c->add_option("--comm-dtype", a.comm_dtype, "nccl / custom_allreduce: half, int8, fp8")->capture_default_str();
  c->add_option("--quant", a.quant, "gemm: bfloat16, fp8, fp8_block, fp8_static, ...")->capture_default_str();
  c->add_option("--m", a.m, "gemm: tokens")
      ->check(IntIn(1, kMaxTokens));
  c->add_option("--n", a.n, "gemm: output features")
      ->check(IntIn(1, kMaxTokens));
  c->add_option("--k", a.k, "gemm: input features")
      ->check(IntIn(1, kMaxTokens));
  c->add_option("--batch", a.batch, "attention: sequences")->capture_default_str()
      ->check(IntIn(1, kMaxBatch));
  c->add_option("--seq", a.seq, "attention: prefill length (context) or cached + new tokens (generation)")
      ->check(IntIn(1, kMaxTokens));
  c->add_option("--heads", a.heads, "attention: query heads per GPU")
      ->check(IntIn(1, kMaxTokens));
  c->add_option("--kv-heads", a.kv_heads, "attention: KV heads per GPU (default: = heads)")
      ->check(IntIn(1, kMaxTokens));
  c->add_option("--head-dim", a.head_dim, "attention: head dimension")->capture_default_str()
      ->check(IntIn(1, kMaxTokens));
  c->add_option("--window", a.window, "attention: sliding window, 0 = full")->capture_default_str()
      ->check(IntIn(0, kMaxTokens));
  c->add_option("--attn-dtype", a.attn_dtype, "context attention math: bfloat16 or fp8")->capture_default_str();
  c->add_option("--kv-dtype", a.kv_dtype, "attention KV cache: bfloat16 or fp8")->capture_default_str();
  c->add_option("--bmm-op", a.bmm_op, "mla_bmm: mla_gen_pre or mla_gen_post (with --heads, --tokens, --quant)")
      ->capture_default_str();
  c->add_flag("--json", a.json, "print one JSON document");
  c->add_option("--database-mode", a.mode,
                "silicon (tables only; a miss is an error), hybrid (tables, then util-empirical), "
                "empirical (util-empirical), sol (rooflines)")
      ->capture_default_str();
  c->add_option("--systems", a.systems_dir, "system spec folder (default: systems/ of the installation)");
  return c;
}

namespace {

// One query: its arguments, the opened database and what the answer reports.
struct Query {
  const DbQueryArgs& a;
  const perfdb::PerfDatabase& db;
  std::shared_ptr<const perfdb::Sol> sol;
  perfdb::DatabaseMode mode;
  perfdb::TransferPolicy policy;
  bool need_tables;  // every mode but sol reads the op's table
  collect::Json& out;
};

perfdb::OpEstimate QueryGemm(const Query& q) {
  const DbQueryArgs& a = q.a;
  if (a.n <= 0 || a.k <= 0) throw UsageError("db query --op gemm needs --m, --n and --k");
  std::optional<perfdb::GemmPerf> gemm;
  if (q.need_tables) gemm.emplace(q.db.Table("gemm_perf").table, *q.sol);
  perfdb::OpEstimator e(*q.sol, q.mode, gemm ? &*gemm : nullptr, nullptr, nullptr, q.policy);
  perfdb::OpEstimate est = e.Gemm(a.quant, a.m, a.n, a.k);
  q.out["shape"] = {{"quant", a.quant}, {"m", a.m}, {"n", a.n}, {"k", a.k}};
  return est;
}

perfdb::OpEstimate QueryAttention(const Query& q) {
  const DbQueryArgs& a = q.a;
  if (a.seq <= 0 || a.heads <= 0) throw UsageError("db query --op " + a.op + " needs --seq and --heads");
  std::int64_t kv = a.kv_heads > 0 ? a.kv_heads : a.heads;
  perfdb::OpEstimate est;
  if (a.op == "context_attention") {
    std::optional<perfdb::ContextAttentionTable> ctx;
    if (q.need_tables)
      ctx.emplace(perfdb::ContextAttentionTable::FromLoaded(q.db.Table("context_attention_perf"), q.sol));
    perfdb::OpEstimator e(*q.sol, q.mode, nullptr, ctx ? &*ctx : nullptr, nullptr, q.policy);
    est = e.ContextAttention({a.batch, a.seq, a.heads, kv, a.head_dim, a.window, a.attn_dtype, a.kv_dtype});
    q.out["shape"] = {
        {"batch", a.batch},       {"seq", a.seq},       {"heads", a.heads},           {"kv_heads", kv},
        {"head_dim", a.head_dim}, {"window", a.window}, {"attn_dtype", a.attn_dtype}, {"kv_dtype", a.kv_dtype}};
  } else {
    std::optional<perfdb::GenerationAttentionTable> gen;
    if (q.need_tables)
      gen.emplace(perfdb::GenerationAttentionTable::FromLoaded(q.db.Table("generation_attention_perf"), q.sol));
    perfdb::OpEstimator e(*q.sol, q.mode, nullptr, nullptr, gen ? &*gen : nullptr, q.policy);
    est = e.GenerationAttention({a.batch, a.seq, a.heads, kv, a.head_dim, a.window, a.kv_dtype});
    q.out["shape"] = {{"batch", a.batch},       {"seq", a.seq},       {"heads", a.heads},      {"kv_heads", kv},
                      {"head_dim", a.head_dim}, {"window", a.window}, {"kv_dtype", a.kv_dtype}};
  }
  return est;
}

perfdb::OpEstimate QueryMoe(const Query& q) {
  const DbQueryArgs& a = q.a;
  if (a.hidden <= 0 || a.inter <= 0) throw UsageError("db query --op moe needs --hidden and --inter");
  std::optional<perfdb::MoeTable> moe;
  if (q.need_tables) moe.emplace(perfdb::MoeTable::FromLoaded(q.db.Table("moe_perf"), q.sol));
  perfdb::OpEstimator e(*q.sol, q.mode, nullptr, nullptr, nullptr, q.policy, moe ? &*moe : nullptr);
  perfdb::OpEstimate est =
      e.Moe({a.tokens, a.hidden, a.inter, a.topk, a.experts, a.moe_tp, a.moe_ep, a.quant, a.distribution});
  q.out["shape"] = {{"tokens", a.tokens}, {"hidden", a.hidden},   {"inter", a.inter},
                    {"topk", a.topk},     {"experts", a.experts}, {"moe_tp", a.moe_tp},
                    {"moe_ep", a.moe_ep}, {"quant", a.quant},     {"distribution", a.distribution}};
  return est;
}

// MLA: context_mla (--batch --seq --heads --attn-dtype --kv-dtype), generation_mla
// (--batch --seq --heads --kv-dtype), mla_bmm (--bmm-op --heads --tokens --quant).
perfdb::OpEstimate QueryMla(const Query& q) {
  const DbQueryArgs& a = q.a;
  if (a.heads <= 0) throw UsageError("db query --op " + a.op + " needs --heads (local heads)");
  if (a.op == "mla_bmm") {  // mla_bmm_perf: a declared table, read by the generic path
    if (a.bmm_op != "mla_gen_pre" && a.bmm_op != "mla_gen_post")
      throw UsageError("db query --op mla_bmm --bmm-op '" + a.bmm_op + "'; expected mla_gen_pre or mla_gen_post");
    const tables::TableSpec& spec = tables::GetTableSpec("mla_bmm_perf");
    std::optional<perfdb::DeclaredTable> t;
    if (q.need_tables) t.emplace(perfdb::DeclaredTable::FromLoaded(q.db.Table("mla_bmm_perf"), q.sol));
    q.out["shape"] = {{"op_name", a.bmm_op}, {"heads", a.heads}, {"tokens", a.tokens}, {"bmm_dtype", a.quant}};
    return perfdb::EstimateDeclared(
        q.mode, *q.sol, spec, t ? &*t : nullptr,
        Params{{"op_name", a.bmm_op}, {"bmm_dtype", a.quant}, {"num_heads", a.heads}, {"num_tokens", a.tokens}},
        "mla_bmm");
  }
  if (a.seq <= 0) throw UsageError("db query --op " + a.op + " needs --seq");
  if (a.op == "context_mla") {
    std::optional<perfdb::ContextMlaTable> t;
    if (q.need_tables) t.emplace(perfdb::ContextMlaTable::FromLoaded(q.db.Table("context_mla_perf"), q.sol));
    q.out["shape"] = {
        {"batch", a.batch}, {"seq", a.seq}, {"heads", a.heads}, {"mla_dtype", a.attn_dtype}, {"kv_dtype", a.kv_dtype}};
    return perfdb::EstimateContextMla(q.mode, *q.sol, t ? &*t : nullptr,
                                      {a.batch, a.seq, a.heads, a.attn_dtype, a.kv_dtype});
  }
  std::optional<perfdb::GenerationMlaTable> t;
  if (q.need_tables) t.emplace(perfdb::GenerationMlaTable::FromLoaded(q.db.Table("generation_mla_perf"), q.sol));
  q.out["shape"] = {{"batch", a.batch}, {"seq", a.seq}, {"heads", a.heads}, {"kv_dtype", a.kv_dtype}};
  return perfdb::EstimateGenerationMla(q.mode, *q.sol, t ? &*t : nullptr, {a.batch, a.seq, a.heads, a.kv_dtype});
}

// The ops answered from their table alone (collectives also util-empirically):
// nccl, custom_allreduce, compute_scale, scale_matrix.
perfdb::OpEstimate QueryTableOp(const Query& q) {
  const DbQueryArgs& a = q.a;
  const perfdb::DatabaseMode mode = q.mode;
  collect::Json& out = q.out;
  const bool comm_op = a.op == "nccl" || a.op == "custom_allreduce";
  if (mode == perfdb::DatabaseMode::kSol || (!comm_op && mode != perfdb::DatabaseMode::kSilicon))
    throw UsageError("db query --op " + a.op + ": only --database-mode silicon" +
                     (comm_op ? ", hybrid and empirical cover" : " covers") + " this op so far");
  perfdb::OpEstimate est;
  perfdb::Estimate e;
  // Collectives: the table (silicon), util-empirical over message size
  // (empirical), or the table with a util-empirical fallback (hybrid).
  auto comm_query = [&](const auto& table, const auto& query) {
    const perfdb::CommEstimate ce = mode == perfdb::DatabaseMode::kEmpirical ? table.QueryEmpirical(query)
                                    : mode == perfdb::DatabaseMode::kHybrid  ? table.QueryHybrid(query)
                                                                             : table.QueryWithDonor(query);
    if (ce.borrowed_from_gpus) out["borrowed_from_gpus"] = *ce.borrowed_from_gpus;
    if (mode == perfdb::DatabaseMode::kEmpirical || !ce.silicon_miss.empty()) {
      est.detail = "util-empirical over " + table.name();
      if (!ce.silicon_miss.empty()) est.detail += "; silicon miss: " + ce.silicon_miss;
    }
    return ce;
  };
  if (a.op == "nccl") {
    if (a.size <= 0) throw UsageError("db query --op nccl needs --size");
    const auto& loaded = q.db.Table("nccl_perf");
    // NCCL tables are system-wide (<system>/comm/nccl/<version>): name that source.
    if (!loaded.sources.empty()) out["data_source"] = loaded.sources[0].backend + "/" + loaded.sources[0].version;
    auto t = perfdb::NcclTable::FromLoaded(loaded, q.sol);
    e = comm_query(t, perfdb::NcclQuery{a.collective, a.comm_dtype, a.gpus, a.size});
    out["shape"] = {{"collective", a.collective}, {"gpus", a.gpus}, {"size", a.size}, {"dtype", a.comm_dtype}};
  } else if (a.op == "custom_allreduce") {
    if (a.size <= 0) throw UsageError("db query --op custom_allreduce needs --size");
    auto t = perfdb::CustomAllReduceTable::FromLoaded(q.db.Table("custom_allreduce_perf"), q.sol);
    e = comm_query(t, perfdb::CustomAllReduceQuery{a.gpus, a.size, a.comm_dtype});
    out["shape"] = {{"tp", a.gpus}, {"size", a.size}, {"dtype", a.comm_dtype}};
  } else if (a.op == "scale_matrix") {
    if (a.k <= 0) throw UsageError("db query --op scale_matrix needs --m and --k");
    auto t = perfdb::ScaleMatrixTable::FromLoaded(q.db.Table("scale_matrix_perf"), q.sol);
    e = t.Query({a.m, a.k, "fp8"});
    out["shape"] = {{"m", a.m}, {"k", a.k}, {"quant_dtype", "fp8"}};
  } else {
    if (a.k <= 0) throw UsageError("db query --op compute_scale needs --m and --k");
    auto t = perfdb::ComputeScaleTable::FromLoaded(q.db.Table("computescale_perf"), q.sol);
    e = t.Query({a.m, a.k, "fp8"});
    out["shape"] = {{"m", a.m}, {"k", a.k}, {"quant_dtype", "fp8"}};
  }
  est.latency_ms = e.latency_ms;
  est.source = est.detail.empty() ? perfdb::EstimateSourceName(e.source) : "empirical";
  est.sol_fraction = e.sol_fraction;
  est.sol_ms = e.sol_fraction * e.latency_ms;
  return est;
}

// A table declared with an estimator read (tables/table_spec.h): --key col=value
// for each slice key and axis, typed as the declaration says.
perfdb::OpEstimate QueryDeclared(const Query& q, const tables::TableSpec& spec) {
  const tables::EstimatorRead& read = spec.Read();
  Params key;
  for (const std::string& kv : q.a.keys) {
    const std::size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("db query --key '" + kv + "': expected column=value");
    const std::string column = kv.substr(0, eq), text = kv.substr(eq + 1);
    const ValueType type = column == "op_name" ? ValueType::kString : spec.KeyColumn(column).type;
    std::int64_t i = 0;
    double d = 0;
    if (type == ValueType::kString) {
      key.Set(column, Value(text));
    } else if (type == ValueType::kInt64 && ParseInt64(text, i)) {
      key.Set(column, Value(i));
    } else if (type == ValueType::kDouble && ParseNumber(text, d)) {
      key.Set(column, Value(d));
    } else {
      throw UsageError("db query --key " + column + "=" + text + ": " + spec.name + "'s " + column + " is " +
                       (type == ValueType::kInt64 ? "an integer" : "a number"));
    }
  }
  std::string missing;
  std::vector<std::string> needed = read.slice_keys;
  for (const tables::TableAxis& ax : read.axes) needed.push_back(ax.column);
  for (const std::string& c : needed)
    if (!key.Has(c)) missing += (missing.empty() ? "" : ", ") + c;
  if (!missing.empty()) throw UsageError("db query --op " + spec.name + " needs --key for " + missing);
  // The key's physics first: a value the declaration's roofline refuses (an unknown
  // op_name or dtype) is the user's mistake, not a missing row.
  try {
    spec.Roofline(key);
  } catch (const perfdb::MissingDataError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError("db query --op " + spec.name + " --key: " + e.what());
  }
  std::optional<perfdb::DeclaredTable> t;
  if (q.need_tables) t.emplace(perfdb::DeclaredTable::FromLoaded(q.db.Table(spec.name), q.sol));
  collect::Json shape = collect::Json::object();
  for (const auto& [name, v] : key.items()) {
    if (const auto* s = std::get_if<std::string>(&v))
      shape[name] = *s;
    else if (const auto* i = std::get_if<std::int64_t>(&v))
      shape[name] = *i;
    else
      shape[name] = AsDouble(v);
  }
  q.out["shape"] = shape;
  return perfdb::EstimateDeclared(q.mode, *q.sol, spec, t ? &*t : nullptr, key);
}

perfdb::OpEstimate QueryOp(const Query& q) {
  const std::string& op = q.a.op;
  if (const tables::TableSpec* spec = tables::FindTableSpec(op); spec != nullptr && spec->estimator)
    return QueryDeclared(q, *spec);
  if (op == "gemm") return QueryGemm(q);
  if (op == "context_attention" || op == "generation_attention") return QueryAttention(q);
  if (op == "moe") return QueryMoe(q);
  if (op == "context_mla" || op == "generation_mla" || op == "mla_bmm") return QueryMla(q);
  if (op == "nccl" || op == "custom_allreduce" || op == "compute_scale" || op == "scale_matrix") return QueryTableOp(q);
  throw UsageError("db query --op '" + op +
                   "'; expected gemm, context_attention, generation_attention, moe, context_mla, generation_mla, "
                   "mla_bmm, nccl, custom_allreduce, compute_scale, scale_matrix or a table declared with an "
                   "estimator read");
}

void PrintEstimate(const DbQueryArgs& a, const std::string& version, const perfdb::OpEstimate& est,
                   collect::Json& out) {
  double latency = est.latency_ms, sol_fraction = est.sol_fraction;
  std::string source = est.source;
  out["database_mode"] = a.mode;
  out["transfer_policy"] = a.policy;
  out["sol_ms"] = est.sol_ms;
  if (!est.detail.empty()) out["detail"] = est.detail;
  out["latency_ms"] = latency;
  out["source"] = source;
  out["sol_fraction"] = sol_fraction;
  if (a.json)
    std::printf("%s\n", out.dump(2).c_str());
  else
    std::printf("%s %s: %.6g ms (%s, %.1f%% of speed of light) from %s\n", a.op.c_str(), out["shape"].dump().c_str(),
                latency, source.c_str(), 100 * sol_fraction,
                out.value("data_source", a.backend + "/" + version).c_str());
}

}  // namespace

int RunDbQuery(const DbQueryArgs& a, const std::function<std::string(const std::string&)>& find) {
  std::string sys_dir = a.systems_dir.empty() ? find("systems") : a.systems_dir;
  auto sol = std::make_shared<const perfdb::Sol>(systems::LoadSystemByName(sys_dir, a.system));
  perfdb::OpenOptions open_options;
  open_options.shared_layer = a.mode == "silicon" || a.mode == "hybrid";
  auto db = perfdb::PerfDatabase::Open(ResolveDataRoots(a.roots, "--systems-path"), a.system, a.backend, a.version,
                                       open_options);
  collect::Json out{{"system", a.system}, {"backend", a.backend}, {"version", db.version()}, {"op", a.op}};
  perfdb::DatabaseMode mode = perfdb::ParseDatabaseMode(a.mode);
  perfdb::TransferPolicy policy = perfdb::ParseTransferPolicy(a.policy);
  const Query q{a, db, sol, mode, policy, mode != perfdb::DatabaseMode::kSol, out};
  const perfdb::OpEstimate est = QueryOp(q);
  PrintEstimate(a, db.version(), est, out);
  return 0;
}

}  // namespace servecast::cli
