#!/usr/bin/env bash
# The tests on a fresh machine: install, build (warnings are errors), run every
# test that needs no GPU (GPU tests carry the ctest label `gpu` and skip cleanly).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh ci
ctest --preset ci
