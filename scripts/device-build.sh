#!/usr/bin/env bash
# Builds targets of the `gpu` preset on a GPU machine for device-collect.sh and
# device-verify.sh, stamping the commit named in .servecast-commit (the tree sent
# there may carry git metadata of an older commit), log in $OUT/build.log:
#
#   scripts/device-build.sh TARGET...
#
# On failure prints the log's tail and exits 1.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?OUT must name the folder whose files come back}"
if [ -f .servecast-commit ]; then export SERVECAST_COMMIT="$(head -n 1 .servecast-commit)"; fi
{ cmake --preset gpu && cmake --build --preset gpu -j "$(nproc)" --target "$@"; } >"$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; exit 1; }
