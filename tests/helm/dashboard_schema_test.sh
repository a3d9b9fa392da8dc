#!/usr/bin/env bash
# ctest: helm/dashboards/*.json against Grafana's own dashboard schema. No
# Grafana server can run here, and Grafana publishes no JSON schema for
# dashboards: @grafana/schema (npm) carries the TypeScript types Grafana
# generates from its CUE dashboard kind. Each dashboard becomes a typed
# object literal `const d: Dashboard = {...}` that tsc --strict checks (wrong
# types, missing required fields, unknown keys). Broken copies (a typo'd key,
# a missing required field, a wrong type) must fail the same check, so a
# passing run is not vacuous.
# Exit 77 (skipped) only when scripts/install-grafana-schema.sh cannot
# install the schema (no npm or no registry access).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tools=${TUNEFARM_TOOLS_DIR:-/usr/local/lib/tunefarm-tools}/grafana-schema
tsc=$tools/node_modules/.bin/tsc
if [[ ! -x $tsc || ! -d $tools/node_modules/@grafana/schema ]]; then
  echo "grafana schema not installed; trying scripts/install-grafana-schema.sh"
  "$root/scripts/install-grafana-schema.sh" >&2
fi
if [[ ! -x $tsc || ! -d $tools/node_modules/@grafana/schema ]]; then
  echo "SKIP: @grafana/schema and typescript could not be installed" \
       "(scripts/install-grafana-schema.sh: no npm or no registry access?)"
  exit 77
fi
echo "schema: $(cat "$tools/.installed" 2>/dev/null) in $tools"

work=$(mktemp -d "$tools/check.XXXXXX")  # beside node_modules: it resolves
trap 'rm -rf "$work"' EXIT
python3 - "$root/helm/dashboards" "$work" <<'PY' || exit 1
import copy, glob, json, os, sys
src, out = sys.argv[1], sys.argv[2]
TYPE = "import type { Dashboard } from '@grafana/schema/dist/types/raw/dashboard/x/types.gen';\n"
def write(name, dashboard):
    with open(os.path.join(out, name), "w") as f:
        f.write(TYPE + "const dashboard: Dashboard = " +
                json.dumps(dashboard, indent=1) + ";\nexport default dashboard;\n")
paths = sorted(glob.glob(os.path.join(src, "*.json")))
if not paths:
    sys.exit(f"no dashboards in {src}")
for i, path in enumerate(paths):
    with open(path) as f:
        write(f"good_{i}_{os.path.basename(path)}.ts", json.load(f))
with open(paths[0]) as f:
    good = json.load(f)
typo = copy.deepcopy(good)
typo["pannels"] = typo.pop("panels")              # a typo'd key
write("broken_typo.ts", typo)
missing = copy.deepcopy(good)
del missing["schemaVersion"]                      # a required field
write("broken_missing.ts", missing)
wrong = copy.deepcopy(good)
wrong["panels"][1]["gridPos"]["h"] = "six"        # a wrong type
write("broken_type.ts", wrong)
PY
out=$("$tsc" --noEmit --strict --module commonjs --moduleResolution node \
      --target es2020 "$work"/*.ts 2>&1)
failures=0
if grep -v '^ ' <<<"$out" | grep -q "good_"; then
  echo "FAIL: a dashboard does not match Grafana's Dashboard type:" >&2
  grep "good_" <<<"$out" | sed "s|$work/||" >&2
  failures=1
fi
for want in "broken_typo.ts:'\"pannels\"' does not exist" \
            "broken_missing.ts:'schemaVersion' is missing" \
            "broken_type.ts:not assignable to type 'number'"; do
  if ! grep "${want%%:*}" <<<"$out" | grep -q "${want#*:}"; then
    echo "FAIL: the broken copy passed the check (wanted an error: $want)" >&2
    echo "$out" >&2
    failures=1
  fi
done
if [[ $failures == 0 ]]; then
  echo "PASS: $(ls "$work"/good_*.ts | wc -l) dashboard(s) match Grafana's" \
       "Dashboard type; the 3 broken copies are refused"
fi
exit $failures
