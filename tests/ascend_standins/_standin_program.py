"""The Ascend operator program's stand-in (the stage contract of
ops/ascend_matmul/run.py on a host with no NPU), as a module with `main(argv)`.

Two callers: `ascend-python` (the interpreter stand-in: each stage a process)
and `runner_pkg/run.py` (a real Python program the board's persistent Python
runner imports once; each stage a call to main()). What it prints and writes
is described in ascend-python. Each call logs "stage=<s> pid=<pid> ..." to
TF_STANDIN_LOG, and each import "imported pid=<pid>", so a test can tell a
runner (one pid, one import) from processes.
"""
import csv
import json
import os
import shutil
import signal
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _standin  # noqa: E402

_standin.log("imported pid=%d" % os.getpid())

# Real compiler text (triton-ascend docs/en/programming_guide.md).
COMPILE_HEAD = """Traceback (most recent call last):
  File "run.py", line 1, in <module>
triton.compiler.errors.MLIRCompilationError:
///--------------------- [ERROR][Triton][BEG]-------------------------
[ConvertLinalgRToBinary] encounters error:
loc("/tmp/tmpsb6qkdih/kernel.ttadapter.mlir":2:1): error: Failed to run BishengHIR pipeline
"""
UB_LINE = ('loc("/tmp/tmpsb6qkdih/kernel.ttadapter.mlir":3:3): error: ub overflow, requires '
           '3072256 bits while 1572864 bits available! (possible reason: tiling basic block is '
           'too large or block number is more than what user expect due to multi-buffer feature '
           'is enabled and some ops need extra local buffer.)\n')




def fail(text, code=1):
    sys.stderr.write(text)
    sys.exit(code)


def fill(count, salt, seed):
    x = (seed * 2654435761 + salt) & 0xFFFFFFFF
    vals = []
    for _ in range(count):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        vals.append(((x >> 8) % 129 - 64) / 64.0)
    return vals


def product(opt):
    with open(opt["workload"]) as f:
        dims = json.load(f)["dims"]
    m, n, k = dims["m"], dims["n"], dims["k"]
    seed = int(opt.get("seed", "0"))
    a, b = fill(m * k, 1, seed), fill(k * n, 2, seed)
    ref = [0.0] * (m * n)
    for r in range(m):
        for kk in range(k):
            av = a[r * k + kk]
            row = kk * n
            for c in range(n):
                ref[r * n + c] += av * b[row + c]
    return ref


def write_floats(out, name, vals):
    with open(os.path.join(out, name), "wb") as f:
        f.write(struct.pack("<%df" % len(vals), *vals))


def main(argv):
    """Runs one stage; argv is the program's arguments (no program name)."""
    opt = {}
    i = 0
    while i < len(argv):
        if argv[i].startswith("--") and i + 1 < len(argv):
            opt[argv[i][2:]] = argv[i + 1]
            i += 2
        else:
            i += 1
    stage, out = opt.get("stage"), opt.get("out")
    dev = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
    _standin.log("stage=%s ASCEND_RT_VISIBLE_DEVICES=%s TILE_FWK_DEVICE_ID=%s pid=%d" %
                 (stage, dev, os.environ.get("TILE_FWK_DEVICE_ID"), os.getpid()))
    if dev is None:
        sys.stderr.write("RuntimeError: no NPU visible (ASCEND_RT_VISIBLE_DEVICES unset)\n")
        return 3
    mode = _standin.mode()
    os.makedirs(out, exist_ok=True)
    if stage == "build":
        if mode == "compile_error":
            fail(COMPILE_HEAD)
        if mode == "ub_overflow":
            fail(COMPILE_HEAD + UB_LINE)
        if mode == "grid_limit":
            fail("coreDim=262144 can't be greater than UINT16_MAX\n")
        if mode == "device_error":
            # Modelled on torch_npu's "NPU function error: <call>, error code is <n>".
            fail("RuntimeError: synchronize:NPUStream.cpp NPU function error: "
                 "AclrtSynchronizeStreamWithTimeout, error code is 507054\n"
                 "[ERROR] RUNTIME: HBM MULTI BIT ECC ERROR (ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR)\n")
    elif stage == "reference":
        write_floats(out, "reference.bin", product(opt))
    elif stage == "run":
        if mode == "timeout":
            time.sleep(3600)
        if mode == "crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        if mode == "abort":
            os.abort()
        if mode == "raise":
            raise RuntimeError("the stand-in kernel raised")
        if opt.get("output", "1") != "0":
            outv = product(opt)
            if mode == "precision":
                outv[0] += 1.0
            write_floats(out, "output.bin", outv)
        # The fixture's values as printed for the default block_m (64), scaled
        # by block_m / 64 otherwise.
        with open(opt["params"]) as f:
            block_m = json.load(f).get("block_m", 64)
        d = os.path.join(_standin.fixtures(), "helix_msprof_real", "mindstudio_profiler_output")
        name = [f for f in os.listdir(d) if f.startswith("op_summary_")][0]
        with open(os.path.join(d, name), newline="") as f:
            durs = [row["Task Duration(us)"].strip() for row in csv.DictReader(f)
                    if row["OP Type"] == "matmul_kernel"]
        if block_m != 64:
            durs = ["%.3f" % (float(v) * block_m / 64.0) for v in durs]
        total = int(opt.get("warmup", "0")) + int(opt.get("samples", "1"))
        with open(os.path.join(out, "timing_us.txt"), "w") as f:
            for j in range(total):
                f.write(durs[j % len(durs)] + "\n")
    elif stage == "profile":
        prof = opt.get("profiler", "msprof")
        if prof == "torch_npu" and mode != "torch_npu_empty":
            dst = os.path.join(out, "standin_%d_%d_ascend_pt" % (os.getpid(), int(time.time() * 1000)))
            shutil.copytree(os.path.join(_standin.fixtures(), "helix_torch_npu_real", "ASCEND_PROFILER_OUTPUT"),
                            os.path.join(dst, "ASCEND_PROFILER_OUTPUT"))
        elif prof == "pypto":
            dst = os.path.join(os.getcwd(), "output", "output_%s" % time.strftime("%Y%m%d%H%M%S"))
            os.makedirs(dst, exist_ok=True)
            shutil.copyfile(os.path.join(_standin.fixtures(), "pypto_swimlane_kaywang", "merged_swimlane.timeline.json"),
                            os.path.join(dst, "merged_swimlane.json"))
    else:
        fail("unknown --stage %r\n" % stage, 2)
    return 0
