#pragma once

// The perf data one estimate reads: a system spec, its SOL model, the tables of
// one data source (<backend>/<version> under the data roots) and the database
// mode (docs/estimator.md, "Inputs"). Tables are loaded when opened, only those
// asked for; a table the source lacks is absent (null), and a query that needs
// it is answered per the mode (SILICON: a miss naming the table; HYBRID: the
// util-empirical fallback; SOL: the roofline).

#include <compare>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "perfdb/comm.h"
#include "perfdb/declared.h"
#include "perfdb/elementwise.h"
#include "perfdb/mla.h"
#include "perfdb/modes.h"
#include "perfdb/perf_database.h"
#include "perfdb/quantize.h"
#include "system/system_spec.h"

namespace servecast::serve {

// A table an op list reads: one with a hand-written reader (the kinds below), or
// a declared table read through the generic path (kind kDeclared and its name;
// tables/table_spec.h EstimatorRead). `TableNeed::kGemm` converts to a need.
struct TableNeed {
  enum Kind {
    kGemm,
    kContextAttention,
    kGenerationAttention,
    kMoe,
    kNccl,
    kCustomAllReduce,
    kElementwise,
    kQuantize,
    kContextMla,     // context_mla_perf (MLA prefill)
    kGenerationMla,  // generation_mla_perf (MLA absorbed decode)
    kDeclared,       // `table`, read by perfdb::DeclaredTable (mla_bmm_perf, ...)
  };
  TableNeed(Kind k) : kind(k) {}  // NOLINT(google-explicit-constructor): the kinds are needs
  // The need of a declared table (Error when it declares no estimator read).
  static TableNeed Declared(const std::string& table);
  Kind kind;
  std::string table;  // kDeclared only
  auto operator<=>(const TableNeed&) const = default;
  bool operator==(const TableNeed&) const = default;
};

// The perf table a need reads ("context_mla_perf"); kQuantize: computescale_perf.
std::string TableNeedName(const TableNeed& need);
// Every table need: each hand-written reader's and each declared table's (validate's set).
std::set<TableNeed> AllTableNeeds();

struct DatabaseOptions {
  std::vector<std::string> roots;  // data roots holding <system>/<family>/<backend>/<version>/
  std::string backend;             // data source backend ("cuda", "trtllm", ...); "" = chosen as below
  // The serving engine modelled ("trtllm", "vllm", "sglang"; "" = none). With no
  // `backend`, a source named after the engine is read first; else the system's
  // only source, else "cuda".
  std::string engine;
  std::string version;             // "" = newest
  perfdb::DatabaseMode mode = perfdb::DatabaseMode::kSilicon;
  perfdb::TransferPolicy policy = perfdb::TransferPolicy::kAggressive;
  std::string nccl_version;        // "" = newest
};

class Database {
 public:
  // Opens the source and loads the needed tables. In SOL mode no data is read
  // (and none needs to exist). Throws MissingDataError when the system, backend
  // or version is absent from the roots (naming what exists).
  static std::unique_ptr<Database> Open(systems::SystemSpec spec, const DatabaseOptions& options,
                                        const std::set<TableNeed>& needs);

  const systems::SystemSpec& spec() const { return sol_->spec(); }
  const perfdb::Sol& sol() const { return *sol_; }
  std::shared_ptr<const perfdb::Sol> sol_ptr() const { return sol_; }
  perfdb::DatabaseMode mode() const { return options_.mode; }
  const perfdb::OpEstimator& estimator() const { return *estimator_; }
  const perfdb::ContextAttentionTable* context_attention() const { return context_ ? &*context_ : nullptr; }
  const perfdb::NcclTable* nccl() const { return nccl_ ? &*nccl_ : nullptr; }
  const perfdb::CustomAllReduceTable* custom_allreduce() const { return custom_ar_ ? &*custom_ar_ : nullptr; }
  const perfdb::ElementwiseTable* elementwise() const { return elementwise_ ? &*elementwise_ : nullptr; }
  const perfdb::ComputeScaleTable* compute_scale() const { return compute_scale_ ? &*compute_scale_ : nullptr; }
  const perfdb::ScaleMatrixTable* scale_matrix() const { return scale_matrix_ ? &*scale_matrix_ : nullptr; }
  const perfdb::ContextMlaTable* context_mla() const { return context_mla_ ? &*context_mla_ : nullptr; }
  const perfdb::GenerationMlaTable* generation_mla() const { return generation_mla_ ? &*generation_mla_ : nullptr; }
  // A declared table read through the generic path; null when it was not asked
  // for or the source lacks it.
  const perfdb::DeclaredTable* declared(const std::string& table) const;
  // "cuda/13.0-cublaslt13.1-cudnn9.14-nccl2.28" (or "sol" when no data was read).
  std::string source() const;
  // How the source was chosen when that is worth saying (the engine reads another
  // engine's data because it is the system's only source); "" otherwise.
  const std::string& source_note() const { return source_note_; }
  // The perf tables behind the estimates (nullptr in SOL mode), for reports.
  const perfdb::PerfDatabase* perf_database() const { return db_ ? &*db_ : nullptr; }
  // Tables asked for that the source does not have (names), for reports.
  const std::vector<std::string>& absent_tables() const { return absent_; }

 private:
  Database() = default;
  DatabaseOptions options_;
  std::shared_ptr<const perfdb::Sol> sol_;
  std::optional<perfdb::PerfDatabase> db_;
  std::optional<perfdb::GemmPerf> gemm_;
  std::optional<perfdb::ContextAttentionTable> context_;
  std::optional<perfdb::GenerationAttentionTable> generation_;
  std::optional<perfdb::MoeTable> moe_;
  std::optional<perfdb::NcclTable> nccl_;
  std::optional<perfdb::CustomAllReduceTable> custom_ar_;
  std::optional<perfdb::ElementwiseTable> elementwise_;
  std::optional<perfdb::ComputeScaleTable> compute_scale_;
  std::optional<perfdb::ScaleMatrixTable> scale_matrix_;
  std::optional<perfdb::ContextMlaTable> context_mla_;
  std::optional<perfdb::GenerationMlaTable> generation_mla_;
  // One slot per declared need, created before the loaders start (each loader
  // fills its own slot).
  std::map<std::string, std::optional<perfdb::DeclaredTable>> declared_;
  std::unique_ptr<perfdb::OpEstimator> estimator_;
  std::vector<std::string> absent_;
  std::string source_note_;
  std::vector<std::exception_ptr> load_errors_;  // unreadable tables, rethrown by Open
};

}  // namespace servecast::serve
