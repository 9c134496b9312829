#!/usr/bin/env bash
# Builds the `gpu` preset on a GPU machine, runs GPU tests and benchmarks, and leaves
# their logs in $OUT (the folder whose files come back from a lent machine):
#
#   scripts/device-verify.sh TEST_REGEX [BENCH_FILTER]
#
#   TEST_REGEX    ctest -R pattern over the `gpu`-labelled tests, e.g. 'Moe|CommGpu'
#   BENCH_FILTER  optional --benchmark_filter for bench_moe_grouped, e.g. 'type:[01]'
#
# Writes $OUT/build.log, $OUT/gputests.log and $OUT/bench.txt; prints the summary
# lines and exits with ctest's status, so a caller can refuse to collect on failure.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?OUT must name the folder whose files come back}"
export NCCL_NVLS_ENABLE=0
regex="$1"
bench="${2:-}"
t0=$(date +%s)
scripts/device-build.sh servecast gpu_tests bench_moe_grouped bench_gemm_autotune || exit 1
echo "build: $(( $(date +%s) - t0 )) s"
(cd build/gpu && ctest -L gpu -R "$regex" --output-on-failure -j 2 >"$OUT/gputests.log" 2>&1)
rc=$?
grep -E "tests passed|tests failed|\*\*\*Failed" "$OUT/gputests.log" | head -30
echo "tests: rc $rc, $(( $(date +%s) - t0 )) s"
if [ -n "$bench" ]; then
  CUDA_VISIBLE_DEVICES=0 build/gpu/bin/bench_moe_grouped --benchmark_counters_tabular=true \
    --benchmark_filter="$bench" >"$OUT/bench.txt" 2>&1
  echo "bench: rc $?, $(( $(date +%s) - t0 )) s"
fi
exit $rc
