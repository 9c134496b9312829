#!/usr/bin/env bash
# Times the README's main job (`servecast default --model Qwen/Qwen3-32B --system
# h200_sxm --total-gpus 8` on the bundled H200 tables) as a whole process, warm and
# cold, and `servecast validate --data cuda` over 1,000 measured rows; prints the
# minimum, median and maximum wall time and the peak RSS of each.
#
#   benchmarks/bench_main_job.sh [BUILD_DIR] [RUNS]     (defaults: build/release, 10)
#
# Warm: the data, the binary and the configs are in the page cache (one unmeasured
# run first). Cold: before each run the page cache is dropped when this process
# may (/proc/sys/vm/drop_caches, root outside a container); otherwise the data tree
# is copied afresh and every file the job reads (the copy, the binary, models/,
# systems/, engines/) is evicted from the page cache with
# posix_fadvise(POSIX_FADV_DONTNEED) (GNU dd iflag=nocache) after a sync. The
# script says which method it used. Shared libraries mapped by other processes
# stay cached either way.
#
# The validate input is h200_dev.csv and h200_dev2.csv (311 measured rows) cycled to
# 1,000 rows; rows the estimator cannot answer yet (DeepSeek, gpt-oss on our
# tables, ...) are listed as misses, which costs their parse and model lookup only.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build/release}"
runs="${2:-10}"
bin="$PWD/$build/bin/servecast"
[[ -x "$bin" ]] || { echo "no servecast binary at $bin; build first (scripts/build.sh release)" >&2; exit 2; }
shared="$PWD/../shared/reference/silicon"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

main_job=(default --model Qwen/Qwen3-32B --system h200_sxm --total-gpus 8)

# One timed run: prints "seconds peak_rss_kb".
timed() {
  /usr/bin/time -f "%e %M" -o "$tmp/time" "$@" > "$tmp/out" 2> "$tmp/err" || {
    echo "failed: $*" >&2; cat "$tmp/err" >&2; exit 1; }
  cat "$tmp/time"
}

# min / median / max of a list of numbers.
stats() { sort -g | awk '{v[NR]=$1} END {printf "min %s  median %s  max %s", v[1], v[int((NR+1)/2)], v[NR]}'; }

report() {  # name, file of "seconds rss" lines
  printf "%-34s wall s: %s;  peak RSS MB: %s  (%d runs)\n" "$1" \
    "$(cut -d' ' -f1 "$2" | stats)" "$(awk '{print $2/1024}' "$2" | stats)" "$(wc -l < "$2")"
}

evict() {  # files or folders
  sync
  find "$@" -type f -print0 | xargs -0 -I{} dd if={} iflag=nocache count=0 status=none
}

can_drop=0
if sync && echo 1 > /proc/sys/vm/drop_caches 2>/dev/null; then can_drop=1; fi

echo "$("$bin" --version | head -1); $(nproc) cores; $(date -u +%Y-%m-%dT%H:%M:%SZ)"

# Warm main job.
timed "$bin" "${main_job[@]}" > /dev/null
: > "$tmp/warm"
for ((i = 0; i < runs; ++i)); do timed "$bin" "${main_job[@]}" >> "$tmp/warm"; done
report "main job, warm" "$tmp/warm"

# Cold main job.
: > "$tmp/cold"
for ((i = 0; i < runs; ++i)); do
  if ((can_drop)); then
    sync; echo 3 > /proc/sys/vm/drop_caches
    timed "$bin" "${main_job[@]}" >> "$tmp/cold"
  else
    rm -rf "$tmp/data"; cp -r systems/data "$tmp/data"
    evict "$tmp/data" "$bin" models systems/*.yaml engines
    timed "$bin" "${main_job[@]}" --data-root "$tmp/data" >> "$tmp/cold"
  fi
done
report "main job, cold ($([[ $can_drop == 1 ]] && echo drop_caches || echo 'fresh copy + fadvise'))" "$tmp/cold"

# validate over 1,000 rows.
if [[ -f "$shared/h200_dev.csv" && -f "$shared/h200_dev2.csv" ]]; then
  { tail -n +2 "$shared/h200_dev.csv"; tail -n +2 "$shared/h200_dev2.csv"; } > "$tmp/body.csv"
  { head -1 "$shared/h200_dev.csv"; awk 'NR <= 1000' "$tmp/body.csv" "$tmp/body.csv" "$tmp/body.csv" "$tmp/body.csv"; } \
    > "$tmp/rows1000.csv"
  [[ $(wc -l < "$tmp/rows1000.csv") == 1001 ]] || { echo "could not build 1,000 rows" >&2; exit 1; }
  timed "$bin" validate --silicon "$tmp/rows1000.csv" --data cuda > /dev/null || true
  : > "$tmp/validate"
  for ((i = 0; i < runs; ++i)); do
    /usr/bin/time -f "%e %M" -o "$tmp/time" "$bin" validate --silicon "$tmp/rows1000.csv" --data cuda \
      > "$tmp/out" 2> "$tmp/err" || true  # exit 1 only when no row is predicted
    cat "$tmp/time" >> "$tmp/validate"
  done
  grep -q . "$tmp/out" || { echo "validate printed nothing" >&2; cat "$tmp/err" >&2; exit 1; }
  report "validate --data cuda, 1,000 rows" "$tmp/validate"
else
  echo "validate: skipped (no ../shared/reference/silicon/h200_dev*.csv)"
fi
