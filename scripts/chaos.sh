#!/usr/bin/env bash
# The long chaos campaign (issue 16; docs/operators.md "Chaos"): the same
# whole-farm test as CI's chaos_test, with 100 agent kills, 20 coordinator
# kills and 20 analyzer kills (SIGKILL at seeded random points) over a
# longer sweep. Prints the test's closing `chaos:` line, which goes into
# docs/benchmarks.md. Usage:
#   scripts/chaos.sh [SEED]        (default: the current time; printed)
# Environment: TUNEFARM_BUILD_DIR (default build/), and the kill counts
# TUNEFARM_CHAOS_AGENT_KILLS / _COORDINATOR_KILLS / _ANALYZER_KILLS /
# _ROUNDS to change the campaign.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TUNEFARM_BUILD_DIR:-$root/build}
test_bin=$build/tests/integration/chaos_test
if [[ ! -x $test_bin ]]; then
  echo "chaos.sh: $test_bin not built (cmake --build $build --target chaos_test)" >&2
  exit 2
fi
export TUNEFARM_CHAOS_SEED=${1:-$(date +%s)}
export TUNEFARM_CHAOS_AGENT_KILLS=${TUNEFARM_CHAOS_AGENT_KILLS:-100}
export TUNEFARM_CHAOS_COORDINATOR_KILLS=${TUNEFARM_CHAOS_COORDINATOR_KILLS:-20}
export TUNEFARM_CHAOS_ANALYZER_KILLS=${TUNEFARM_CHAOS_ANALYZER_KILLS:-20}
export TUNEFARM_CHAOS_ROUNDS=${TUNEFARM_CHAOS_ROUNDS:-400}
start=$(date +%s)
set +e
"$test_bin" --gtest_filter='ChaosTest.*' | tee /tmp/chaos.$$.log
rc=${PIPESTATUS[0]}
set -e
end=$(date +%s)
line=$(grep '^chaos: seed=' /tmp/chaos.$$.log | tail -1)
rm -f /tmp/chaos.$$.log
echo "chaos.sh: ${line#chaos: } wall_s=$((end - start)) rc=$rc"
exit "$rc"
