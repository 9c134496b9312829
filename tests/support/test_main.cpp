// servecast with the test-only ops registered: the same CLI and pipeline as the
// shipped binary, used by the end-to-end fault tests and the benchmarks.
#include "cli/cli.h"
#include "fault_ops.h"

int main(int argc, char** argv) { return servecast::cli::Main(argc, argv, servecast::testing::RegisterTestOps); }
