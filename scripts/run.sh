#!/usr/bin/env bash
# The main job on a fresh machine: install, build, then
#  1. search deployments of Qwen3-32B on 8 H200 GPUs from the bundled H200 perf
#     tables (systems/data/h200_sxm) and write the reports;
#  2. prove the collector on this machine: a smoke collection of every CPU op,
#     judged by `servecast check`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release
bin=build/release/bin/servecast
"$bin" --version
stamp="$(date -u +%Y%m%d-%H%M%S)"
out="runs/main-$stamp"
"$bin" default --model Qwen/Qwen3-32B --system h200_sxm --total-gpus 8 --save-dir "$out/default"
"$bin" collect --backend cpu --smoke --out "$out/data" --run-dir "$out/run"
"$bin" check "$out/data"
echo "main job: deployment reports in $out/default, CPU smoke tables in $out/data, run records in $out/run"
