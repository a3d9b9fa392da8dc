#!/usr/bin/env bash
# The one-call device run for the cuda backend (an NVIDIA H200 machine of the
# device tool: the workplace's 'cuda' image, CUDA 13 + nvcc + ncu + CMake +
# ninja, no network, runs as root). Run from the repository root:
#
#   bash scripts/device-cuda.sh            # everything below
#   TF_DEVICE_STEPS="probe kernels" bash scripts/device-cuda.sh
#
# Steps (each logs to $OUT/device-cuda/<step>.log when $OUT is set, else to
# ./device-cuda-out/):
#   probe    nvidia-smi, nvcc/ncu versions, what the C++ build needs
#   kernels  the gemm/softmax stage programs + cublas_ref built straight with
#            nvcc (no CMake): baseline and a tuned variant of each at
#            4096^3 / 8192x8192, cuBLAS sgemm on the same shape, the
#            device-to-device copy reference: the numbers docs/benchmarks.md
#            wants, with no dependence on the C++ build
#   build    CMake + ninja of cuda_board_test (needs the Debian dev packages
#            of the C++ build; skipped with a message when they are missing)
#   test     cuda_board_test: the GPU tests run the shipped kernels through
#            the real board (nvcc, CUDA_VISIBLE_DEVICES, ncu)
#
# The device image may lack the C++ build's Debian dev packages. Then pack
# the test here and carry it (the device tool's `carry`):
#   bash scripts/device-cuda.sh pack    # on the dev machine: writes
#                                       # build-cuda/device-carry/ (binaries +
#                                       # the shared libraries they need)
#   carry: ["build-cuda/device-carry"]  # the test step then runs from it
# Exit status: non-zero when a step that ran failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
carry="$root/build-cuda/device-carry"
if [ "${1:-}" = pack ]; then
  bdir=${TUNEFARM_BUILD_DIR:-$root/build-cuda}
  rm -rf "$carry" && mkdir -p "$carry/lib"
  cp "$bdir/tests/agent/cuda_board_test" "$bdir/tests/agent/cuda_fake_tool" "$carry/"
  # Every shared library outside glibc's core, so the binaries run on
  # another distribution's image.
  ldd "$carry/cuda_board_test" "$carry/cuda_fake_tool" | awk '/=> \//{print $3}' | sort -u |
    grep -vE '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
    xargs -r -I{} cp -L {} "$carry/lib/"
  du -sh "$carry"
  exit 0
fi
out=${OUT:-$root/device-cuda-out}/device-cuda
mkdir -p "$out"
steps=${TF_DEVICE_STEPS:-probe kernels build test}
export PATH=/usr/local/cuda/bin:$PATH
# Multicast off, as the lent machines require (KINDS.md).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
NVCC=${NVCC:-nvcc}
ARCH=${TF_CUDA_ARCH:-sm_90a}
failed=0
note() { echo "== $*" | tee -a "$out/summary.txt"; }

has_step() { [[ " $steps " == *" $1 "* ]]; }

if has_step probe; then
  note "probe"
  {
    date -u
    nvidia-smi --query-gpu=index,name,uuid,memory.total,clocks.max.sm,temperature.gpu,power.draw \
      --format=csv,noheader,nounits
    "$NVCC" --version | tail -2
    command -v ncu && ncu --version | tail -1
    command -v cmake ninja g++ c++ || true
    for h in absl/status/status.h google/protobuf/message.h grpcpp/grpcpp.h rocksdb/db.h \
             yaml-cpp/yaml.h gtest/gtest.h nlohmann/json.hpp spdlog/spdlog.h; do
      [ -e /usr/include/$h ] && echo "have $h" || echo "MISSING $h"
    done
  } > "$out/probe.log" 2>&1
  cat "$out/probe.log"
fi

# Builds one variant of an op's stage program with the given -D params.
build_variant() {  # name src params...
  local name=$1 src=$2; shift 2
  local hdr="$out/bin/$name.params.h"
  mkdir -p "$out/bin"
  : > "$hdr"
  for kv in "$@"; do echo "#define TF_PARAM_${kv%%=*} ${kv#*=}" >> "$hdr"; done
  "$NVCC" -O3 -arch="$ARCH" -std=c++17 -lineinfo -include "$hdr" -Iops/common "$src" \
    -o "$out/bin/$name" -Xptxas -v > "$out/bin/$name.build.log" 2>&1
}

run_stage() {  # binary workload stage dir extra...
  local bin=$1 wl=$2 stage=$3 dir=$4; shift 4
  mkdir -p "$dir"
  "$bin" --stage "$stage" --params /dev/null --workload "$wl" --out "$dir" --seed 1 "$@"
}

