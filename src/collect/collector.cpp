#include "collect/collector.h"

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "collect/finalize.h"
#include "collect/journal.h"
#include "collect/launched.h"
#include "collect/run_lock.h"
#include "collect/worker.h"
#include "collect/scheduler.h"
#include "collect/summary.h"
#include "core/build_info.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/table_file.h"
#include "system/system_spec.h"

namespace servecast::collect {
namespace {

namespace fs = std::filesystem;

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

std::string Timestamp() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%d-%H%M%S", &tm);
  return buf;
}

double HostMemTotalBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  double kb = 0;
  while (in >> key >> kb >> unit)
    if (key == "MemTotal:") return kb * 1024;
  return 0;
}

void PrintPlan(const Plan& plan, bool list) {
  std::printf("plan for backend %s (sha256:%s)\n", plan.backend.c_str(), plan.plan_hash.c_str());
  std::printf("%-22s %8s %9s %8s %9s %10s %7s %7s\n", "op", "raw", "selected", "-skips", "-maturity", "supported",
              "shard", "final");
  std::int64_t total = 0;
  for (const auto& op : plan.ops) {
    const StageCounts& c = plan.counts.at(op);
    std::printf("%-22s %8lld %9lld %8lld %9lld %10lld %7lld %7lld\n", op.c_str(), static_cast<long long>(c.raw),
                static_cast<long long>(c.selected), static_cast<long long>(c.after_skips),
                static_cast<long long>(c.after_maturity), static_cast<long long>(c.supported),
                static_cast<long long>(c.after_shard), static_cast<long long>(c.final));
    total += c.final;
  }
  std::printf("total cases to run: %lld\n", static_cast<long long>(total));
  std::map<std::string, std::size_t> reasons;
  for (const auto& d : plan.dropped) reasons[d.c.op + " [" + d.stage + "] " + d.reason]++;
  for (const auto& [r, n] : reasons) std::printf("  dropped %zu: %s\n", n, r.c_str());
  if (list)
    for (const auto& c : plan.cases) std::printf("%s\n", c.id.c_str());
}

// A table that already holds rows with another column set (power on/off) would
// refuse the merge at the end; refuse before any time is spent.
void CheckExistingSchemas(const Registry& registry, const Plan& plan, const std::string& data_dir_of_version,
                          const std::string& system, const CollectOptions& opt, const RuntimeInfo& rt) {
  std::set<std::string> tables;
  for (const auto& op : plan.ops) tables.insert(registry.FindOp(plan.backend, op)->table().name);
  for (const auto& t : tables) {
    const TableSpec* spec = FindTableSpec(t);
    std::string stem = data_dir_of_version + "/" + system + "/" + spec->family + "/" + rt.backend + "/" + rt.version +
                       "/" + t;
    if (PathExists(stem + ".csv") && PathExists(stem + ".parquet"))
      throw UsageError(stem + ".csv and " + stem + ".parquet both hold this table; keep one (a data folder holds a "
                       "table in one format)");
    for (const char* ext : {".csv", ".parquet"}) {
      std::string path = stem + ext;
      if (!PathExists(path)) continue;
      if (opt.format != "auto" && std::string(ext) != "." + opt.format)
        throw UsageError(path + " holds this table in another format; collect with --format " +
                         std::string(ext + 1) + ", or convert it with `servecast db convert`");
      Table existing = ReadTableFile(path);
      bool has_power = existing.FindColumn("power").has_value();
      if (has_power != opt.measure_power)
        throw UsageError(path + " was collected " + (has_power ? "with" : "without") +
                         " --measure-power; collect into it with the same setting, or use another --out");
    }
  }
}

