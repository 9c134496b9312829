#include "serve/engine_profile.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/yaml_util.h"
#include "model/family.h"

namespace servecast::serve {

double MemoryProfile::ActivationCoefficient(const std::string& key, int tp) const {
  auto it = activation_coefficients.find(key);
  if (it == activation_coefficients.end() || it->second.empty())
    throw ConfigError("engine profile has no activation coefficients for the " + key + " family");
  const int bucket = std::min(tp, 8);
  auto b = it->second.upper_bound(bucket);
  if (b == it->second.begin()) return b->second;
  return std::prev(b)->second;
}

double AggProfile::QueueFactor(std::int64_t batch, double prefill_steps) const {
  if (queue_rule == QueueRule::kLog2Batch) {
    if (batch <= 1) return 1.0;
    return std::min(1.0 + std::log2(static_cast<double>(batch)) * queue_slope, queue_max);
  }
  if (queue_rule == QueueRule::kPrefillQueue) return 1.0;
  return std::min(queue_base + (prefill_steps - queue_pivot) * queue_slope, queue_max);
}

double AggProfile::QueueWaitMs(std::int64_t batch, std::int64_t isl, std::int64_t ctx_tokens, double step_ms) const {
  if (queue_rule != QueueRule::kPrefillQueue || batch <= 1 || ctx_tokens < 1) return 0.0;
  return queue_share * static_cast<double>(batch - 1) * static_cast<double>(isl) / static_cast<double>(ctx_tokens) *
         step_ms;
}

std::int64_t AggProfile::CtxTokens(std::int64_t isl, std::int64_t batch) const {
  if (default_ctx_tokens <= 0 || isl < 1) return isl;
  if (isl >= default_ctx_tokens) return default_ctx_tokens;
  const std::int64_t prompts = std::max<std::int64_t>(1, std::min(default_ctx_tokens / isl, batch));
  return prompts * isl;
}

EngineProfile LoadEngineProfile(const std::string& path) {
  YamlReader root(path, LoadYamlFile(path));
  root.AllowOnlyKeys({"schema_version", "engine", "memory", "agg", "disagg", "sim"});
  if (root.RequiredInt("schema_version") != 1)
    throw ConfigError(root.Where("schema_version"), "unsupported schema_version", "1");
  EngineProfile p;
  p.source_file = path;
  try {
    p.engine = model::ParseEngine(root.RequiredString("engine"));
  } catch (const UsageError& e) {
    throw ConfigError(root.Where("engine"), e.what(), "trtllm, vllm or sglang");
  }
  YamlReader mem = root.Child("memory");
  mem.AllowOnlyKeys({"activation_coefficients", "activation_floor_bytes", "activation_factor", "other_bytes_factor",
                     "kv_budget"});
  YamlReader coef = mem.Child("activation_coefficients");
  // One coefficient set per activation key the registered model families use.
  std::vector<std::string> keys;
  for (const model::ModelFamily* f : model::Families())
    if (std::find(keys.begin(), keys.end(), f->ActivationKey()) == keys.end()) keys.push_back(f->ActivationKey());
  coef.AllowOnlyKeys(keys);
  for (const std::string& fam : keys) {
    YamlReader f = coef.Child(fam);
    for (const auto& kv : f.node()) {
      const std::int64_t tp = YamlToInt(path, kv.first, std::string("activation_coefficients.") + fam);
      const double c = YamlToDouble(path, kv.second, std::string("activation_coefficients.") + fam);
      if (tp < 1 || c <= 0)
        throw ConfigError(YamlWhere(path, kv.second, std::string("activation_coefficients.") + fam),
                          "bad coefficient", "a tp bucket >= 1 mapped to a positive number");
      p.memory.activation_coefficients[fam][static_cast<int>(tp)] = c;
    }
    // Every tp maps to the largest bucket <= it: without bucket 1, tp 1 would
    // silently take a larger tp's coefficient.
    if (!p.memory.activation_coefficients[fam].count(1))
      throw ConfigError(coef.Where(fam), "no tp bucket 1", "a coefficient for tp 1 (and any larger buckets)");
  }
  p.memory.activation_floor_bytes = mem.RequiredDouble("activation_floor_bytes");
  p.memory.activation_factor = mem.RequiredDouble("activation_factor");
  p.memory.other_bytes_factor = mem.RequiredDouble("other_bytes_factor");
  YamlReader kv = mem.Child("kv_budget");
  kv.AllowOnlyKeys({"rule", "fraction", "reserved", "tolerance"});
  const std::string rule = kv.RequiredString("rule");
  if (rule == "of_free")
    p.memory.kv_budget.rule = KvBudgetRule::kOfFree;
  else if (rule == "of_total")
    p.memory.kv_budget.rule = KvBudgetRule::kOfTotal;
  else
    throw ConfigError(kv.Where("rule"), "unknown KV budget rule '" + rule + "'", "of_free or of_total");
  p.memory.kv_budget.fraction = kv.RequiredDouble("fraction");
  p.memory.kv_budget.reserved = kv.RequiredDouble("reserved");
  p.memory.kv_budget.tolerance = kv.RequiredDouble("tolerance");
  for (double f : {p.memory.kv_budget.fraction, p.memory.kv_budget.reserved, p.memory.kv_budget.tolerance})
    if (f < 0 || f > 1) throw ConfigError(kv.Where(), "KV budget fractions must lie in [0, 1]");

  YamlReader agg = root.Child("agg");
  agg.AllowOnlyKeys({"mix_gen_tokens", "mix_efficiency", "tpot_mix_steps_offset", "ttft_queue", "dispatch_ms_per_layer",
                     "step_ms_per_request", "throughput_cap", "max_num_tokens", "default_ctx_tokens"});
  AggProfile& a = p.agg;
  const std::string mix = agg.RequiredString("mix_gen_tokens");
  if (mix == "base") a.mix_gen_tokens = AggProfile::MixGenTokens::kBase;
  else if (mix == "vllm") a.mix_gen_tokens = AggProfile::MixGenTokens::kVllm;
  else throw ConfigError(agg.Where("mix_gen_tokens"), "unknown rule '" + mix + "'", "base or vllm");
  a.mix_efficiency = agg.RequiredDouble("mix_efficiency");
  a.tpot_mix_steps_offset = static_cast<int>(agg.RequiredInt("tpot_mix_steps_offset"));
  YamlReader q = agg.Child("ttft_queue");
  const std::string qrule = q.RequiredString("rule");
  if (qrule == "linear") {
    q.AllowOnlyKeys({"rule", "base", "pivot", "slope", "max"});
    a.queue_rule = AggProfile::QueueRule::kLinear;
    a.queue_base = q.RequiredDouble("base");
    a.queue_pivot = q.RequiredDouble("pivot");
  } else if (qrule == "log2_batch") {
    q.AllowOnlyKeys({"rule", "slope", "max"});
    a.queue_rule = AggProfile::QueueRule::kLog2Batch;
  } else if (qrule == "prefill_queue") {
    q.AllowOnlyKeys({"rule", "share"});
    a.queue_rule = AggProfile::QueueRule::kPrefillQueue;
    a.queue_share = q.RequiredDouble("share");
    if (a.queue_share < 0 || a.queue_share > 1)
      throw ConfigError(q.Where("share"), "queue share out of range", "a number in [0, 1]");
  } else {
    throw ConfigError(q.Where("rule"), "unknown TTFT queue rule '" + qrule + "'",
                      "linear, log2_batch or prefill_queue");
  }
  if (a.queue_rule != AggProfile::QueueRule::kPrefillQueue) {
    a.queue_slope = q.RequiredDouble("slope");
    a.queue_max = q.RequiredDouble("max");
  }
  a.dispatch_ms_per_layer = agg.RequiredDouble("dispatch_ms_per_layer");
  const std::string cap = agg.RequiredString("throughput_cap");
  if (cap == "none") a.littles_law_cap = false;
  else if (cap == "littles_law") a.littles_law_cap = true;
  else throw ConfigError(agg.Where("throughput_cap"), "unknown cap '" + cap + "'", "none or littles_law");
  a.max_num_tokens = agg.RequiredInt("max_num_tokens");
  a.default_ctx_tokens = agg.OptionalInt("default_ctx_tokens", 0);
  a.step_ms_per_request = agg.OptionalDouble("step_ms_per_request", 0);
  if (a.mix_efficiency <= 0 || a.tpot_mix_steps_offset < 0 || a.queue_max <= 0 || a.max_num_tokens < 0 ||
      a.dispatch_ms_per_layer < 0 || a.default_ctx_tokens < 0 || a.step_ms_per_request < 0)
    throw ConfigError(agg.Where(), "agg constants out of range",
                      "mix_efficiency > 0, offsets and dispatch >= 0, queue max > 0, max_num_tokens, "
                      "default_ctx_tokens and step_ms_per_request >= 0");

  YamlReader dis = root.Child("disagg");
  dis.AllowOnlyKeys({"prefill_latency_correction", "decode_latency_correction", "ttft_correction",
                     "prefill_rate_degradation", "decode_rate_degradation"});
  DisaggProfile& d = p.disagg;
  d.prefill_latency_correction = dis.RequiredDouble("prefill_latency_correction");
  d.decode_latency_correction = dis.RequiredDouble("decode_latency_correction");
  d.ttft_correction = dis.RequiredDouble("ttft_correction");
  d.prefill_rate_degradation = dis.RequiredDouble("prefill_rate_degradation");
  d.decode_rate_degradation = dis.RequiredDouble("decode_rate_degradation");
  for (double v : {d.prefill_latency_correction, d.decode_latency_correction, d.ttft_correction,
                   d.prefill_rate_degradation, d.decode_rate_degradation})
    if (v <= 0) throw ConfigError(dis.Where(), "disagg constants must be positive");

  if (root.Has("sim")) {
    YamlReader sim = root.Child("sim");
    sim.AllowOnlyKeys({"max_num_tokens", "max_num_seqs", "chunked_prefill", "mixed_batches", "kv_block_tokens",
                       "admission", "disagg_handoff_ms"});
    SimProfile& s = p.sim;
    s.present = true;
    s.max_num_tokens = sim.RequiredInt("max_num_tokens");
    s.max_num_seqs = sim.RequiredInt("max_num_seqs");
    s.chunked_prefill = sim.OptionalBool("chunked_prefill", true);
    s.mixed_batches = sim.OptionalBool("mixed_batches", true);
    s.kv_block_tokens = sim.RequiredInt("kv_block_tokens");
    s.disagg_handoff_ms = sim.OptionalDouble("disagg_handoff_ms", 0);
    if (!(s.disagg_handoff_ms >= 0))
      throw ConfigError(sim.Where("disagg_handoff_ms"), "a negative hand-off latency", "disagg_handoff_ms >= 0 (ms)");
    const std::string adm = sim.RequiredString("admission");
    if (adm == "on_demand") s.admission = SimProfile::Admission::kOnDemand;
    else if (adm == "reserve_full") s.admission = SimProfile::Admission::kReserveFull;
    else throw ConfigError(sim.Where("admission"), "unknown admission '" + adm + "'", "on_demand or reserve_full");
    if (s.max_num_tokens < 1 || s.max_num_seqs < 0 || s.kv_block_tokens < 1)
      throw ConfigError(sim.Where(), "sim constants out of range",
                        "max_num_tokens >= 1, max_num_seqs >= 0 (0: no limit), kv_block_tokens >= 1");
  }
  return p;
}

EngineProfile LoadEngineProfileByName(const std::string& engines_dir, model::Engine engine,
                                      const std::string& calibration) {
  namespace fs = std::filesystem;
  fs::path dir(engines_dir);
  if (!calibration.empty() && calibration != "servecast") {
    dir /= calibration;
    if (!fs::is_directory(dir)) {
      std::string have = "servecast";
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(engines_dir, ec))
        if (e.is_directory()) have += ", " + e.path().filename().string();
      throw UsageError("--calibration '" + calibration + "': no such calibration in " + engines_dir +
                       " (have: " + have + ")");
    }
  }
  const std::string path = (dir / (std::string(model::EngineName(engine)) + ".yaml")).string();
  if (!std::filesystem::exists(path))
    throw ConfigError("engine profile " + path + " not found (set --engines-dir or SERVECAST_HOME)");
  EngineProfile p = LoadEngineProfile(path);
  if (p.engine != engine)
    throw ConfigError(SourceLocation{path, 0, "engine"},
                      std::string("the profile is for ") + model::EngineName(p.engine) + ", but the file is named for " +
                          model::EngineName(engine),
                      std::string("engine: ") + model::EngineName(engine));
  return p;
}

}  // namespace servecast::serve