if has_step kernels; then
  note "kernels"
  k="$out/kernels"
  mkdir -p "$k"
  echo '{"name":"square_4k","dtype":"fp32","dims":{"m":4096,"n":4096,"k":4096}}' > "$k/gemm.json"
  echo '{"name":"gpu_8k","dtype":"fp32","dims":{"rows":8192,"cols":8192}}' > "$k/softmax.json"
  # name | source | params (baseline = the manifests' defaults)
  variants=(
    "gemm_baseline ops/gemm/cuda/gemm.cu BLOCK_M=64 BLOCK_N=64 BLOCK_K=8 THREAD_M=4 THREAD_N=4 VEC_WIDTH=1 STAGES=1"
    "gemm_worst ops/gemm/cuda/gemm.cu BLOCK_M=32 BLOCK_N=32 BLOCK_K=8 THREAD_M=2 THREAD_N=2 VEC_WIDTH=1 STAGES=1"
    "gemm_128x128x8_8x8_v4_s2 ops/gemm/cuda/gemm.cu BLOCK_M=128 BLOCK_N=128 BLOCK_K=8 THREAD_M=8 THREAD_N=8 VEC_WIDTH=4 STAGES=2"
    "gemm_128x128x16_8x8_v4_s2 ops/gemm/cuda/gemm.cu BLOCK_M=128 BLOCK_N=128 BLOCK_K=16 THREAD_M=8 THREAD_N=8 VEC_WIDTH=4 STAGES=2"
    "gemm_128x256x8_8x16_v4_s2 ops/gemm/cuda/gemm.cu BLOCK_M=128 BLOCK_N=256 BLOCK_K=8 THREAD_M=8 THREAD_N=16 VEC_WIDTH=4 STAGES=2"
    "softmax_baseline ops/softmax/cuda/softmax.cu THREADS_PER_ROW=128 ROWS_PER_BLOCK=1 VEC_WIDTH=1 LOAD_UNROLL=1"
    "softmax_worst ops/softmax/cuda/softmax.cu THREADS_PER_ROW=32 ROWS_PER_BLOCK=1 VEC_WIDTH=1 LOAD_UNROLL=1"
    "softmax_256_v4_u4 ops/softmax/cuda/softmax.cu THREADS_PER_ROW=256 ROWS_PER_BLOCK=1 VEC_WIDTH=4 LOAD_UNROLL=4"
    "softmax_512_v4_u2 ops/softmax/cuda/softmax.cu THREADS_PER_ROW=512 ROWS_PER_BLOCK=1 VEC_WIDTH=4 LOAD_UNROLL=2"
  )
  # Compile in parallel (16 cores), then run one at a time.
  for v in "${variants[@]}"; do
    set -- $v
    build_variant "$@" &
  done
  "$NVCC" -O3 -arch="$ARCH" -std=c++17 -Iops/common ops/gemm/cuda/cublas_ref.cu -lcublas \
    -o "$out/bin/cublas_ref" > "$out/bin/cublas_ref.build.log" 2>&1 &
  wait
  for v in "${variants[@]}"; do
    set -- $v
    name=$1; op=${name%%_*}
    bin="$out/bin/$name"; d="$k/$name"
    if [ ! -x "$bin" ]; then note "$name: BUILD FAILED: $(tail -3 "$out/bin/$name.build.log")"; failed=1; continue; fi
    grep -E "registers|spill" "$out/bin/$name.build.log" | grep -v ClockProbe | head -2 > "$d.ptxas" 2>/dev/null || true
    if ! run_stage "$bin" "$k/$op.json" reference "$d/ref" > "$d.log" 2>&1 ||
       ! run_stage "$bin" "$k/$op.json" run "$d/run" --warmup 5 --samples 30 >> "$d.log" 2>&1; then
      note "$name: RUN FAILED: $(tail -3 "$d.log")"; failed=1; continue
    fi
    # Same check as the board: max |out-ref| <= atol + rtol*|ref|, NaN fails.
    python3 - "$d/run/output.bin" "$d/ref/reference.bin" "$op" >> "$d.log" 2>&1 <<'EOF'
import sys, numpy as np
o = np.fromfile(sys.argv[1], dtype=np.float32); r = np.fromfile(sys.argv[2], dtype=np.float32)
rtol, atol = (1e-4, 1e-3) if sys.argv[3] == "gemm" else (1e-4, 1e-7)
bad = ~(np.abs(o.astype(np.float64) - r) <= atol + rtol * np.abs(r))
print(f"precision: {'PASS' if o.size == r.size and not bad.any() else 'FAIL'} "
      f"elements={o.size} mismatches={int(bad.sum())} nan={int(np.isnan(o).sum())} "
      f"max_abs_err={float(np.nanmax(np.abs(o.astype(np.float64) - r))):.3g}")
