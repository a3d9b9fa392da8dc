#!/usr/bin/env bash
# Installs what tunefarm needs from Debian 12's packages, and nothing else.
# Idempotent: packages already present are not fetched again.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libzmq3-dev cppzmq-dev
  librocksdb-dev
  prometheus-cpp-dev
  libabsl-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev
  libspdlog-dev libfmt-dev libjemalloc-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  curl openssl python3-yaml
  clang libclang-rt-14-dev python3-pandas
  graphviz
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
