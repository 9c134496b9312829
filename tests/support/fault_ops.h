#pragma once

#include "collect/registry.h"

namespace servecast::testing {

// Test-only ops on the cpu backend, never shipped in the servecast binary:
//   fault   (table fault_perf, key mode, i): mode ok times a real vector sum;
//           segv, abort, hang, throw, oom, incorrect misbehave as named;
//           fail_on_env is ok unless SERVECAST_TEST_FAIL_NOW is set, then failed;
//           hang_on_env is ok unless SERVECAST_TEST_HANG_NOW is set, then it hangs.
//   trivial (table trivial_perf, key i): a real but tiny measurement, for
//           orchestration throughput benchmarks.
//   allreduce_fault (table custom_allreduce_perf; params of custom_allreduce plus
//           fault, fault_size, fault_rank): the real shared-memory all-reduce of a
//           gang, except that on the case of message_size fault_size the rank
//           fault_rank segfaults (fault segv) or hangs (fault hang) first.
//   toy_axpy (table toy_axpy_perf): the toy op of docs/extending.md (toy_op.h).
// And a backend "broken" (op trivial) whose workers always fail to start.
void RegisterTestOps(collect::Registry& registry);

}  // namespace servecast::testing
