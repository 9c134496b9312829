#include "serve/database.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "core/yaml_util.h"
#include "perfdb/discovery.h"
#include "tables/table_spec.h"

namespace servecast::serve {

namespace {

bool IsEngineName(const std::string& b) {
  return b == "trtllm" || b == "vllm" || b == "sglang";
}

// The data source backend when none is named (NCCL's system-wide tables aside):
// the one named after `engine` (an AIC tree holds trtllm/, vllm/ and sglang/
// sources side by side), else the only one the system has, else "cuda" when
// present. `note` says so when the engine reads another engine's data.
std::string DefaultBackend(const perfdb::DataTree& tree, const std::string& system, const std::string& engine,
                           std::string& note) {
  std::vector<std::string> backends;
  for (const auto& b : tree.Backends(system))
    if (b != "nccl" && b != "oneccl") backends.push_back(b);
  const auto has = [&](const std::string& b) {
    return std::find(backends.begin(), backends.end(), b) != backends.end();
  };
  if (!engine.empty() && has(engine)) return engine;
  if (backends.size() == 1) {
    if (!engine.empty() && IsEngineName(backends.front()))
      note = "engine " + engine + " reads " + backends.front() + " data, the only source for " + system +
             " (--data names another)";
    return backends.front();
  }
  if (has("cuda")) return "cuda";
  std::string have;
  for (const auto& b : backends) have += (have.empty() ? "" : ", ") + b;
  if (backends.empty())
    throw perfdb::MissingDataError("no perf data for system '" + system + "' under the data roots (" + [&] {
                                     std::string s;
                                     for (const auto& r : tree.roots()) s += (s.empty() ? "" : ", ") + r;
                                     return s;
                                   }() + ")" +
                                   (tree.Systems().empty() ? "" : " (systems with data: " + [&] {
                                     std::string s;
                                     for (const auto& x : tree.Systems()) s += (s.empty() ? "" : ", ") + x;
                                     return s;
                                   }() + ")"));
  throw UsageError("system '" + system + "' has perf data from several sources (" + have +
                   "); choose one with --data <backend>[/<version>]");
}

// AIC's "current" version of a backend on a system: the query_versions.yaml of
// an AIC systems folder (a data root, or the folder holding it: AIC's data root
// is <systems>/data) names, per backend, `defaults: {B: {current: V}}`, and per
// system `overrides: {S: {B: {current: V}}}`. The named version is the default
// when the tree holds its tables; "" (newest) otherwise. `note` says which file
// decided.
std::string CurrentVersion(const perfdb::DataTree& tree, const std::string& system, const std::string& backend,
                           std::string& note) {
  namespace fs = std::filesystem;
  const std::vector<std::string> versions = tree.BackendVersions(system, backend, /*with_tables_only=*/true);
  for (const std::string& root : tree.roots()) {
    for (const fs::path& dir : {fs::path(root), fs::path(root).lexically_normal().parent_path()}) {
      const fs::path file = dir / "query_versions.yaml";
      std::error_code ec;
      if (!fs::is_regular_file(file, ec)) continue;
      const YAML::Node doc = LoadYamlFile(file.string());
      YAML::Node entry;
      if (doc["overrides"] && doc["overrides"][system] && doc["overrides"][system][backend])
        entry = doc["overrides"][system][backend];
      else if (doc["defaults"] && doc["defaults"][backend])
        entry = doc["defaults"][backend];
      if (!entry || !entry.IsMap() || !entry["current"] || !entry["current"].IsScalar()) return "";
      const std::string current = entry["current"].as<std::string>();
      if (std::find(versions.begin(), versions.end(), current) == versions.end()) return "";
      if (!versions.empty() && versions.back() != current)
        note += std::string(note.empty() ? "" : "; ") + backend + " " + current + ", the current version " +
                file.string() + " names (newer present: " + versions.back() + ")";
      return current;
    }
  }
  return "";
}

}  // namespace

TableNeed TableNeed::Declared(const std::string& table) {
  tables::GetTableSpec(table).Read();  // the Error naming a table without an estimator read
  TableNeed need(kDeclared);
  need.table = table;
  return need;
}

std::string TableNeedName(const TableNeed& need) {
  switch (need.kind) {
    case TableNeed::kGemm: return "gemm_perf";
    case TableNeed::kContextAttention: return "context_attention_perf";
    case TableNeed::kGenerationAttention: return "generation_attention_perf";
    case TableNeed::kMoe: return "moe_perf";
    case TableNeed::kNccl: return "nccl_perf";
    case TableNeed::kCustomAllReduce: return "custom_allreduce_perf";
    case TableNeed::kElementwise: return "elementwise_perf";
    case TableNeed::kQuantize: return "computescale_perf";
    case TableNeed::kContextMla: return "context_mla_perf";
    case TableNeed::kGenerationMla: return "generation_mla_perf";
    case TableNeed::kDeclared: return need.table;
  }
  return "?";
}

std::set<TableNeed> AllTableNeeds() {
  std::set<TableNeed> all{
      TableNeed::kGemm,       TableNeed::kContextAttention, TableNeed::kGenerationAttention, TableNeed::kMoe,
      TableNeed::kNccl,       TableNeed::kCustomAllReduce,  TableNeed::kElementwise,         TableNeed::kQuantize,
      TableNeed::kContextMla, TableNeed::kGenerationMla};
  for (const tables::TableSpec* spec : tables::EstimatorTables()) all.insert(TableNeed::Declared(spec->name));
  return all;
}

const perfdb::DeclaredTable* Database::declared(const std::string& table) const {
  const auto it = declared_.find(table);
  return it != declared_.end() && it->second ? &*it->second : nullptr;
}

std::unique_ptr<Database> Database::Open(systems::SystemSpec spec, const DatabaseOptions& options,
                                         const std::set<TableNeed>& needs) {
  std::unique_ptr<Database> d(new Database());
  d->options_ = options;
  d->sol_ = std::make_shared<const perfdb::Sol>(std::move(spec));
  const bool sol_mode = options.mode == perfdb::DatabaseMode::kSol;
  if (!sol_mode) {
    perfdb::OpenOptions open;
    open.nccl_version = options.nccl_version;
    open.preferred_nccl_version = d->sol_->spec().collectives.nccl_version;
    open.oneccl_version = d->sol_->spec().collectives.oneccl_version;
    open.shared_layer = options.mode == perfdb::DatabaseMode::kSilicon || options.mode == perfdb::DatabaseMode::kHybrid;
    const std::string system = d->sol_->spec().name;
    std::string backend = options.backend;
    auto tree = std::make_shared<const perfdb::DataTree>(perfdb::DataTree::Scan(options.roots));
    if (backend.empty()) backend = DefaultBackend(*tree, system, options.engine, d->source_note_);
    d->options_.backend = backend;
    const std::string version =
        options.version.empty() ? CurrentVersion(*tree, system, backend, d->source_note_) : options.version;
    d->db_.emplace(perfdb::PerfDatabase::Open(std::move(tree), system, backend, version, open));
    const perfdb::PerfDatabase& db = *d->db_;
    // Tables load in parallel (each into its own member); absences are collected
    // under a lock and reported in a fixed order.
    std::vector<std::thread> loaders;
    std::mutex absent_mu;
    // Runs `work` for `table` on a thread of its own: a table the source lacks
    // is absent, any other failure is rethrown by Open.
    auto spawn = [&](const std::string& table, auto work) {
      loaders.emplace_back([&d, &absent_mu, table, work]() mutable {
        try {
          work();
        } catch (const perfdb::MissingDataError&) {
          std::lock_guard<std::mutex> lock(absent_mu);
          d->absent_.push_back(table);
        } catch (...) {
          std::lock_guard<std::mutex> lock(absent_mu);
          d->load_errors_.push_back(std::current_exception());
        }
      });
    };
    auto load = [&](const std::string& table, auto build) {
      spawn(table, [&db, table, build]() mutable {
        const auto t0 = std::chrono::steady_clock::now();
        const perfdb::LoadedTable& loaded = db.Table(table);
        const auto t1 = std::chrono::steady_clock::now();
        build(loaded);
        const auto t2 = std::chrono::steady_clock::now();
        log::Debug(table + ": " + std::to_string(loaded.table.num_rows()) + " rows read in " +
                   std::to_string(std::chrono::duration<double>(t1 - t0).count()) + " s, indexed in " +
                   std::to_string(std::chrono::duration<double>(t2 - t1).count()) + " s");
      });
    };
    auto sol = d->sol_;
    if (needs.count(TableNeed::kGemm)) {
      // gemm_perf is the largest table by far and a model reads one or two of its
      // gemm_dtype slices: list the slices now (Parquet: from row-group
      // statistics) and decode each on its first query.
      spawn("gemm_perf", [&db, &d, sol] {
        std::vector<std::string> dtypes = db.SliceValues("gemm_perf", "gemm_dtype");
        d->gemm_.emplace(
            std::move(dtypes),
            [pdb = &db](const std::string& dtype) -> const Table& {
              return pdb->Table("gemm_perf", RowSlice{"gemm_dtype", dtype}).table;
            },
            *sol, "gemm_perf");
      });
    }
    if (needs.count(TableNeed::kContextAttention))
      load("context_attention_perf",
           [&](const perfdb::LoadedTable& t) { d->context_.emplace(perfdb::ContextAttentionTable::FromLoaded(t, sol)); });
    if (needs.count(TableNeed::kGenerationAttention))
      load("generation_attention_perf", [&](const perfdb::LoadedTable& t) {
        d->generation_.emplace(perfdb::GenerationAttentionTable::FromLoaded(t, sol));
      });
    if (needs.count(TableNeed::kMoe))
      load("moe_perf", [&](const perfdb::LoadedTable& t) { d->moe_.emplace(perfdb::MoeTable::FromLoaded(t, sol)); });
    if (needs.count(TableNeed::kNccl))
      load("nccl_perf", [&](const perfdb::LoadedTable& t) { d->nccl_.emplace(perfdb::NcclTable::FromLoaded(t, sol)); });
    if (needs.count(TableNeed::kCustomAllReduce))
      load("custom_allreduce_perf", [&](const perfdb::LoadedTable& t) {
        d->custom_ar_.emplace(perfdb::CustomAllReduceTable::FromLoaded(t, sol));
      });
    if (needs.count(TableNeed::kElementwise))
      load("elementwise_perf",
           [&](const perfdb::LoadedTable& t) { d->elementwise_.emplace(perfdb::ElementwiseTable::FromLoaded(t, sol)); });
    if (needs.count(TableNeed::kQuantize)) {
      load("computescale_perf", [&](const perfdb::LoadedTable& t) {
        d->compute_scale_.emplace(perfdb::ComputeScaleTable::FromLoaded(t, sol));
      });
      load("scale_matrix_perf", [&](const perfdb::LoadedTable& t) {
        d->scale_matrix_.emplace(perfdb::ScaleMatrixTable::FromLoaded(t, sol));
      });
    }
    if (needs.count(TableNeed::kContextMla))
      load("context_mla_perf",
           [&](const perfdb::LoadedTable& t) { d->context_mla_.emplace(perfdb::ContextMlaTable::FromLoaded(t, sol)); });
    if (needs.count(TableNeed::kGenerationMla))
      load("generation_mla_perf", [&](const perfdb::LoadedTable& t) {
        d->generation_mla_.emplace(perfdb::GenerationMlaTable::FromLoaded(t, sol));
      });
    // Declared tables: the generic reader, each into a slot made before any of
    // them loads (a loader writes only its own slot).
    for (const TableNeed& need : needs)
      if (need.kind == TableNeed::kDeclared) d->declared_[need.table];
    for (auto& [table, slot] : d->declared_)
      load(table, [&slot = slot, sol](const perfdb::LoadedTable& t) {
        slot.emplace(perfdb::DeclaredTable::FromLoaded(t, sol));
      });
    for (auto& t : loaders) t.join();
    if (!d->load_errors_.empty()) std::rethrow_exception(d->load_errors_.front());
    std::sort(d->absent_.begin(), d->absent_.end());
  }
  d->estimator_ = std::make_unique<perfdb::OpEstimator>(
      *d->sol_, options.mode, d->gemm_ ? &*d->gemm_ : nullptr, d->context_ ? &*d->context_ : nullptr,
      d->generation_ ? &*d->generation_ : nullptr, options.policy, d->moe_ ? &*d->moe_ : nullptr);
  return d;
}

std::string Database::source() const {
  if (!db_) return "sol";
  return db_->backend() + "/" + db_->version();
}

}  // namespace servecast::serve
