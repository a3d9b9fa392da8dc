#!/usr/bin/env bash
# README command 1: install what is missing, build, and run a local farm
# (coordinator, analyzer, 2 agents x 2 simulated boards, 1 agent with a cpu
# board) through two real sweeps, end to end: the example operator on the
# simulated boards and the CPU GEMM on the cpu board. Extra arguments go to
# `tunefarm local` (e.g. --agents 3, --cpu-boards 0, or other spec files).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
exec "${TUNEFARM_BUILD_DIR:-$root/build}/bin/tunefarm" local \
  --data-dir "${TUNEFARM_DATA_DIR:-$root/.farm}" "$@"
