#!/usr/bin/env bash
# Configures and builds tunefarm into build/ (or $TUNEFARM_BUILD_DIR).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TUNEFARM_BUILD_DIR:-$root/build}
jobs=${TUNEFARM_JOBS:-$(nproc)}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTUNEFARM_WERROR=OFF "$@"
cmake --build "$build" -j "$jobs"