// The cases of the plan that --rerun-where selects: those that have every
// parameter the expression names and satisfy it. A case lacking one of them does
// not match, but an expression that no case of the plan can match (a typo) is
// refused, as is one that cannot be evaluated on a case (e.g. ordering a string
// against a number).
// The typo guard and the evaluation run over the whole supported plan (every shard,
// before --limit), so that a shard without the op an expression names is no error;
// the selection is this shard's cases.
std::set<std::string> RerunSelection(const Expr& where, const Plan& plan) {
  std::vector<std::string> names = where.Identifiers();
  std::set<std::string> here;
  for (const auto& c : plan.cases) here.insert(c.id);
  std::set<std::string> selected;
  std::map<std::string, std::set<std::string>> params_by_op;
  bool any_has_all = false;
  for (const auto& c : plan.supported) {
    bool all = true;
    for (const auto& n : names) all = all && c.params.Has(n);
    for (const auto& [k, _] : c.params.items()) params_by_op[c.op].insert(k);
    if (!all) continue;
    any_has_all = true;
    try {
      if (where.Test(c.params) && here.count(c.id)) selected.insert(c.id);
    } catch (const Error& e) {
      throw UsageError("--rerun-where: " + std::string(e.what()) + " (case " + c.id + ")");
    }
  }
  if (any_has_all) return selected;
  auto join = [](const auto& items) {
    std::string s;
    for (const auto& x : items) s += (s.empty() ? "" : ", ") + std::string(x);
    return s;
  };
  std::string ops;
  for (const auto& [op, params] : params_by_op) ops += (ops.empty() ? "" : "; ") + op + " (" + join(params) + ")";
  throw UsageError("--rerun-where '" + where.text() + "': no case of this run has " +
                   (names.size() == 1 ? "the parameter " : "all of the parameters ") + join(names) +
                   "; the run's ops and their parameters: " + (ops.empty() ? "none (the plan is empty)" : ops));
}

