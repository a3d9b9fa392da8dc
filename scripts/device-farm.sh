#!/usr/bin/env bash
# The H200 run in one or two calls: the cuda board's tests (cuda_board_test,
# real GPU included), then a real local farm (coordinator, analyzer, one
# agent with one cuda board per GPU) tuning the CUDA GEMM and softmax, in
# each isolation mode asked for (docs/measurement.md): the persistent runner
# and one process per stage, each sweep with the round budget raised so that
# only its time limit (150 s GEMM, 100 s softmax) ends it.
#
# On the dev machine:   TF_CARRY_DIR=/work/main/build-cuda/device-carry \
#                         bash scripts/device-farm.sh pack
#   packs stripped farm binaries (tunefarm-variant-runner included),
#   cuda_board_test with its fake tool and fake variant, and the shared
#   libraries they need into $TF_CARRY_DIR (default build-cuda/device-carry;
#   the device image has no Debian dev packages).
# On the device:        TF_CARRY_DIR=<carried folder> bash scripts/device-farm.sh
#   TF_FARM_MODES="runner process" (default) picks the modes,
#   TF_FARM_SPECS="cuda_gemm cuda_softmax" (default) the sweeps (SPEC:STRATEGY
#   overrides the example's strategy, e.g. cuda_gemm:hybrid), TF_DEVICE_TEST=0
#   skips cuda_board_test, TF_FARM_KERNELS=1 also runs device-cuda.sh's
#   kernel references (cuBLAS, D2D copy). Results under $OUT: summary.txt,
#   farm.txt, and the rest (test log, reports, agent logs, nvcc timings)
#   in details.tar.gz.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
carry=${TF_CARRY_DIR:-$root/build-cuda/device-carry}
case "$carry" in /*) ;; *) carry="$root/$carry" ;; esac
if [ "${1:-}" = pack ]; then
  build=${TUNEFARM_BUILD_DIR:-$root/build}
  rm -rf "$carry" && mkdir -p "$carry/lib" "$carry/bin"
  for b in tunefarm tunefarm-coordinator tunefarm-agent tunefarm-analyzer \
           tunefarm-sim-matmul tunefarm-variant-runner; do
    strip -o "$carry/bin/$b" "$build/bin/$b"
  done
  strip -o "$carry/cuda_board_test" "$build/tests/agent/cuda_board_test"
  strip -o "$carry/cuda_fake_tool" "$build/tests/agent/cuda_fake_tool"
  strip --strip-unneeded -o "$carry/libcuda_fake_variant.so" \
    "$build/tests/agent/libcuda_fake_variant.so"
  ldd "$carry"/bin/* "$carry/cuda_board_test" "$carry/cuda_fake_tool" |
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
export LD_LIBRARY_PATH="$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
rc=0
summary="$out/summary.txt"
: > "$summary"
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm \
    --format=csv,noheader; nvcc --version | tail -1; } >> "$summary" 2>&1

if [ "${TF_FARM_KERNELS:-0}" = 1 ]; then
  OUT=/tmp/device-cuda-out TF_DEVICE_STEPS="probe kernels" \
    timeout 240 bash scripts/device-cuda.sh > "$out/device-cuda.txt" 2>&1
  cp /tmp/device-cuda-out/device-cuda/summary.txt "$out/cuda-kernels.txt" 2>/dev/null
fi

# The cuda board's tests, real GPU included (RealGpuTest runs the shipped
# kernels in the persistent runner and per process).
if [ "${TF_DEVICE_TEST:-1}" = 1 ]; then
  TF_CUDA_FAKE_TOOL="$carry/cuda_fake_tool" \
    TF_FAKE_VARIANT_SO="$carry/libcuda_fake_variant.so" \
    TF_VARIANT_RUNNER="$carry/bin/tunefarm-variant-runner" TF_SOURCE_DIR="$root" \
    timeout 240 "$carry/cuda_board_test" > "$out/cuda-test.log" 2>&1
  t=$?
  grep -E "^\[ *(FAILED|SKIPPED|PASSED) *\]|tests? ran" "$out/cuda-test.log" >> "$summary"
  echo "cuda_board_test: exit $t" >> "$summary"
  [ $t -eq 0 ] || rc=1
fi

# The farm: one agent serving every GPU, a guided sweep of each operator in
# each mode. The round budget is raised so that the time limit ends it.
farm_log="$out/farm.txt"
: > "$farm_log"
for mode in ${TF_FARM_MODES:-runner process}; do
  for entry in ${TF_FARM_SPECS:-cuda_gemm cuda_softmax}; do
    # SPEC or SPEC:STRATEGY (the example's own strategy otherwise).
    spec=${entry%%:*}
    strategy=${entry#"$spec"}
    strategy=${strategy#:}
    name=${spec}_$mode${strategy:+_$strategy}
    data=/tmp/tunefarm-device-$name
    rm -rf "$data" && mkdir -p "$data"
    sed -e 's/max_rounds: [0-9]*/max_rounds: 400/' \
        -e 's/max_rounds_without_gain: [0-9]*/max_rounds_without_gain: 400/' \
        -e "s/flush_cache: true}/flush_cache: true, isolation: $mode}/" \
        -e "s/^name: \(.*\)/name: \1-$mode/" \
        -e "${strategy:+s/strategy: {name: [a-z]*/strategy: {name: $strategy/}" \
        "examples/$spec.yaml" > "$data/spec.yaml"
    echo "=== $name ($(date -u +%FT%TZ))" >> "$farm_log"
    start=$(date +%s)
    timeout -k 10 "${TF_FARM_TIMEOUT:-200}" "$carry/bin/tunefarm" local --boards cuda \
      --agents 1 --data-dir "$data" --ops-dir "$root/ops" --no-profile --log-level debug \
      "$data/spec.yaml" > "$data/local.txt" 2>&1
    farm_rc=$?
    secs=$(( $(date +%s) - start ))
    echo "exit $farm_rc after $secs s" >> "$farm_log"
    grep -vE "^\s*$" "$data/local.txt" | tail -n 30 >> "$farm_log"
    echo "--- agent-1.log: each round's time" >> "$farm_log"
    grep -E ": round [0-9]+ (OUTCOME_|phases)|variant runner started|ahead \(sweep" \
      "$data/logs/agent-1.log" >> "$farm_log" 2>/dev/null
    awk '/: round [0-9]+ OUTCOME_OK in/ {
           for (i = 1; i <= NF; i++) {
             if ($i == "in") w = $(i+1);
             if ($i == "kernels") k = $(i+1);
           }
           n++; W += w; K += k
         }
         END { if (n) printf "%s: %d OK rounds, mean eval %.3f s, mean timed kernels %.3f s, eval utilisation %.1f%%, timed kernels %.1f s of the %d s run (%.1f%%)\n", name, n, W/n, K/n, 100*K/W, K, secs, 100*K/secs }' \
      name="$name" secs="$secs" "$data/logs/agent-1.log" >> "$summary" 2>/dev/null
    # The same over the sweep itself: from the board's first lease to its
    # last result (the run above also holds the farm's start and its end).
    python3 - "$name" "$data/logs/agent-1.log" >> "$summary" 2>/dev/null <<'PY'
