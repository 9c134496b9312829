// The serving simulation (serve/simulate.h): its mechanics on toy step costs whose
// schedules can be worked out by hand, and its table step cost against the closed
// form's steps.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "model/model_config.h"
#include "model/ops.h"
#include "serve/agg.h"
#include "serve/database.h"
#include "serve/engine_profile.h"
#include "serve/simulate.h"
#include "system/system_spec.h"

namespace servecast::serve {
namespace {

const std::string kSrc = SERVECAST_SOURCE_DIR;

// 1 ms per step plus 0.01 ms per token in it.
double Toy(const StepBatch& b) { return 1.0 + 0.01 * static_cast<double>(b.Tokens()); }

SimProfile Mixed(std::int64_t budget) {
  SimProfile p;
  p.present = true;
  p.max_num_tokens = budget;
  p.kv_block_tokens = 1;
  return p;
}

SimWorkload Fixed(std::int64_t c, std::int64_t isl, std::int64_t osl, std::int64_t requests, std::int64_t warmup = 0) {
  SimWorkload w;
  w.concurrency = c;
  w.isl = isl;
  w.osl = osl;
  w.requests = requests;
  w.warmup = warmup;
  w.range_ratio = 1;
  return w;
}

TEST(Simulate, OneClientConstantStepsGiveOneStepTtftAndTpot) {
  const SimResult r = Simulate(Mixed(8192), Fixed(1, 100, 5, 3), 0, 0, [](const StepBatch&) { return 1.0; });
  EXPECT_EQ(r.measured, 3);
  EXPECT_DOUBLE_EQ(r.ttft_ms.mean, 1.0);  // the prefill step
  EXPECT_DOUBLE_EQ(r.tpot_ms.p90, 1.0);   // four decode steps over four tokens
  EXPECT_DOUBLE_EQ(r.e2e_ms.median, 5.0);
  EXPECT_DOUBLE_EQ(r.tokens_per_s, 15.0 / 15.0 * 1000.0);
  EXPECT_EQ(r.steps, 15);
  EXPECT_TRUE(r.admitted_all);
  EXPECT_FALSE(r.kv_saturated);
}

// Two clients, isl 100, osl 3, budget 150, chunked prefill in mixed steps:
//   step 1: A 100 + B 50 prompt tokens        1 + 1.50 = 2.50  A's first token at 2.50
//   step 2: A decodes, B's last 50 tokens     1 + 0.51 = 1.51  B's at 4.01
//   step 3: A and B decode                    1 + 0.02 = 1.02  A done at 5.03
//   step 4: B decodes                         1 + 0.01 = 1.01  B done at 6.04
TEST(Simulate, ChunkedPrefillInMixedStepsByHand) {
  const SimResult r = Simulate(Mixed(150), Fixed(2, 100, 3, 2), 0, 0, Toy);
  EXPECT_EQ(r.steps, 4);
  EXPECT_NEAR(r.ttft_ms.mean, (2.50 + 4.01) / 2, 1e-12);
  EXPECT_NEAR(r.tpot_ms.mean, ((5.03 - 2.50) / 2 + (6.04 - 4.01) / 2) / 2, 1e-12);
  EXPECT_NEAR(r.duration_ms, 6.04, 1e-12);
}

// The same with prefill-only steps first (SGLang without mixed chunks): A stalls
// while B's second chunk runs.
//   step 1: prefill A 100 + B 50     2.50   A first token 2.50
//   step 2: prefill B 50             1.50   B first token 4.00
//   step 3: decode A, B              1.02
//   step 4: decode A, B              1.02   both done at 6.04
TEST(Simulate, PrefillFirstStepsByHand) {
  SimProfile p = Mixed(150);
  p.mixed_batches = false;
  const SimResult r = Simulate(p, Fixed(2, 100, 3, 2), 0, 0, Toy);
  EXPECT_EQ(r.steps, 4);
  EXPECT_NEAR(r.ttft_ms.mean, (2.50 + 4.00) / 2, 1e-12);
  EXPECT_NEAR(r.tpot_ms.mean, ((6.04 - 2.50) / 2 + (6.04 - 4.00) / 2) / 2, 1e-12);
}

// KV of 210 one-token blocks, two requests of 100 + 20: both prefill (200 blocks),
// decode five steps (210), then A's next token preempts B (the newest), which is
// recomputed (106 tokens) only once A has finished.
TEST(Simulate, FullKvPreemptsTheNewestRequestByRecompute) {
  const SimResult r = Simulate(Mixed(8192), Fixed(2, 100, 20, 2), 210, 0, [](const StepBatch&) { return 1.0; });
  EXPECT_EQ(r.preemptions, 1);
  EXPECT_TRUE(r.kv_saturated);
  EXPECT_DOUBLE_EQ(r.kv_peak_fraction, 1.0);
  // A: prefill + 19 decode steps = 20 steps. B: its first token at step 1, then 5
  // decode steps (6 tokens), preempted; after A (t = 20): recompute 106 tokens
  // (1 step, token 7), then 13 decode steps: done at 34.
  EXPECT_DOUBLE_EQ(r.e2e_ms.mean, (20.0 + 34.0) / 2);
  EXPECT_DOUBLE_EQ(r.ttft_ms.mean, 1.0);
}

// Guaranteed-no-evict admission: each request reserves isl + osl = 120 of 250
// blocks, so only two of three clients run; the third waits, none is preempted.
TEST(Simulate, ReserveFullAdmissionReportsTheConcurrencyItCannotHold) {
  SimProfile p = Mixed(8192);
  p.admission = SimProfile::Admission::kReserveFull;
  const SimResult r = Simulate(p, Fixed(3, 100, 20, 3), 250, 0, [](const StepBatch&) { return 1.0; });
  EXPECT_EQ(r.max_running, 2);
  EXPECT_FALSE(r.admitted_all);
  EXPECT_TRUE(r.kv_saturated);
  EXPECT_EQ(r.preemptions, 0);
  // Two requests take 20 steps; the third starts after them and takes 20 more.
  EXPECT_DOUBLE_EQ(r.e2e_ms.mean, (20.0 + 20.0 + 40.0) / 3);
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes[0].find("never ran all 3"), std::string::npos);
}

TEST(Simulate, RunningRequestLimitQueuesTheRest) {
  SimProfile p = Mixed(8192);
  p.max_num_seqs = 1;
  const SimResult r = Simulate(p, Fixed(2, 100, 4, 2), 0, 0, [](const StepBatch&) { return 1.0; });
  EXPECT_TRUE(r.running_limit_hit);
  EXPECT_EQ(r.max_running, 1);
  EXPECT_DOUBLE_EQ(r.ttft_ms.mean, (1.0 + 5.0) / 2);  // the second starts when the first (4 steps) ends
}

// One client: requests run one after another, so the warm-up ones only shift the
// measured set: 3 measured after 2 warm-up plus the first 2 = the first 5.
TEST(Simulate, WarmupRequestsAreExcluded) {
  SimWorkload w = Fixed(1, 1000, 10, 3, 2);
  w.range_ratio = 0.8;
  const SimResult after = Simulate(Mixed(8192), w, 0, 0, Toy);
  w.requests = 2;
  w.warmup = 0;
  const SimResult first = Simulate(Mixed(8192), w, 0, 0, Toy);
  w.requests = 5;
  const SimResult all = Simulate(Mixed(8192), w, 0, 0, Toy);
  EXPECT_EQ(after.measured, 3);
  EXPECT_NEAR(after.ttft_ms.mean * 3 + first.ttft_ms.mean * 2, all.ttft_ms.mean * 5, 1e-9);
  EXPECT_NE(after.ttft_ms.mean, first.ttft_ms.mean);  // the lengths differ per request
  // TTFT of one client = its prefill step: 1 + 0.01 x isl, isl in [800, 1000].
  EXPECT_GE(all.ttft_ms.median, 9.0);
  EXPECT_LE(all.ttft_ms.p90, 11.0);
}

TEST(Simulate, SparsePoissonArrivalsNeverQueue) {
  SimWorkload w = Fixed(1, 100, 4, 20);
  w.arrival = SimWorkload::Arrival::kPoisson;
  w.rate_per_s = 0.01;  // one per 100 s on average; a request takes 4 ms
  const SimResult r = Simulate(Mixed(8192), w, 0, 0, [](const StepBatch&) { return 1.0; });
  EXPECT_DOUBLE_EQ(r.ttft_ms.p90, 1.0);
  EXPECT_DOUBLE_EQ(r.tpot_ms.mean, 1.0);
}

TEST(Simulate, HostFloorBoundsEachStep) {
  // 2 ms per request in a step: one client's steps take 2 ms each.
  const SimResult r = Simulate(Mixed(8192), Fixed(1, 100, 3, 1), 0, 2.0, [](const StepBatch&) { return 0.5; });
  EXPECT_DOUBLE_EQ(r.ttft_ms.mean, 2.0);
  EXPECT_DOUBLE_EQ(r.tpot_ms.mean, 2.0);
}

// Decode runs taken several steps at a time keep the sum of a cost linear in the
// KV length: one client, isl 1000, osl 200, step = 1 + 0.001 x (KV before the step).
// Decode step j (1..199) sees KV 999 + j: sum = 199 + 0.001 x (199 x 999 + 199 x 200 / 2) = 417.701 ms.
TEST(Simulate, BatchedDecodeStepsKeepTheCostSum) {
  const SimResult r = Simulate(Mixed(8192), Fixed(1, 1000, 200, 1), 0, 0, [](const StepBatch& b) {
    return 1.0 + 0.001 * static_cast<double>(b.decode_kv);
  });
  EXPECT_DOUBLE_EQ(r.ttft_ms.mean, 1.0);
  EXPECT_NEAR(r.e2e_ms.mean - r.ttft_ms.mean, 417.701, 1e-9);  // a linear cost: exact over each run
  EXPECT_EQ(r.steps, 200);
}

TEST(Simulate, BadWorkloadsAreUsageErrors) {
  auto one = [](const StepBatch&) { return 1.0; };
  EXPECT_THROW(Simulate(Mixed(8192), Fixed(0, 100, 3, 1), 0, 0, one), UsageError);
  EXPECT_THROW(Simulate(Mixed(8192), Fixed(1, 100, 1, 1), 0, 0, one), UsageError);
  EXPECT_THROW(Simulate(Mixed(8192), Fixed(1, 100, 3, 0), 0, 0, one), UsageError);
  // A KV cache smaller than one request.
  EXPECT_THROW(Simulate(Mixed(8192), Fixed(1, 100, 30, 1), 120, 0, one), UsageError);
}

// ---------------------------------------------------------------- disaggregated

// A prefill instance and a decode instance; prefill steps cost 10 ms, decode
// steps 1 ms; hand-off 5 ms plus 0.01 ms per prompt token (isl 100: 6 ms).
DisaggSimSetup ToyDisagg(std::int64_t prefill_limit, std::int64_t decode_limit) {
  DisaggSimSetup s;
  s.prefill_engine = Mixed(8192);
  s.decode_engine = Mixed(8192);
  s.prefill_engine.max_num_seqs = prefill_limit;
  s.decode_engine.max_num_seqs = decode_limit;
  s.prefill_cost = [](const StepBatch& b) {
    EXPECT_EQ(b.decode, 0);  // a prefill instance never decodes
    return 10.0 * static_cast<double>(b.prefill.size());
  };
  s.decode_cost = [](const StepBatch& b) {
    EXPECT_TRUE(b.prefill.empty());  // the prompt's KV arrived: nothing to prefill
    return 1.0;
  };
  s.handoff_ms = 5;
  s.transfer_ms_per_token = 0.01;
  return s;
}

// One client, isl 100, osl 5: prefill 10 ms, first token at 10 + 6 = 16 ms, then
// four decode steps of 1 ms; the next request is sent at 20 ms.
TEST(SimulateDisagg, OneClientByHand) {
  const DisaggSimResult r = SimulateDisaggInstances(ToyDisagg(0, 0), Fixed(1, 100, 5, 3));
  EXPECT_EQ(r.sim.measured, 3);
  EXPECT_DOUBLE_EQ(r.sim.ttft_ms.mean, 16.0);
  EXPECT_DOUBLE_EQ(r.sim.tpot_ms.p90, 1.0);
  EXPECT_DOUBLE_EQ(r.sim.e2e_ms.median, 20.0);
  EXPECT_EQ(r.sim.steps, 12);  // decode steps: 4 per request
  EXPECT_EQ(r.prefill_steps, 3);
  EXPECT_DOUBLE_EQ(r.prefill_utilization, 30.0 / 60.0);
  EXPECT_TRUE(r.sim.admitted_all);
}

// Two clients at t = 0, one prompt per prefill step: the second waits one step
// (TTFT 26 ms); both decode together.
TEST(SimulateDisagg, ThePrefillQueueDelaysTheSecondClient) {
  const DisaggSimResult r = SimulateDisaggInstances(ToyDisagg(1, 0), Fixed(2, 100, 5, 2));
  EXPECT_DOUBLE_EQ(r.sim.ttft_ms.mean, (16.0 + 26.0) / 2);
  EXPECT_EQ(r.prefill_max_running, 1);
  EXPECT_EQ(r.prefill_max_queue, 2);
  EXPECT_TRUE(r.sim.admitted_all);
  // Without the limit both prompts share one step (20 ms) and reach decode at 26 ms.
  const DisaggSimResult both = SimulateDisaggInstances(ToyDisagg(0, 0), Fixed(2, 100, 5, 2));
  EXPECT_DOUBLE_EQ(both.sim.ttft_ms.mean, 26.0);
  EXPECT_EQ(both.prefill_max_running, 2);
}

// A decode limit of one, osl 20: the first request decodes 16..35; the second's
// KV arrives at 26 and waits on the decode side until 35, then decodes 35..54.
// TTFT (the hand-off) is unchanged; the second request's TPOT carries the wait.
TEST(SimulateDisagg, ADecodeLimitQueuesHandedOffRequests) {
  const DisaggSimResult r = SimulateDisaggInstances(ToyDisagg(1, 1), Fixed(2, 100, 20, 2));
  EXPECT_DOUBLE_EQ(r.sim.ttft_ms.mean, 21.0);  // 16 and 26
  EXPECT_DOUBLE_EQ(r.sim.tpot_ms.mean, (1.0 + 28.0 / 19.0) / 2);
  EXPECT_DOUBLE_EQ(r.sim.e2e_ms.p90, 54.0 - 0.1 * (54.0 - 35.0));  // the two: 35 and 54
  EXPECT_EQ(r.sim.max_running, 1);
  EXPECT_TRUE(r.sim.running_limit_hit);
  EXPECT_FALSE(r.sim.admitted_all);
}

// Least-loaded routing spreads four clients over two prefill and two decode
// instances (osl 20: requests 0 and 1 still decode when 2 and 3 arrive): two
// prompts per prefill instance, one step apart; two requests per decode instance.
TEST(SimulateDisagg, RoutingSpreadsClientsOverInstances) {
  DisaggSimSetup s = ToyDisagg(1, 0);
  s.prefill_instances = 2;
  s.decode_instances = 2;
  const DisaggSimResult r = SimulateDisaggInstances(s, Fixed(4, 100, 20, 4));
  EXPECT_DOUBLE_EQ(r.sim.ttft_ms.mean, (16.0 + 16.0 + 26.0 + 26.0) / 4);
  EXPECT_EQ(r.prefill_max_queue, 2);
  EXPECT_EQ(r.prefill_max_running, 1);
  EXPECT_EQ(r.sim.max_running, 2);
}

TEST(SimulateDisagg, BadSetupsAreUsageErrors) {
  DisaggSimSetup s = ToyDisagg(0, 0);
  s.decode_instances = 0;
  EXPECT_THROW(SimulateDisaggInstances(s, Fixed(1, 100, 5, 1)), UsageError);
  s = ToyDisagg(0, 0);
  s.handoff_ms = -1;
  EXPECT_THROW(SimulateDisaggInstances(s, Fixed(1, 100, 5, 1)), UsageError);
  s = ToyDisagg(0, 0);
  s.decode_kv_tokens = 50;  // less than isl + osl
  EXPECT_THROW(SimulateDisaggInstances(s, Fixed(1, 100, 5, 1)), UsageError);
}

TEST(Simulate, ShapeBucketsAreExactTo128Then64PerOctave) {
  EXPECT_EQ(ShapeBucket(1), 1);
  EXPECT_EQ(ShapeBucket(128), 128);
  EXPECT_EQ(ShapeBucket(129), 130);
  EXPECT_EQ(ShapeBucket(1003), 1000);
  EXPECT_EQ(ShapeBucket(1088), 1088);
  for (std::int64_t x = 1; x < 100000; x += 37)
    EXPECT_LE(std::abs(static_cast<double>(ShapeBucket(x) - x)) / static_cast<double>(x), 1.0 / 128 + 1e-12) << x;
}

// The table step cost composes the closed form's steps: at shapes its buckets
// keep exact, a decode step equals DecodeStep and a one-prompt mixed step MixedStep.
TEST(TableStepCost, EqualsTheClosedFormStepsAtTheirShapes) {
  const systems::SystemSpec spec = systems::LoadSystemByName(kSrc + "/systems", "h200_sxm");
  const model::ModelConfig m = model::LoadModel("meta-llama/Meta-Llama-3.1-8B", kSrc + "/models");
  DatabaseOptions o;
  o.mode = perfdb::DatabaseMode::kSol;
  auto db = Database::Open(spec, o, {});
  model::ParallelConfig par;
  par.tp = 2;
  model::OpListOptions oo;
  oo.engine = model::Engine::kVllm;
  const model::OpList ops = model::BuildOpList(m, par, oo);
  const EngineProfile engine = LoadEngineProfileByName(kSrc + "/engines", model::Engine::kVllm);
  TableStepCost cost(ops, *db, engine.agg);

  // Decode: 8 rows at KV 1087 (+1 = 1088 = isl + osl/2 + 1 for isl 1024, osl 126).
  StepBatch d;
  d.decode = 8;
  d.decode_kv = 8 * 1087;
  const double closed_decode = DecodeStep(ops, *db, {0, 8, 1024, 126, 0, 0}).latency_ms;
  EXPECT_NEAR(cost(d), closed_decode, 1e-12 * closed_decode);
  // Mixed: one 1016-token prompt and 8 decode rows at 1088 (isl 1016, osl 142).
  StepBatch mx = d;
  mx.prefill.push_back({1016, 0});
  const double closed_mixed = MixedStep(ops, *db, {1016, 8, 1016, 142, 0, 0}).latency_ms;
  EXPECT_NEAR(cost(mx), closed_mixed, 1e-12 * closed_mixed);
  const std::size_t evaluated = cost.Evaluations();
  cost(mx);
  EXPECT_EQ(cost.Evaluations(), evaluated);  // memoized
  // A second chunk of a prompt costs its share of the attention over the whole.
  StepBatch c1, c2;
  c1.prefill.push_back({512, 0});
  c2.prefill.push_back({512, 512});
  EXPECT_GT(cost(c2), cost(c1));
}

TEST(SimProfileYaml, ShippedProfilesCarryTheEngineDefaults) {
  const SimProfile v = LoadEngineProfileByName(kSrc + "/engines", model::Engine::kVllm).sim;
  EXPECT_TRUE(v.present);
  EXPECT_EQ(v.max_num_tokens, 8192);
  EXPECT_EQ(v.max_num_seqs, 1024);
  EXPECT_TRUE(v.mixed_batches);
  const SimProfile s = LoadEngineProfileByName(kSrc + "/engines", model::Engine::kSglang).sim;
  EXPECT_FALSE(s.mixed_batches);
  const SimProfile t = LoadEngineProfileByName(kSrc + "/engines", model::Engine::kTrtllm).sim;
  EXPECT_EQ(t.admission, SimProfile::Admission::kReserveFull);
  EXPECT_FALSE(t.chunked_prefill);
  EXPECT_FALSE(LoadEngineProfileByName(kSrc + "/engines", model::Engine::kVllm, "aic").sim.present);
}

}  // namespace
}  // namespace servecast::serve
