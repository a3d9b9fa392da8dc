#!/usr/bin/env bash
# Installs Grafana's own dashboard schema for the dashboard test: the npm
# package @grafana/schema (the TypeScript types Grafana generates from its
# CUE dashboard kind; it ships no JSON schema) and the TypeScript compiler
# that checks helm/dashboards/*.json against its Dashboard type. They land in
# $TUNEFARM_TOOLS_DIR/grafana-schema (default
# /usr/local/lib/tunefarm-tools/grafana-schema).
# Idempotent: does nothing when the pinned versions are there. Needs npm;
# exits non-zero, saying why, when it cannot.
set -euo pipefail
SCHEMA=@grafana/schema@13.2.3
TYPESCRIPT=typescript@5.9.3
dest=${TUNEFARM_TOOLS_DIR:-/usr/local/lib/tunefarm-tools}/grafana-schema
stamp="$SCHEMA $TYPESCRIPT"

if [[ -f $dest/.installed && $(cat "$dest/.installed") == "$stamp" ]]; then
  echo "install-grafana-schema: $stamp present in $dest"
  exit 0
fi
command -v npm >/dev/null || { echo "install-grafana-schema: npm not found" >&2; exit 1; }
mkdir -p "$dest"
echo "install-grafana-schema: installing $stamp"
npm install --prefix "$dest" --no-audit --no-fund --silent --no-save \
  "$SCHEMA" "$TYPESCRIPT"
echo "$stamp" > "$dest/.installed"
echo "install-grafana-schema: $stamp in $dest"
