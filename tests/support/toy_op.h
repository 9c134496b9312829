#pragma once

// A toy collector op added the way docs/extending.md says ("Add a table", "Add a
// collector op"), so that the steps are exercised end to end:
//   toy_axpy (cpu backend, table toy_axpy_perf, key dtype, n): y = a x + y over n
//   float32 values, checked against a double-precision reference, timed, and
//   written through the phase driver (collect/phases.h).
// Its table declaration is the one extra step a new table takes; its case grid is
// written by the test that runs it (tests/integration/toy_op_e2e_test.cpp).

#include <memory>

#include "collect/op.h"

namespace servecast::testing {

std::unique_ptr<collect::Op> MakeToyAxpyOp();

}  // namespace servecast::testing
