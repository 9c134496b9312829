#pragma once

#include "collect/registry.h"

namespace servecast::testing {

// Test-only ops on the cpu backend, never shipped in the servecast binary:
//   fault   (table fault_perf, key mode, i): mode ok times a real vector sum;
//           segv, abort, hang, throw, oom, incorrect misbehave as named.
//   trivial (table trivial_perf, key i): a real but tiny measurement, for
//           orchestration throughput benchmarks.
// And a backend "broken" (op trivial) whose workers always fail to start.
void RegisterTestOps(collect::Registry& registry);

}  // namespace servecast::testing
