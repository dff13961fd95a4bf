"""`ftcore ab` on the default model: a 2-arm x 5-seed experiment (the
configs/ab control/treatment pair, shortened) run with --jobs 1 and with
--jobs 2 on this machine, in one go. Reports the wall time of each (target:
--jobs 2 not slower) and the overhead of `ftcore ab` over the sum of its
runs' own wall times at --jobs 1 (target <= 3%).

Usage: third_party/venv/bin/python benchmarks/ab_overhead.py [BUILD_DIR] [STEPS]
"""
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 6
FTCORE = os.path.join(BUILD, "bin", "ftcore")
SHORT = [f"train.max_steps={STEPS}", f"train.eval_steps={STEPS}", "train.eval_before_training=false",
         "train.eval_generation_samples=0", "data.val_set_size=0.02", f"train.logging_steps={STEPS}"]


def cpu():
    with open("/proc/cpuinfo") as f:
        flags = next(line for line in f if line.startswith("flags")).split()
    return f"{os.cpu_count()} cores, " + ("AVX-512" + (" + AMX-BF16" if "amx_bf16" in flags else " without AMX")
                                         if "avx512f" in flags else "no AVX-512")


def experiment(out, jobs):
    folder = os.path.join(out, f"jobs{jobs}")
    args = [FTCORE, "ab", os.path.join(ROOT, "configs/ab/control.toml"), os.path.join(ROOT, "configs/ab/treatment.toml"),
            "--seeds", "5", "--jobs", str(jobs), "--out", folder]
    for s in SHORT:
        args += ["--set", s]
    env = dict(os.environ, FTCORE_PLUGIN_PATH="")
    env.pop("FTCORE_NUM_THREADS", None)
    start = time.monotonic()
    p = subprocess.run(args, env=env, capture_output=True, text=True, cwd=ROOT)
    wall = time.monotonic() - start
    if p.returncode != 0:
        raise SystemExit(f"ftcore ab --jobs {jobs} failed:\n{p.stdout}\n{p.stderr[-3000:]}")
    runs = 0.0
    for root, _, files in os.walk(os.path.join(folder, "runs")):
        if "ab_result.json" in files:
            with open(os.path.join(root, "ab_result.json")) as f:
                runs += json.load(f)["wall_seconds"]
    return wall, runs


def main():
    print(f"machine: {cpu()}; 2 arms x 5 seeds, {STEPS} steps each, default model")
    with tempfile.TemporaryDirectory() as out:
        one, runs_one = experiment(out, 1)
        two, _ = experiment(out, 2)
    print(f"--jobs 1: {one:.1f} s (its runs: {runs_one:.1f} s; ab overhead {100 * (one - runs_one) / runs_one:.2f}%)")
    print(f"--jobs 2: {two:.1f} s: {one / two:.2f}x the speed of --jobs 1 (target >= 1.0)")


if __name__ == "__main__":
    main()