// `text` as one single-quoted shell word.
std::string ShellQuote(const std::string& text) {
  std::string q = "'";
  for (char ch : text) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

// --rerun-before's TIME in seconds since the epoch; a UsageError naming the
// expected format for anything but YYYY-MM-DDTHH:MM:SSZ.
std::int64_t ParseRerunBefore(const std::string& time) {
  std::optional<std::int64_t> s = ParseUtcSeconds(time);
  if (!s)
    throw UsageError("--rerun-before '" + time +
                     "': expected a UTC time YYYY-MM-DDTHH:MM:SSZ as the journal writes it, e.g. 2026-11-30T09:38:40Z");
  return *s;
}

const Backend& FindBackendOrThrow(const Registry& registry, const std::string& name) {
  const Backend* backend = registry.FindBackend(name);
  if (!backend) {
    std::string have;
    for (const auto& b : registry.BackendNames()) have += (have.empty() ? "" : ", ") + b;
    throw UsageError("unknown backend '" + name + "'; expected one of: " + have);
  }
  return *backend;
}

// Options that only go with others (--retry-failed, --rerun-where, --rerun-before).
void CheckOptionCombinations(const CollectOptions& opt) {
  if (opt.retry_failed && !opt.resume) throw UsageError("--retry-failed needs --resume");
  if (opt.rerun_where && !opt.resume)
    throw UsageError("--rerun-where needs --resume: it re-runs finished cases of an existing run (--run-dir)");
  if (opt.rerun_where && opt.plan_only)
    throw UsageError("--rerun-where does not combine with --plan-only: it selects finished cases of a run's journal");
  if (opt.rerun_before && !opt.rerun_where)
    throw UsageError(
        "--rerun-before needs --rerun-where: it narrows the cases that expression re-runs to those "
        "recorded before TIME");
}

// --rerun-before in seconds since the epoch (none without it); a time in the
// future is allowed with a warning.
std::optional<std::int64_t> RerunBeforeSeconds(const CollectOptions& opt) {
  if (!opt.rerun_before) return std::nullopt;
  std::int64_t s = ParseRerunBefore(*opt.rerun_before);
  if (s > *ParseUtcSeconds(UtcNow()))
    log::Warn("--rerun-before " + *opt.rerun_before +
              " is in the future: every case --rerun-where matches counts as not yet re-run, also the ones this "
              "invocation re-runs (a later call with the same time re-runs them again)");
  return s;
}

// --format and --measure-power against what the backend can write.
void CheckTableOptions(const CollectOptions& opt) {
  if (opt.format != "csv" && opt.format != "parquet" && opt.format != "auto")
    throw UsageError("--format " + opt.format + "; expected csv, parquet or auto");
  if (opt.measure_power && opt.plan.backend == "cpu")
    throw UsageError("--measure-power: the cpu backend has no power sensor to read; collect without it");
}

// --system, the backend's default for the runtime, or the system whose spec
// names the detected device; checked to load before any work.
// Creates `dir` and writes (then removes) a probe file in it; StartupError (exit 3)
// naming the flag, the folder and the reason when either fails.
void RequireWritable(const std::string& flag, const std::string& dir) {
  const std::string probe = dir + "/.servecast-write-probe-" + std::to_string(::getpid());
  try {
    MakeDirs(dir);
    WriteFileAtomic(probe, "probe\n");
  } catch (const Error& e) {
    throw StartupError(flag + " " + dir + " is not writable: " + e.what());
  }
  std::error_code ec;
  std::filesystem::remove(probe, ec);
}

std::string ResolveSystem(const Backend& backend, const RuntimeInfo& rt, const CollectOptions& opt) {
  std::string system = opt.system.empty() ? backend.DefaultSystem(rt) : opt.system;
  if (system.empty()) {
    for (const auto& name : systems::ListSystems(opt.systems_dir)) {
      auto spec = systems::LoadSystemByName(opt.systems_dir, name);
      for (const auto& alias : spec.gpu.device_name_aliases)
        if (alias == rt.device_name && system.empty()) system = name;
    }
    if (system.empty())
      throw UsageError("no system in " + opt.systems_dir + " lists the device '" + rt.device_name +
                       "' among its device_name_aliases; pass --system NAME (and never relabel a nearby SKU)");
  }
  // A typo fails here, before any work; so does a system that is not this device's.
  const systems::SystemSpec spec = systems::LoadSystemByName(opt.systems_dir, system);
  const bool host = rt.sm == 0;  // a backend without an SM measures this host's processor
  if (host != (spec.kind == "cpu"))
    throw UsageError("--system " + system + " describes a " + spec.kind + " machine (" + spec.gpu.device_name +
                     "), but the " + rt.backend + " backend measures " +
                     (host ? "this host's processor" : std::string("a GPU")) + " (" + rt.device_name + "); pass a " +
                     (host ? "cpu" : "gpu") + " system");
  const auto& aliases = spec.gpu.device_name_aliases;
  if (!host && !aliases.empty() && std::find(aliases.begin(), aliases.end(), rt.device_name) == aliases.end()) {
    std::string names;
    for (const auto& a : aliases) names += (names.empty() ? "" : ", ") + a;
    throw UsageError("the device '" + rt.device_name + "' is not system " + system + "'s (its device_name_aliases: " +
                     names + "); pass the system of this device (and never relabel a nearby SKU)");
  }
  return system;
}

// Where the cases run: the worker slots, or this rank of a launcher's job.
struct Placement {
  std::vector<int> devices;  // worker slots (not launched)
  LaunchInfo launch;         // launched: this rank
  int launched_device = 0;   // launched: the device of this rank
  bool lead = true;          // writes the journal, summary and tables (rank 0 when launched)
};

// The placement, and in `rt.gpus` the GPUs one case may span.
Placement PlaceCases(const Backend& backend, const CollectOptions& opt, RuntimeInfo& rt) {
  Placement p;
  p.devices = opt.devices.empty() ? backend.DefaultDevices() : opt.devices;
  for (int d : opt.devices)
    if (std::string why = backend.DeviceProblem(d); !why.empty()) throw UsageError("--gpus: " + why);
  if (opt.launched) {
    p.launch = DetectLaunch();
    rt.gpus = p.launch.world;
    rt.gpus_exact = true;
    if (!opt.devices.empty() && static_cast<std::size_t>(p.launch.local_rank) >= opt.devices.size())
      throw UsageError("--launched: local rank " + std::to_string(p.launch.local_rank) + " has no entry in --gpus");
    p.launched_device =
        opt.devices.empty() ? p.launch.local_rank : opt.devices[static_cast<std::size_t>(p.launch.local_rank)];
  } else {
    rt.gpus = static_cast<int>(p.devices.size());
  }
  p.lead = !opt.launched || p.launch.rank == 0;
  return p;
}

// A launched run needs a shared run dir and collects only ops whose every case spans all ranks.
void CheckLaunchedPlan(const Registry& registry, const Plan& plan, const CollectOptions& opt,
                       const LaunchInfo& launch) {
  if (opt.run_dir.empty())
    throw UsageError("--launched: give --run-dir, one folder every rank sees (shared across nodes)");
  for (const auto& c : plan.cases)
    if (registry.FindOp(plan.backend, c.op)->Ranks(c.params) != launch.world)
      throw UsageError("--launched: op '" + c.op + "' has cases that do not span all " + std::to_string(launch.world) +
                       " ranks (" + c.id +
                       "); a launched run collects multi-process ops only (--ops), single-GPU ops run without a "
                       "launcher");
}

JournalHeader MakeJournalHeader(const RuntimeInfo& rt, const std::string& system, const Plan& plan,
                                const CollectOptions& opt) {
  JournalHeader header;
  header.backend = rt.backend;
  header.version = rt.version;
  header.device = rt.device_name;
  header.arch = rt.arch;
  header.sm = rt.sm;
  header.system = system;
  header.plan_hash = plan.plan_hash;
  header.shard_index = opt.plan.shard_index;
  header.shard_count = opt.plan.shard_count;
  header.servecast_commit = std::string(BuildCommit());
  header.created_at = UtcNow();  // every record this invocation writes is stamped at or after it
  return header;
}

// What the journal held before this invocation (empty for a new run).
struct PriorRecords {
  std::unordered_map<std::string, Disposition> done;     // latest status per case id
  std::unordered_map<std::string, std::string> done_at;  // `at` of the latest record per case id
  std::int64_t newest_old_at = 0;  // the newest parsable `at` of the records (epoch s); read for --rerun-where
  std::size_t records = 0;
};

// Opens the run's journal for the lead: continued with --resume (its header
// must match this run's), else created. Other ranks open none.
PriorRecords OpenJournal(const std::string& run_dir, const std::string& journal_path, const JournalHeader& header,
                         const CollectOptions& opt, bool lead, std::optional<JournalWriter>& journal) {
  PriorRecords prior;
  if (!lead) {
    // Another rank of a launch: rank 0 owns the journal and says which cases run.
  } else if (opt.resume) {
    if (!PathExists(journal_path))
      throw UsageError("--resume: no journal at " + journal_path + "; start without --resume");
    JournalContents jc = ReadJournal(journal_path);
    std::string diff = jc.header.Mismatch(header);
    if (!diff.empty()) throw StartupError("cannot resume " + journal_path + ": " + diff);
    if (jc.torn_tail) log::Warn(journal_path + ": dropping a torn last record (the previous run died mid-write)");
    for (const auto& r : jc.records) {
      prior.done[r.id] = r.status;
      prior.done_at[r.id] = r.at;
      if (opt.rerun_where)
        if (std::optional<std::int64_t> at = ParseUtcSeconds(r.at))
          prior.newest_old_at = std::max(prior.newest_old_at, *at);
    }
    prior.records = jc.records.size();
    journal.emplace(JournalWriter::Append(journal_path, jc.valid_bytes));
    // This call's commit, so that finalize names the collector of every record.
    journal->AddSession({std::string(BuildCommit()), UtcNow()});
    journal->Commit();
  } else {
    if (PathExists(journal_path))
      throw UsageError(run_dir + " already holds a journal; continue it with --resume or choose another --run-dir");
    journal.emplace(JournalWriter::Create(journal_path, header));
  }
  return prior;
}

// The cases this invocation runs, and how many of the others it skips and why.
struct Selection {
  std::vector<Case> to_run;
  std::set<std::string> rerun_ids;  // finished cases re-run for --rerun-where
  std::size_t skipped_done = 0, skipped_failed = 0;
  // Finished cases --rerun-where matches that --rerun-before keeps (counted in
  // skipped_done too): newest record at or after TIME, or with an unreadable time.
  std::size_t rerun_recorded_since = 0, rerun_unreadable_at = 0;
  std::string unreadable_example;
};

// Unfinished cases run; failed ones with --retry-failed; finished ones that
// --rerun-where selects and whose newest record is older than --rerun-before.
Selection SelectCases(const Plan& plan, PriorRecords& prior, const std::set<std::string>& rerun_selected,
                      const std::optional<std::int64_t>& rerun_before_s, const CollectOptions& opt) {
  Selection s;
  // Whether a matching finished case's newest record is older than --rerun-before.
  auto recorded_before = [&](const std::string& id) {
    if (!rerun_before_s) return true;
    const std::string& at = prior.done_at[id];
    std::optional<std::int64_t> at_s = ParseUtcSeconds(at);
    if (!at_s) {
      if (s.rerun_unreadable_at++ == 0) s.unreadable_example = id + " has at '" + at + "'";
      return false;
    }
    if (*at_s >= *rerun_before_s) ++s.rerun_recorded_since;
    return *at_s < *rerun_before_s;
  };
  for (const auto& c : plan.cases) {
    auto it = prior.done.find(c.id);
    if (it == prior.done.end())
      s.to_run.push_back(c);
    else if (IsFailure(it->second) && opt.retry_failed)
      s.to_run.push_back(c);
    else if (IsFailure(it->second))
      ++s.skipped_failed;
    else if (!rerun_selected.count(c.id) || !recorded_before(c.id))
      ++s.skipped_done;
    else {
      s.to_run.push_back(c);
      s.rerun_ids.insert(c.id);
    }
  }
  return s;
}

// The lead's log lines on the selection: matching cases --rerun-before cannot
// date, and with --resume what is done, kept, re-run and to run.
void LogSelection(const Selection& s, const CollectOptions& opt) {
  if (s.rerun_unreadable_at > 0)
    log::Warn(std::to_string(s.rerun_unreadable_at) +
              " case(s) that --rerun-where matches are not re-run: the time of " +
              "their newest journal record is not a UTC time YYYY-MM-DDTHH:MM:SSZ, so --rerun-before " +
              *opt.rerun_before + " cannot tell whether it is earlier (e.g. " + s.unreadable_example +
              "); without --rerun-before they would be re-run");
  std::string rerun_before_note;  // the --rerun-before part of the resume line
  if (opt.rerun_before) {
    const std::string& t = *opt.rerun_before;
    rerun_before_note = " and their newest record is before " + t + " (" + std::to_string(s.rerun_recorded_since) +
                        " matching ones skipped: already recorded at or after " + t +
                        (s.rerun_unreadable_at > 0
                             ? "; " + std::to_string(s.rerun_unreadable_at) + " more with an unreadable record time"
                             : std::string()) +
                        ")";
  }
  if (opt.resume)
    log::Info("resume: " + std::to_string(s.skipped_done) + " cases already done, " + std::to_string(s.skipped_failed) +
              " failed ones kept" + (opt.retry_failed ? "" : " (use --retry-failed to re-run them)") + ", " +
              (opt.rerun_where ? std::to_string(s.rerun_ids.size()) + " done ones re-run because --rerun-where '" +
                                     opt.rerun_where->text() + "' holds for them" + rerun_before_note + ", "
                               : std::string()) +
              std::to_string(s.to_run.size()) + " to run");
}

// The cases of a launched run on this rank: rank 0 names the group token and
// the cases in the rendezvous file, and every rank runs exactly those together.
void RunLaunched(const Registry& registry, const Backend& backend, const CollectOptions& opt, const RuntimeInfo& rt,
                 const Plan& plan, const Placement& place, const std::string& run_dir, std::vector<Case>& to_run,
                 JournalWriter* journal) {
  const LaunchInfo& launch = place.launch;
  const int device = place.launched_device;
  std::string content = Rendezvous(launch, run_dir, [&] {
    std::string text = backend.NewGroupId() + "\n";
    for (const auto& c : to_run) text += c.id + "\n";
    return text;
  });
  std::vector<std::string> lines;
  for (std::size_t pos = 0; pos < content.size();) {
    std::size_t nl = content.find('\n', pos);
    if (nl == std::string::npos) nl = content.size();
    lines.push_back(content.substr(pos, nl - pos));
    pos = nl + 1;
  }
  if (lines.empty() || lines[0].empty()) throw StartupError("rendezvous file of " + run_dir + " has no group token");
  if (!place.lead) {
    std::unordered_map<std::string, const Case*> by_id;
    for (const auto& c : plan.cases) by_id[c.id] = &c;
    to_run.clear();
    for (std::size_t i = 1; i < lines.size(); ++i) {
      if (lines[i].empty()) continue;
      auto it = by_id.find(lines[i]);
      if (it == by_id.end())
        throw StartupError("rank " + std::to_string(launch.rank) + ": rank 0 asked for case " + lines[i] +
                           ", which this rank's plan does not have; every rank must run the same command");
      to_run.push_back(*it->second);
    }
  }
  log::Info("rank " + std::to_string(launch.rank) + " of " + std::to_string(launch.world) + " (" + launch.launcher +
            ", local rank " + std::to_string(launch.local_rank) + ", device " + std::to_string(device) +
            "): " + std::to_string(to_run.size()) + " cases");
  backend.InitWorker(device);
  LaunchedRunOptions lo;
  lo.backend = rt.backend;
  lo.device = device;
  lo.timeout_s = opt.timeout_s;
  lo.timing_budget_s = opt.timing_budget_s;
  lo.measure_power = opt.measure_power;
  lo.group_id = lines[0];
  std::optional<ProgressBar> bar;
  if (place.lead) bar.emplace("collect " + rt.backend + " (" + std::to_string(launch.world) + " ranks)", to_run.size());
  RunLaunchedCases(
      registry, launch, lo, rt, to_run, journal,
      [&](std::size_t d, std::size_t f) {
        if (bar) bar->Update(d, f);
      },
      [] { return g_stop != 0; });
  if (bar) bar->Finish();
}

// The cases on worker processes: single-GPU cases one worker per slot,
// multi-process cases in gangs.
void RunOnWorkers(const Registry& registry, const Backend& backend, const CollectOptions& opt, const RuntimeInfo& rt,
                  const Plan& plan, const std::vector<int>& devices, const std::string& run_dir,
                  const std::vector<Case>& to_run, JournalWriter& journal) {
  SchedulerOptions sched;
  sched.worker_exe = opt.worker_exe;
  sched.devices = devices;
  sched.timeout_s = opt.timeout_s;
  sched.worker_log = run_dir + "/collector.log";
  sched.worker_args = {"--timing-budget", std::to_string(opt.timing_budget_s)};
  if (opt.measure_power) sched.worker_args.push_back("--measure-power");
  double mem = opt.worker_memory_bytes;
  if (mem == 0 && rt.backend == "cpu") mem = 0.75 * HostMemTotalBytes() / static_cast<double>(sched.devices.size());
  if (mem > 0) {
    sched.worker_args.push_back("--memory-limit-bytes");
    sched.worker_args.push_back(std::to_string(static_cast<long long>(mem)));
  }
  std::vector<Case> solo, gang;
  for (auto& c : to_run) (registry.FindOp(plan.backend, c.op)->Ranks(c.params) > 1 ? gang : solo).push_back(c);
  log::Info("running " + std::to_string(to_run.size()) + " cases on " + std::to_string(sched.devices.size()) +
            " worker slot(s)" +
            (gang.empty() ? "" : " (" + std::to_string(gang.size()) + " of them multi-GPU, in gangs)"));
  ProgressBar bar("collect " + rt.backend, to_run.size());
  std::size_t solo_done = 0, solo_failed = 0;
  auto on_record = [&](const JournalRecord& r) {
    if (IsFailure(r.status))
      log::Write(log::Level::kDebug, r.id + ": " + std::string(ToString(r.status)) + " [" +
                                         std::string(ToString(r.failure_class)) + "] " + r.message);
  };
  if (!solo.empty())
    RunCases(
        registry, rt.backend, solo, sched, journal, on_record,
        [&](const SchedulerProgress& p) {
          solo_done = p.done;
          solo_failed = p.failed;
          bar.Update(p.done, p.failed);
        },
        [] { return g_stop != 0; });
  if (!gang.empty() && g_stop == 0)
    RunGangCases(
        registry, rt.backend, gang, sched, [&] { return backend.NewGroupId(); }, journal, on_record,
        [&](const SchedulerProgress& p) { bar.Update(solo_done + p.done, solo_failed + p.failed); },
        [] { return g_stop != 0; });
  bar.Finish();
}

// With --rerun-where: the re-run cases that got a new record in this
// invocation, and the ones that did not (an interrupted invocation may not have
// reached them all); also noted in the summary's `extra`.
std::optional<RerunProvenance> RerunOutcome(const CollectOptions& opt, const JournalContents& all,
                                            std::size_t records_before, const std::set<std::string>& rerun_ids,
                                            Json& extra) {
  if (!opt.rerun_where) return std::nullopt;
  RerunProvenance rerun;
  rerun.where = opt.rerun_where->text();
  rerun.before = opt.rerun_before.value_or("");
  for (std::size_t i = records_before; i < all.records.size(); ++i)
    if (rerun_ids.count(all.records[i].id)) rerun.case_ids.insert(all.records[i].id);
  for (const auto& id : rerun_ids)
    if (!rerun.case_ids.count(id)) rerun.pending_ids.insert(id);
  extra["rerun_where"] = rerun.where;
  if (opt.rerun_before) extra["rerun_before"] = *opt.rerun_before;
  extra["rerun_cases"] = rerun.case_ids.size();
  extra["rerun_pending"] = rerun.pending_ids.size();
  return rerun;
}

void PrintTableOutcomes(const FinalizeResult& fin) {
  for (const auto& [t, o] : fin.tables) {
    std::string reran;
    if (o.rerun_cases > 0 || o.rerun_pending > 0)
      reran = ", " + std::to_string(o.rerun_cases) + " cases re-run for --rerun-where" +
              (o.rerun_pending > 0 ? ", " + std::to_string(o.rerun_pending) + " still to re-run" : "");
    std::printf("%s: %zu rows (+%zu from this run%s) -> %s [%s, %zu of %zu planned keys missing]\n", t.c_str(),
                o.rows_after, o.rows_added, reran.c_str(), o.path.c_str(), o.status.c_str(), o.missing, o.planned);
  }
}

// An interrupted run: how to continue it, with the same rerun without the
// cases re-run since it started.
void PrintInterrupted(const CollectOptions& opt, const std::string& run_dir, const JournalHeader& header,
                      std::int64_t newest_old_at, const std::optional<RerunProvenance>& rerun,
                      std::size_t rerun_total) {
  std::string rerun_hint;
  if (opt.rerun_where) {
    // Without a --rerun-before: the second after the newest record this rerun found
    // (not its start time: an old record written in the start's second would count
    // as re-run). A case this rerun recorded in that same second is then measured
    // once more; none is skipped.
    std::string before = header.created_at;
    if (opt.rerun_before)
      before = *opt.rerun_before;
    else if (newest_old_at > 0)
      before = FormatUtcSeconds(newest_old_at + 1);
    rerun_hint = " --rerun-where " + ShellQuote(opt.rerun_where->text()) + " --rerun-before " + before;
  }
  if (rerun && !rerun->pending_ids.empty())
    std::fprintf(stderr, "interrupted: %zu of the %zu cases selected by --rerun-where not re-run yet\n",
                 rerun->pending_ids.size(), rerun_total);
  std::fprintf(stderr, "interrupted: finished cases are saved; continue with --resume --run-dir %s%s\n",
               run_dir.c_str(), rerun_hint.c_str());
}

}  // namespace