import re, sys
from datetime import datetime
first = last = None
timed = 0.0
for line in open(sys.argv[2]):
    m = re.match(r"(\S+) I .*: (lease \S+ \(sweep|round \d+ OUTCOME_)", line)
    if not m:
        continue
    t = datetime.fromisoformat(m.group(1)).timestamp()
    if first is None:
        first = t
    if "OUTCOME_" in m.group(2):
        last = t
        k = re.search(r"timed kernels ([\d.]+) s", line)
        timed += float(k.group(1)) if k and "OUTCOME_OK" in line else 0.0
if first is not None and last is not None and last > first:
    print(f"{sys.argv[1]}: sweep from first lease to last result {last - first:.1f} s, "
          f"timed kernels {timed:.1f} s ({100 * timed / (last - first):.1f}%)")
PY
    # Where one variant's compile goes (nvcc --time), for the first variant
    # built in the sweep: the manifest's flags (one -gencode), the former
    # -arch (two front-end passes), and the host side at -O1.
    header=$(find "$data" -name tf_params.h 2>/dev/null | head -n 1)
    src="$root/ops/${spec#cuda_}/cuda/${spec#cuda_}.cu"
    if [ "$mode" = runner ] && [ -n "$header" ] && [ -f "$src" ] && command -v nvcc > /dev/null; then
      cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d .)
      for variant in "gencode:-O3 -gencode=arch=compute_${cc}a,code=sm_${cc}a" \
                     "arch:-O3 -arch=sm_${cc}a" \
                     "gencode_host_O1:-O1 -gencode=arch=compute_${cc}a,code=sm_${cc}a"; do
        tag=${variant%%:*}
        csv="$out/${name}_nvcc_time_${tag}.csv"
        start_ns=$(date +%s%N)
        # shellcheck disable=SC2086  # the flags are words
        nvcc --time "$csv" -include "$header" -I "$root/ops/common" "$src" ${variant#*:} \
          -std=c++17 -lineinfo -shared -Xcompiler -fPIC -DTF_VARIANT_SHARED \
          -Dmain=tf_variant_main -o "/tmp/nvcc-time-$name.so" > /dev/null 2>&1
        echo "$name: nvcc $tag: $(( ($(date +%s%N) - start_ns) / 1000000 )) ms wall" >> "$summary"
        # Fields: ..., metric, unit; the phase is the second.
        awk -F' *, *' -v name="$name" -v tag="$tag" 'NR > 1 && $2 != "" { t[$2] += $(NF-1) } END { for (p in t) printf "%s: nvcc %s phase %s %.0f ms\n", name, tag, p, t[p] }' \
          "$csv" >> "$summary" 2>/dev/null
      done
    fi
    gzip -c "$data/logs/agent-1.log" > "$out/${name}_agent.log.gz" 2>/dev/null
    grep -E "best|speedup|rounds|ended" "$data/local.txt" | head -8 | sed "s/^/$name: /" >> "$summary"
    cp "$data"/reports/*/report.md "$out/${name}_report.md" 2>/dev/null ||
      cp "$data"/reports/*.md "$out/${name}_report.md" 2>/dev/null
  done
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv >> "$farm_log" 2>&1
# The device tool returns at most 8 files from $OUT: keep the summary and
# the farm log as they are, everything else in one archive.
(
  cd "$out" || exit 0
  rest=$(ls -A | grep -vxE 'summary\.txt|farm\.txt|details\.tar\.gz')
  # shellcheck disable=SC2086  # file names the script wrote: no spaces
  [ -z "$rest" ] || { tar czf details.tar.gz $rest && rm -rf $rest; }
)
exit $rc
