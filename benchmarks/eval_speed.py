"""Seconds of the quickstart's evaluation before training (113 held-out rows
for loss/perplexity + 40 greedy answers for exact match), two ftcore binaries
side by side: BEFORE (e.g. main's build) and AFTER (this branch's), in
interleaved rounds so both see the same machine load. Each round runs
`ftcore run RECIPE --set train.max_steps=1` per binary and reads the eval
time from metrics.jsonl: the eval record's time minus the time of the step-0
train record logged just before the evaluation starts. Also prints each
binary's eval loss, perplexity and exact match, which must agree. (The run
also evaluates after its one step; only the eval before training is timed,
but a round takes about twice that time.)
Target (issue #14 item 5): <= 15 s on an idle 2-core machine.

usage: eval_speed.py BEFORE_BINARY AFTER_BINARY [--recipe R] [--rounds N] [--warmup N] [--set k=v ...]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def eval_seconds(binary, recipe, out, overrides):
    if os.path.exists(out):
        shutil.rmtree(out)
    cmd = [binary, "run", recipe, "--set", "train.max_steps=1", "--output-dir", out, *overrides]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    [metrics] = [os.path.join(r, f) for r, _, files in os.walk(out) for f in files if f == "metrics.jsonl"]
    records = [json.loads(line) for line in open(metrics)]
    start = next(r for r in records if r["phase"] == "train" and "total_steps" in r)
    result = next(r for r in records if r["phase"] == "eval")
    return result["time"] - start["time"], {k: result[k] for k in ("loss", "perplexity", "exact_match") if k in result}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--recipe", default=os.path.join(ROOT, "configs", "quickstart.toml"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1, help="uncounted first rounds (example and page caches)")
    p.add_argument("--set", action="append", default=[], help="recipe override for both binaries")
    a = p.parse_args()
    overrides = [x for kv in a.set for x in ("--set", kv)]
    binaries = {"before": a.before, "after": a.after}
    times = {name: [] for name in binaries}
    values = {}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(a.warmup + a.rounds):
            order = list(binaries) if round_ % 2 == 0 else list(reversed(binaries))
            for name in order:
                seconds, metrics = eval_seconds(binaries[name], a.recipe, os.path.join(tmp, name), overrides)
                values[name] = metrics
                if round_ >= a.warmup:
                    times[name].append(seconds)
                print(f"round {round_} {name:6s} eval {seconds:7.2f} s {metrics}", flush=True)
    med = {name: statistics.median(t) for name, t in times.items()}
    print(f"median eval seconds: before {med['before']:.2f}, after {med['after']:.2f}, "
          f"speedup {med['before'] / med['after']:.2f}x ({a.rounds} interleaved rounds)")
    for key in values["before"]:
        print(f"  {key}: before {values['before'][key]!r} after {values['after'].get(key)!r}")


if __name__ == "__main__":
    main()
