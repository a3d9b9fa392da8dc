#!/usr/bin/env python3
"""Does the analyzer's diagnosis help the search? Runs whole sweeps through
`tunefarm local` on the sim and cpu boards with the hybrid strategy, once
with the diagnosis' suggestions used (use_diagnosis "1") and once ignored
("0"), same seeds, and compares the best after each round (issue 18).

Usage: diagnosis_ab.py --tunefarm BUILD/bin/tunefarm --examples EXAMPLES_DIR
           [--seeds 1,2,3] [--rounds 30] [--boards sim,cpu] [--smoke]

One board per sweep (one round at a time), so that every proposal sees
every earlier result and its diagnosis. Prints a Markdown table per board
kind, then one line:
  diagnosis_ab: sim_used=X sim_ignored=Y cpu_used=... (median speedup over
  the baseline after the last round) sim_rounds_used=... (median rounds to
  within 2% of the sweep's final best)
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile


def spec_text(example, strategy_line, rounds):
    out = []
    for line in example.splitlines():
        key = line.split(":", 1)[0].strip()
        if key == "strategy":
            line = strategy_line
        elif key == "budget":
            line = ("budget: {max_rounds: %d, time_limit: 30m, "
                    "max_rounds_without_gain: %d}" % (rounds, rounds))
        elif key == "goal":
            line = "goal: {speedup: 100000.0}"
        out.append(line)
    return "\n".join(out) + "\n"


def run_one(tf, example, board, seed, used, rounds, work):
    strategy = ('strategy: {name: hybrid, seed: %d, options: '
                '{use_diagnosis: "%d"}}' % (seed, 1 if used else 0))
    spec = os.path.join(work, "spec.yaml")
    with open(spec, "w") as f:
        f.write(spec_text(example, strategy, rounds))
    data = os.path.join(work, "data")
    shutil.rmtree(data, ignore_errors=True)
    cmd = [tf, "local", "--boards", board, "--agents", "1",
           "--boards-per-agent", "1", "--cpu-boards", "0", "--data-dir", data,
           spec]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=1800)
    reports = os.path.join(data, "reports")
    found = []
    for root, _, files in os.walk(reports):
        if "report.json" in files:
            found.append(os.path.join(root, "report.json"))
    if p.returncode != 0 or not found:
        sys.stderr.write(p.stdout[-3000:])
        raise SystemExit("tunefarm local failed for %s seed %d" % (board, seed))
    with open(found[0]) as f:
        report = json.load(f)
    base = None
    curve = []
    for r in report["rounds"]:
        b = r.get("best_so_far_us")
        if r["round"] == 0 and r.get("time_us") is not None:
            base = r["time_us"]
        if b is not None and r.get("outcome") not in ("queued", "leased"):
            curve.append(b)
    return base, curve


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tunefarm", required=True)
    ap.add_argument("--examples", required=True)
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--boards", default="sim,cpu")
    ap.add_argument("--smoke", action="store_true")
    a = ap.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    boards = a.boards.split(",")
    if a.smoke:
        seeds, boards, a.rounds = seeds[:1], ["sim"], min(a.rounds, 5)
    examples = {"sim": "sim_matmul.yaml", "cpu": "cpu_gemm.yaml"}
    line = {}
    work = tempfile.mkdtemp(prefix="diagnosis_ab_")
    try:
        for board in boards:
            with open(os.path.join(a.examples, examples[board])) as f:
                example = f.read()
            print("\n%s board, %s, %d rounds, one board, seeds %s\n" %
                  (board, examples[board], a.rounds,
                   ",".join(str(x) for x in seeds)))
            print("| diagnosis | seed | speedup after 10 | speedup after %d "
                  "| rounds to within 2%% of its final best |" % a.rounds)
            print("|---|---:|---:|---:|---:|")
            for used in (True, False):
                finals, reach = [], []
                for seed in seeds:
                    base, curve = run_one(a.tunefarm, example, board, seed,
                                          used, a.rounds, work)
                    final = curve[-1]
                    at10 = curve[min(10, len(curve)) - 1]
                    r2 = next(i for i, b in enumerate(curve)
                              if b <= final * 1.02)
                    finals.append(base / final)
                    reach.append(r2)
                    print("| %s | %d | %.2fx | %.2fx | %d |" %
                          ("used" if used else "ignored", seed, base / at10,
                           base / final, r2))
                    sys.stdout.flush()
                key = "%s_%s" % (board, "used" if used else "ignored")
                line[key] = "%.2f" % statistics.median(finals)
                line["%s_rounds_%s" % (board, "used" if used else "ignored")] = (
                    "%g" % statistics.median(reach))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\ndiagnosis_ab: " + " ".join("%s=%s" % kv for kv in line.items()) +
          " seeds=%d rounds=%d" % (len(seeds), a.rounds))


if __name__ == "__main__":
    main()
