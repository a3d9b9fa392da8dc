"""Entry point of ops/ascend_matmul on an Ascend host (CANN + torch_npu +
triton-ascend). Implements the operator stage contract every board kind
drives (docs/operators.md; agent/stage_runner.h, agent/ascend_board.h):

  run.py --stage build|reference|run|profile --params P.json
         --workload W.json --out DIR --seed N [--warmup W --samples S]
         [--output 0|1] [--profiler msprof|torch_npu|pypto]
         [--aic_metrics G,...]

  build:     compiles the variant (triton compiles at its first launch) and
             launches it once: compiler errors, UB overflow and the grid
             limit surface here.
  reference: DIR/reference.bin, computed on the host in float64 from the
             seeded inputs; it never depends on --params.
  run:       with --output 1 (the default), first one launch on NaN-poisoned
             output -> DIR/output.bin (fp32), which the farm compares with the
             reference (this program never judges); then W + S launches,
             each timed with NPU events around the launch (synchronised), one
             line per sample in DIR/timing_us.txt. --output 0 is a timing-only
             block (the farm's A/B blocks after the checked one).
  profile:   msprof: just runs the kernel (msprof wraps this process).
             torch_npu: torch_npu.profiler around workload(), written to
             DIR/<worker>_ascend_pt/ (PipeUtilization, Level1).
The board isolates the card with ASCEND_RT_VISIBLE_DEVICES, so the kernel
always runs on "npu:0" here. The board's persistent Python runner
(agent/py_variant_runner.py) imports this file once and calls main() for
each stage, so the workload's device tensors are kept between stages (one
workload at a time) instead of being generated and copied for every block.
Exit codes: 0 ok, 2 bad input; compiler/runtime errors propagate (non-zero,
message on stderr) for the board to classify.
"""
import argparse
import json
import os
import sys

import torch
import torch_npu  # noqa: F401  (registers the npu device)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from matmul_kernel import launch  # noqa: E402


def inputs(m, n, k, seed):
    # Values k/64, k in [-64, 64]: products and fp32 partial sums are exact.
    g = torch.Generator().manual_seed(seed)
    a = (torch.randint(-64, 65, (m, k), generator=g).double() / 64)
    b = (torch.randint(-64, 65, (k, n), generator=g).double() / 64)
    return a, b


# (m, n, k, seed) -> (a, b, c) on the NPU; one entry, so a runner that moves
# to another workload frees the last one's memory.
_DEVICE = {}


def device_tensors(m, n, k, seed):
    key = (m, n, k, seed)
    if key not in _DEVICE:
        _DEVICE.clear()
        a64, b64 = inputs(m, n, k, seed)
        dev = torch.device("npu:0")
        _DEVICE[key] = (a64.half().to(dev), b64.half().to(dev),
                        torch.full((m, n), float("nan"), dtype=torch.float32, device=dev))
    return _DEVICE[key]


def main():
    p = argparse.ArgumentParser()
    for name in ("stage", "params", "workload", "out"):
        p.add_argument("--" + name, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=int, default=0)
    p.add_argument("--samples", type=int, default=1)
    p.add_argument("--output", type=int, default=1)
    p.add_argument("--profiler", default="msprof")
    p.add_argument("--aic_metrics", default="PipeUtilization")
    args = p.parse_args()
    params = json.load(open(args.params))
    dims = json.load(open(args.workload))["dims"]
    m, n, k = dims["m"], dims["n"], dims["k"]
    os.makedirs(args.out, exist_ok=True)

    if args.stage == "reference":
        a64, b64 = inputs(m, n, k, args.seed)
        (a64 @ b64).numpy().astype("<f4").tofile(os.path.join(args.out, "reference.bin"))
        return 0
    a, b, c = device_tensors(m, n, k, args.seed)

    def workload():
        launch(a, b, c, params)

    if args.stage == "build":
        workload()
        torch.npu.synchronize()
    elif args.stage == "run":
        if args.output:
            c.fill_(float("nan"))
            workload()
            torch.npu.synchronize()
            c.cpu().numpy().astype("<f4").tofile(os.path.join(args.out, "output.bin"))
        start = torch.npu.Event(enable_timing=True)
        end = torch.npu.Event(enable_timing=True)
        with open(os.path.join(args.out, "timing_us.txt"), "w") as f:
            for _ in range(args.warmup + args.samples):
                start.record()
                workload()
                end.record()
                end.synchronize()
                f.write("%.3f\n" % (start.elapsed_time(end) * 1000.0))
    elif args.stage == "profile":
        if args.profiler == "torch_npu":
            cfg = torch_npu.profiler._ExperimentalConfig(
                aic_metrics=torch_npu.profiler.AiCMetrics.PipeUtilization,
                profiler_level=torch_npu.profiler.ProfilerLevel.Level1)
            with torch_npu.profiler.profile(
                    activities=[torch_npu.profiler.ProfilerActivity.CPU,
                                torch_npu.profiler.ProfilerActivity.NPU],
                    experimental_config=cfg,
                    on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(args.out)):
                for _ in range(max(1, min(args.samples, 10))):
                    workload()
                torch.npu.synchronize()
        else:
            for _ in range(max(1, min(args.samples, 10))):
                workload()
            torch.npu.synchronize()
    else:
        sys.stderr.write("unknown --stage %s\n" % args.stage)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
