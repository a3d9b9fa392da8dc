#!/usr/bin/env bash
# The H200 run of issue 5 in one call: the cuda backend's kernels and tests
# (scripts/device-cuda.sh), then a real local farm (coordinator, analyzer,
# one agent with one cuda board per GPU) tuning the CUDA GEMM and softmax.
#
# On the dev machine:   bash scripts/device-farm.sh pack
#   packs stripped farm binaries, cuda_board_test and the shared libraries
#   they need into build-cuda/device-carry/ (the device image has no Debian
#   dev packages).
# On the device:        bash scripts/device-farm.sh
#   with carry ["build-cuda/device-carry"]; results under $OUT.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
carry="$root/build-cuda/device-carry"
if [ "${1:-}" = pack ]; then
  build=${TUNEFARM_BUILD_DIR:-$root/build}
  rm -rf "$carry" && mkdir -p "$carry/lib" "$carry/bin"
  for b in tunefarm tunefarm-coordinator tunefarm-agent tunefarm-analyzer \
           tunefarm-sim-matmul; do
    strip -o "$carry/bin/$b" "$build/bin/$b"
  done
  strip -o "$carry/cuda_board_test" "$build/tests/agent/cuda_board_test"
  strip -o "$carry/cuda_fake_tool" "$build/tests/agent/cuda_fake_tool"
  strip -o "$carry/agent_cpu_test" "$build/tests/agent/agent_cpu_test"
  ldd "$carry"/bin/* "$carry/cuda_board_test" "$carry/cuda_fake_tool" \
      "$carry/agent_cpu_test" |
    awk '/=> \//{print $3}' | sort -u |
    grep -vE '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
    xargs -r -I{} cp -L {} "$carry/lib/"
  du -sh "$carry"
  exit 0
fi

out=${OUT:-$root/device-farm-out}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PATH=/usr/local/cuda/bin:$PATH
# Kernels, cuBLAS and copy references, the cuda board's own tests.
# device-cuda.sh leaves binaries in its output folder: keep it off $OUT
# (only a few files come back) and copy the readable results.
OUT=/tmp/device-cuda-out TF_DEVICE_STEPS="${TF_DEVICE_STEPS:-probe kernels test}" \
  timeout 330 bash scripts/device-cuda.sh > "$out/device-cuda.txt" 2>&1
rc=$?
for f in summary.txt test.log probe.log; do
  cp "/tmp/device-cuda-out/device-cuda/$f" "$out/cuda-$f" 2>/dev/null
done

# The cpu board's hardware counters: this VM exposes no PMU, a bare-metal
# GPU host usually does.
export LD_LIBRARY_PATH="$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
TF_SOURCE_DIR="$root" timeout 120 "$carry/agent_cpu_test" --gtest_filter='*Counters*' \
  > "$out/cpu-counters.txt" 2>&1
echo "exit $?" >> "$out/cpu-counters.txt"

# The farm: one agent serving every GPU, a guided sweep of each operator.
export LD_LIBRARY_PATH="$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
farm_log="$out/farm.txt"
: > "$farm_log"
for spec in cuda_gemm cuda_softmax; do
  data=/tmp/tunefarm-device-$spec
  rm -rf "$data"
  echo "=== tunefarm local $spec ($(date -u +%FT%TZ))" >> "$farm_log"
  timeout -k 10 "${TF_FARM_TIMEOUT:-200}" "$carry/bin/tunefarm" local --boards cuda --agents 1 \
    --data-dir "$data" --ops-dir "$root/ops" \
    --no-profile "examples/$spec.yaml" >> "$farm_log" 2>&1
  echo "exit $?" >> "$farm_log"
  cp "$data"/reports/*.md "$out/${spec}_report.md" 2>/dev/null
  echo "--- agent-1.log: where each round's time went" >> "$farm_log"
  grep -E ": round [0-9]+ OUTCOME_" "$data/logs/agent-1.log" >> "$farm_log" 2>/dev/null
  for l in coordinator agent-1 analyzer; do
    echo "--- $l.log (tail)" >> "$farm_log"
    tail -n 25 "$data/logs/$l.log" >> "$farm_log" 2>/dev/null
  done
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv >> "$farm_log" 2>&1
exit $rc
