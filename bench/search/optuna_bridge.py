#!/usr/bin/env python3
"""Optuna's TPE on a search_bench space: the reference search_bench compares
against in the same run (a bench reference, not a tunefarm dependency).

Usage: optuna_bridge.py IN.json OUT.json

IN (written by search_bench): {"params": [{"name", "values": [str]}],
"table": {"v1,v2,..": time_us | null (failed)}, "baselines": ["v1,v2,.."]
(one per seed), "budget": N, "jobs": J}. A configuration missing from the
table is outside the space (a constraint violation) and fails.

OUT: {"tpe": [[best after evaluation 1, 2, ..] per seed], "tpe_mv": [...]}
for TPESampler(multivariate=False / True), seeded by the seed number.

Accounting as search_bench's: the baseline is evaluation 1 (enqueued), each
distinct configuration proposed costs one evaluation (failed and
out-of-space ones too, told to Optuna as FAIL), repeats are free (answered
from the same table; at most 2 x budget trials in all, then the trace
stops: a run that keeps repeating itself has converged).
"""
import json
import math
import multiprocessing
import sys


def run(job):
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    variant, seed, spec = job
    names = [p["name"] for p in spec["params"]]
    domains = [p["values"] for p in spec["params"]]
    table = spec["table"]
    budget = spec["budget"]
    baseline = spec["baselines"][seed - 1].split(",")
    sampler = optuna.samplers.TPESampler(seed=seed,
                                         multivariate=variant == "tpe_mv")
    study = optuna.create_study(direction="minimize", sampler=sampler)
    study.enqueue_trial(dict(zip(names, baseline)))
    seen = {}
    best = math.inf
    trace = []
    trials = 0
    while len(trace) < budget and trials < 2 * budget:
        trials += 1
        trial = study.ask()
        values = [trial.suggest_categorical(n, d) for n, d in zip(names, domains)]
        key = ",".join(values)
        if key in seen:
            value = seen[key]
        else:
            value = table.get(key)
            seen[key] = value
            if value is not None and value < best:
                best = value
            trace.append(best)
        if value is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(trial, value)
    return variant, seed, trace


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    seeds = len(spec["baselines"])
    jobs = [(v, s, spec) for v in ("tpe", "tpe_mv") for s in range(1, seeds + 1)]
    out = {"tpe": [None] * seeds, "tpe_mv": [None] * seeds}
    with multiprocessing.Pool(max(1, int(spec.get("jobs", 1)))) as pool:
        for variant, seed, trace in pool.imap_unordered(run, jobs):
            out[variant][seed - 1] = trace
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
