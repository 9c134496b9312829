#!/usr/bin/env bash
# The main job on a fresh machine: install, build, then collect on the CPU backend
# (a smoke run of every op) and judge the tables with `servecast check`.
# The estimator is not built yet; when it is, this job will run it on bundled data.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh release
bin=build/release/bin/servecast
"$bin" --version
stamp="$(date -u +%Y%m%d-%H%M%S)"
out="runs/main-$stamp"
"$bin" collect --backend cpu --smoke --out "$out/data" --run-dir "$out/run"
"$bin" check "$out/data"
echo "main job: tables in $out/data, run records in $out/run"