int Collect(const Registry& registry, const CollectOptions& opt) {
  const Backend& backend = FindBackendOrThrow(registry, opt.plan.backend);
  CheckOptionCombinations(opt);
  const std::optional<std::int64_t> rerun_before_s = RerunBeforeSeconds(opt);
  CheckTableOptions(opt);

  RuntimeInfo rt = backend.DetectRuntime();
  const std::string system = ResolveSystem(backend, rt, opt);
  const Placement place = PlaceCases(backend, opt, rt);
  Plan plan = BuildPlan(registry, opt.plan, rt);
  if (opt.plan_only) {
    if (place.lead) PrintPlan(plan, opt.list);
    return kExitOk;
  }
  std::set<std::string> rerun_selected;  // plan cases that --rerun-where matches (finished or not)
  if (opt.rerun_where) rerun_selected = RerunSelection(*opt.rerun_where, plan);
  const bool lead = place.lead;
  if (opt.launched) CheckLaunchedPlan(registry, plan, opt, place.launch);

  std::string run_dir = opt.run_dir;
  if (run_dir.empty()) run_dir = "runs/" + opt.plan.backend + "-" + Timestamp();
  std::string journal_path = run_dir + "/journal.jsonl";
  // Both folders are written before anything is measured: a run whose tables
  // cannot be written must not spend its hours first.
  if (lead) RequireWritable("--out", opt.out_root);
  RequireWritable("--run-dir", run_dir);
  // One collector per run dir, held until this invocation returns, before the
  // journal is read or anything measured: a second collect (or --resume) would
  // run the same cases again and finalize the same tables at once. The ranks of a
  // --launched job share the run dir legitimately (rank 0 owns the journal,
  // summary and tables; every rank writes its own collector.rankN.log and reads
  // rank 0's rendezvous file), so each rank locks a file of its own: rank 0 the
  // run's .lock, which any other collector on the dir also takes, and rank N
  // .lock.rankN, which the rank N of a second launch on the same dir takes and
  // so stops at once instead of joining the first launch's cases.
  RunLock run_lock(run_dir, lead ? ".lock" : ".lock.rank" + std::to_string(place.launch.rank));
  if (lead) CheckExistingSchemas(registry, plan, opt.out_root, system, opt, rt);

  const JournalHeader header = MakeJournalHeader(rt, system, plan, opt);
  std::optional<JournalWriter> journal;
  PriorRecords prior = OpenJournal(run_dir, journal_path, header, opt, lead, journal);
  log::OpenFile(run_dir + (lead ? std::string("/collector.log")
                                : "/collector.rank" + std::to_string(place.launch.rank) + ".log"));
  log::Info("servecast " + std::string(BuildVersion()) + " (" + std::string(BuildCommit()) + ") collect: backend " +
            rt.backend + " " + rt.version + " on " + rt.device_name + " [" + rt.arch + "], system " + system);
  if (lead) WritePlanFile(run_dir + "/plan.jsonl", registry, plan, opt.plan, plan.supported);

  Selection sel = SelectCases(plan, prior, rerun_selected, rerun_before_s, opt);
  if (lead) LogSelection(sel, opt);

  g_stop = 0;
  auto old_int = std::signal(SIGINT, OnSignal);
  auto old_term = std::signal(SIGTERM, OnSignal);
  if (opt.launched)
    RunLaunched(registry, backend, opt, rt, plan, place, run_dir, sel.to_run, lead ? &*journal : nullptr);
  else
    RunOnWorkers(registry, backend, opt, rt, plan, place.devices, run_dir, sel.to_run, *journal);
  std::signal(SIGINT, old_int);
  std::signal(SIGTERM, old_term);
  if (!lead) {
    log::CloseFile();
    return g_stop != 0 ? kExitCaseFailures : kExitOk;
  }
  journal.reset();
  bool interrupted = g_stop != 0;

  JournalContents all = ReadJournal(journal_path);
  RunSummary summary = Summarize(plan, all.records);
  Json extra{{"interrupted", interrupted}, {"run_dir", run_dir}, {"finished_at", UtcNow()}};
  std::optional<RerunProvenance> rerun = RerunOutcome(opt, all, prior.records, sel.rerun_ids, extra);
  WriteSummaryFiles(run_dir, header, plan, summary, extra);
  std::printf("%s", FormatSummary(plan, summary).c_str());

  FinalizeResult fin = Finalize({run_dir}, opt.out_root, opt.format, rerun ? &*rerun : nullptr);
  PrintTableOutcomes(fin);
  std::printf("summary: %s/collection_summary_%s.json\n", run_dir.c_str(), rt.backend.c_str());
  log::CloseFile();
  if (interrupted) {
    PrintInterrupted(opt, run_dir, header, prior.newest_old_at, rerun, sel.rerun_ids.size());
    return kExitCaseFailures;
  }
  return summary.ok() ? kExitOk : kExitCaseFailures;
}

}  // namespace servecast::collect
