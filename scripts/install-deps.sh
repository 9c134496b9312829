#!/usr/bin/env bash
# Installs what servecast needs to build and test, from Debian/Ubuntu packages only.
# Safe to re-run: it installs nothing when every package is already present.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config git
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libopenblas-dev
  libzstd-dev libgtest-dev libgmock-dev libbenchmark-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
