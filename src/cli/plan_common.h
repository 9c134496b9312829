#pragma once

// Setup shared by `recommend`, `support` and `generate`: resource folders, the
// model and system, the data-source options and the search inputs.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "search/search.h"
#include "serve/database.h"
#include "serve/session.h"
#include "system/system_spec.h"

namespace servecast::cli {

// Flags every planning command takes.
struct PlanArgs {
  std::string model, system, engine = "trtllm", data;
  std::vector<std::string> data_roots;
  std::string database_mode = "silicon", transfer_policy = "aggressive";
  std::string systems_dir, models_dir, engines_dir;
  std::string decode_system;  // --decode-system (default, recommend, generate): decode workers there
  bool json = false;
};

// --model, --system, --data, --data-root, --database-mode (left out when
// `default_mode` is ""), --transfer-policy, --systems, --models, --engines, --json.
void AddPlanFlags(CLI::App* c, PlanArgs& a, const std::string& default_mode);
// --isl, --osl, --ttft, --tpot, --request-latency, --modes, --nextn, --mtp-accepted,
// --mtp-accept-rates, --strict-sla.
struct SlaArgs {
  std::int64_t isl = 4000, osl = 1000;
  double ttft = 2000, tpot = 30, request_latency = 0;
  std::string modes = "agg,disagg";
  std::string nextn = "0";  // MTP draft tokens per decode step, or "auto" (the checkpoint's)
  double mtp_accepted = 0;  // mean accepted draft tokens per step
  std::vector<double> mtp_accept_rates;  // AIC's per-position rates: one MTP depth searched per rate
  bool strict_sla = false;  // search::SearchInputs::strict_sla
};
void AddSlaFlags(CLI::App* c, SlaArgs& a);

// --prefix, --moe-distribution, --calibration: the workload and engine-profile
// flags that default, recommend and generate share (one help text each).
struct WorkloadArgs {
  std::int64_t prefix = 0;       // cached prefix tokens of the input
  std::string moe_distribution;  // expert load; "" = the model's default
  std::string calibration;       // engine-profile constants: "" (servecast's) or "aic"
};
void AddWorkloadFlags(CLI::App* c, WorkloadArgs& a);
// Sets in.prefix and in.moe_distribution; UsageError when --prefix is not below --isl.
void ApplyWorkload(const WorkloadArgs& a, search::SearchInputs& in);

// Loads --model (model::LoadModel) and, when it was resolved through an alias
// or the Hugging Face cache, prints how on stderr ("note: ..."), so that a
// resolution is never silent and --json output stays one document.
model::ModelConfig LoadModelNoted(const std::string& spec, const std::string& models_dir);

struct PlanSetup {
  std::string systems_dir, models_dir, engines_dir;
  model::ModelConfig model_config;  // as loaded, before a system adjusts its quantization (OpenEngineSearch's input)
  serve::Deployment deployment;
  const systems::SystemSpec& spec() const { return deployment.spec(); }
  const model::ModelConfig& model() const { return deployment.model(); }
};
// Resolves the folders, loads the system and the model (quantization adjusted for
// the system; the data is opened by the command).
PlanSetup LoadPlan(const PlanArgs& a, const std::function<std::string(const std::string&)>& find);

// Database options from the data flags: --data BACKEND[/VERSION], --data-root
// (default: <systems_dir>/data), --database-mode, --transfer-policy; `engine`
// (--backend) picks its own engine's source when --data names none.
serve::DatabaseOptions MakeDataOptions(const std::vector<std::string>& roots, const std::string& data,
                                       const std::string& database_mode, const std::string& transfer_policy,
                                       const std::string& systems_dir, const std::string& engine);
serve::DatabaseOptions DataOptions(const PlanArgs& a, const std::string& systems_dir);

// Deployment::OpenData, then the database's source note on stderr ("note: engine
// trtllm reads vllm data, ..."), so that the choice of data is never silent.
const serve::Database& OpenDataNoted(serve::Deployment& d, const serve::DatabaseOptions& options,
                                     const std::set<serve::TableNeed>& needs);

// --decode-system S2 (default, recommend, generate): the help text is one, so the
// three commands say the same.
CLI::Option* AddDecodeSystemFlag(CLI::App* c, std::string& decode_system);
// What --decode-system does to the search: only disaggregated serving (UsageError
// when --modes has no disagg, or when `most_gpus`, the largest count searched, is
// under 2: one prefill and one decode worker).
void ApplyDecodeSystem(search::SearchInputs& in, int most_gpus);

// The engines --backend names: trtllm, vllm or sglang, or all three for auto.
std::vector<std::string> BackendEngines(const std::string& backend);

// One engine's search of a deployment question: the model on --system with that
// system's data and, with --decode-system, the decode workers' model and data on
// the decode system (search::DecodeSide). Shared by default, recommend and
// generate, so that each opens the data, applies --decode-system and loads the
// engine profile the same way.
struct EngineSearch {
  std::string engine;
  std::unique_ptr<serve::Deployment> deployment, decode_deployment;
  const serve::Database* db = nullptr;
  const serve::Database* decode_db = nullptr;
  search::DecodeSide decode;
  serve::EngineProfile profile;
  std::string error;  // why the engine could not be searched (--backend auto only; else thrown)
  const search::DecodeSide* DecodeOrNull() const { return decode_db ? &decode : nullptr; }
  // "trtllm/1.3.0rc20" or, with a decode system, "<prefill source> + <decode source> (decode)".
  std::string DataName() const;
  // search::RunSearch of this engine at `in` (its engine field set to this engine).
  search::SearchResult Run(const search::SearchInputs& in) const;
};
// Opens the data of `engine` for `m` on `spec` (and on `decode_spec` when not
// null), with the source notes on stderr, then its engine profile (`calibration`:
// "" or "aic"). With `keep_errors` a missing source or a usage error of the data
// is kept in `error` (--backend auto goes on with the other engines); otherwise it
// is thrown.
EngineSearch OpenEngineSearch(const std::string& engine, const model::ModelConfig& m, const systems::SystemSpec& spec,
                              const systems::SystemSpec* decode_spec, const serve::DatabaseOptions& options,
                              const search::SearchInputs& in, const std::string& engines_dir,
                              const std::string& calibration, bool keep_errors);

// Search inputs from the SLA flags (validated; UsageError naming the flag) for
// model `m`: --nextn auto takes the checkpoint's num_nextn_predict_layers,
// --mtp-accept-rates becomes the search's MTP variants, and a model with MTP
// layers searched without MTP says so on stderr ("note: ...").
search::SearchInputs SearchInputsFrom(const SlaArgs& s, model::Engine e, int total_gpus, const model::ModelConfig& m);

// The mean accepted draft tokens per step of `nextn` drafts at AIC's per-position
// acceptance rates (chain acceptance: sum over i < nextn of rates[0] x ... x rates[i]).
double FoldAcceptRates(int nextn, const std::vector<double>& rates);

}  // namespace servecast::cli