EOF
    note "$name: $(grep -E '^(gemm|softmax): run ok' "$d.log" | sed 's/; device=.*//') | $(grep precision: "$d.log") | $(tr '\n' ' ' < "$d.ptxas" | sed 's/ptxas info *: //g')"
  done
  if [ -x "$out/bin/cublas_ref" ]; then
    mkdir -p "$k/cublas"
    "$out/bin/cublas_ref" --stage run --workload "$k/gemm.json" --out "$k/cublas" --seed 1 \
      --warmup 5 --samples 30 > "$k/cublas.log" 2>&1 || failed=1
    note "cublas: $(tail -1 "$k/cublas.log")"
  else
    note "cublas_ref: BUILD FAILED: $(tail -3 "$out/bin/cublas_ref.build.log")"; failed=1
  fi
  if [ -x "$out/bin/softmax_baseline" ]; then
    run_stage "$out/bin/softmax_baseline" "$k/softmax.json" bandwidth_ref "$k/bandwidth" \
      --warmup 5 --samples 30 > "$k/bandwidth.log" 2>&1 || failed=1
    note "bandwidth: $(tail -1 "$k/bandwidth.log")"
  fi
  # One ncu profile of the tuned gemm, exported the way the board does it.
  if command -v ncu > /dev/null && [ -x "$out/bin/gemm_128x128x8_8x8_v4_s2" ]; then
    mkdir -p "$k/ncu/out"
    ncu --target-processes all --clock-control none --cache-control all --replay-mode kernel \
      --kernel-name-base function -s 3 -c 1 --section SpeedOfLight --section LaunchStats \
      --section Occupancy --metrics gpu__time_duration.sum,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active \
      -f -o "$k/ncu/gemm" --log-file "$k/ncu/ncu.log" \
      "$out/bin/gemm_128x128x8_8x8_v4_s2" --stage profile --params /dev/null \
      --workload "$k/gemm.json" --out "$k/ncu/out" --seed 1 > "$k/ncu/profile.stdout" 2>&1 &&
    ncu -i "$k/ncu/gemm.ncu-rep" --csv --page raw --print-units base --print-fp > "$k/ncu/raw.csv" 2>&1
    note "ncu: rc=$? $(grep -c '' "$k/ncu/raw.csv" 2>/dev/null) lines in raw.csv; $(tail -1 "$k/ncu/ncu.log" 2>/dev/null)"
  fi
fi

if has_step build; then
  note "build"
  if [ ! -e /usr/include/absl/status/status.h ] || [ ! -e /usr/include/grpcpp/grpcpp.h ]; then
    note "build: SKIPPED: the C++ build's Debian dev packages (abseil, gRPC, protobuf, RocksDB, ...) are not on this machine; using the carried build if there is one"
    [ -x "$carry/cuda_board_test" ] || steps=${steps/test/}
  else
    cmake -G Ninja -S "$root" -B "$root/build-device" -DTUNEFARM_BUILD_BENCH=OFF \
      -DCMAKE_BUILD_TYPE=Release > "$out/build.log" 2>&1 &&
    ninja -C "$root/build-device" -j16 cuda_board_test cuda_fake_tool >> "$out/build.log" 2>&1
    rc=$?
    note "build: rc=$rc $(tail -1 "$out/build.log")"
    [ $rc -eq 0 ] || { failed=1; steps=${steps/test/}; }
  fi
fi

if has_step test; then
  note "test"
  if [ -x "$root/build-device/tests/agent/cuda_board_test" ]; then
    "$root/build-device/tests/agent/cuda_board_test" > "$out/test.log" 2>&1
  elif [ -x "$carry/cuda_board_test" ]; then
    note "test: running the carried build ($carry)"
    LD_LIBRARY_PATH="$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      TF_CUDA_FAKE_TOOL="$carry/cuda_fake_tool" TF_SOURCE_DIR="$root" \
      "$carry/cuda_board_test" > "$out/test.log" 2>&1
  else
    echo "no cuda_board_test: neither build-device/ nor $carry" > "$out/test.log"; false
  fi
  rc=$?
  grep -E "^\[ *(OK|FAILED|SKIPPED|PASSED) *\]" "$out/test.log" | tee -a "$out/summary.txt"
  note "test: rc=$rc"
  [ $rc -eq 0 ] || failed=1
fi

note "done: failed=$failed (logs in $out)"
exit $failed
