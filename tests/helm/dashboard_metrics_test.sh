#!/usr/bin/env bash
# ctest: every metric the Grafana dashboard queries is exported by the real
# processes. Runs the whole-farm integration test (real coordinator, agents
# and analyzer) with TUNEFARM_METRICS_DUMP=<folder>; that test writes each
# process's GET /metrics body there as <process>.prom (Prometheus text
# format). check_dashboard.py then matches every expression against them.
# Usage: dashboard_metrics_test.sh FARM_INTEGRATION_TEST_BINARY
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
binary=$1
dump=$(mktemp -d)
trap 'rm -rf "$dump"' EXIT

TUNEFARM_METRICS_DUMP=$dump "$binary" \
  --gtest_filter='FarmTest.SweepRunsToCompletionAcrossTwoAgentsWithDiagnoses' \
  >"$dump/integration.log" 2>&1
rc=$?
if ((rc != 0)); then
  tail -50 "$dump/integration.log" >&2
  echo "FAIL: the integration run that produces the scrape failed ($rc)" >&2
  exit 1
fi
if ! compgen -G "$dump/*.prom" >/dev/null; then
  echo "FAIL: farm_integration_test wrote no $dump/*.prom:" \
       "TUNEFARM_METRICS_DUMP is not honoured yet" >&2
  exit 1
fi
ls -l "$dump"/*.prom
exec python3 "$here/check_dashboard.py" "$root/helm/dashboards/tunefarm.json" \
  --metrics "$dump"
