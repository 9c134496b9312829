#!/usr/bin/env bash
# Runs (or resumes) a CUDA collection on a GPU machine whose session is short-lived,
# and packs everything needed to resume it elsewhere.
#
#   scripts/device-collect.sh NAME STOP_AFTER_S [collect flags...]
#
# Before sending the tree to the GPU machine, stamp the commit with
# `git rev-parse --short=12 HEAD > .servecast-commit` (add -dirty if the tree has
# changes) and carry that ignored file, so that provenance names the commit: the
# build (scripts/device-build.sh) takes it over whatever git metadata the copy has, which
# can belong to an older commit (the h200-moe run's first call was stamped
# 4953f3514f97-dirty that way; PROVENANCE.md gives its real commit).
#
# - Builds servecast with the `gpu` preset (CUDA, sm_90).
# - If runs/NAME.tar.gz exists (brought back from an earlier call and carried in),
#   unpacks it; if runs/NAME holds a journal (unpacked, or left by an earlier call on
#   the same machine), resumes that run; otherwise starts runs/NAME afresh.
# - Stops the collector gracefully (SIGTERM: finished cases are kept, the tables are
#   finalized) after STOP_AFTER_S seconds, so the call ends inside its time limit.
# - Packs runs/NAME (journal, plan, log, summary, ledgers, tables) into
#   $OUT/NAME.tar.gz every 60 s while it runs and once at the end (gzip: the GPU image has no zstd command) with the summary beside it.
set -uo pipefail
cd "$(dirname "$0")/.."
name="$1"; stop_after="$2"; shift 2
: "${OUT:?OUT must name the folder whose files come back}"
export NCCL_NVLS_ENABLE=0

scripts/device-build.sh servecast || exit 1
bin=build/gpu/bin/servecast

mkdir -p runs
resume=()
if [ -f "runs/$name.tar.gz" ] && [ ! -f "runs/$name/run/journal.jsonl" ]; then
  tar -xzf "runs/$name.tar.gz" -C runs
fi
if [ -f "runs/$name/run/journal.jsonl" ]; then resume=(--resume); fi
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv \
  >"runs/$name.nvidia-smi.before.csv" 2>&1 || true

# Every 60 s, a snapshot of the run folder goes to $OUT (written aside, then renamed),
# so that a call killed at the device's limit (which can be shorter than the time box:
# the budget counts the machine's start) still brings back what finished. A journal
# cut mid-line is fine: resume drops its torn tail.
( while sleep 60; do
    tar -czf "$OUT/.$name.snapshot.tar.gz" -C runs "$name" 2>/dev/null && mv -f "$OUT/.$name.snapshot.tar.gz" "$OUT/$name.tar.gz"
  done ) &
snap=$!
timeout --signal=TERM --kill-after=60 "$stop_after" \
  "$bin" collect --backend cuda --run-dir "runs/$name/run" --out "runs/$name/data" "${resume[@]}" "$@"
rc=$?
pkill -P "$snap" 2>/dev/null; kill "$snap" 2>/dev/null; wait "$snap" 2>/dev/null; rm -f "$OUT/.$name.snapshot.tar.gz"
echo "collect exit code: $rc"
nvidia-smi --query-gpu=index,clocks.sm,temperature.gpu,power.draw --format=csv >"runs/$name.nvidia-smi.after.csv" 2>&1 || true
mv "runs/$name.nvidia-smi.before.csv" "runs/$name.nvidia-smi.after.csv" "runs/$name/" 2>/dev/null || true
tar -czf "$OUT/$name.tar.gz" -C runs "$name"
cp "runs/$name/run/collection_summary_cuda.json" "$OUT/$name.summary.json" 2>/dev/null || true
ls -la "$OUT"
exit 0
