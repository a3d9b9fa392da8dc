#!/usr/bin/env bash
# README command 1: install what is missing, build, and run a local farm
# (coordinator, analyzer, 2 agents x 2 simulated boards) through a real sweep
# of the shipped example operator, end to end. Extra arguments go to
# `tunefarm local` (e.g. --agents 3, or another spec file).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
exec "${TUNEFARM_BUILD_DIR:-$root/build}/bin/tunefarm" local \
  --data-dir "${TUNEFARM_DATA_DIR:-$root/.farm}" "$@"
