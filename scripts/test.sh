#!/usr/bin/env bash
# README command 2: install what is missing, build, and run every test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TUNEFARM_BUILD_DIR:-$root/build}
"$root/scripts/install-deps.sh"
"$root/scripts/install-helm.sh" || echo "test: no helm; the helm_chart test will be skipped"
"$root/scripts/install-grafana-schema.sh" ||
  echo "test: no @grafana/schema; the helm_dashboard_schema test will be skipped"
"$root/scripts/build.sh"
cd "$build"
ctest --output-on-failure -j "${TUNEFARM_TEST_JOBS:-2}" --timeout 600
