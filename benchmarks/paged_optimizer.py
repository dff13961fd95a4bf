"""Step time of the paged optimizers on SmolLM2-135M's parameters (134.5M, fp32): optimizer/
paged_adamw_32bit and paged_adamw_8bit with a resident budget of a quarter of their state vs
unbounded (max_resident_bytes = 0: the state file stays mapped) vs the non-paged adamw /
adamw_8bit, each in its own process, side by side in one run. With the budget every step reads
and writes back every page of the state file (pages dropped from the page cache, so the reads
come from the disk), overlapped with the update by the store's I/O thread; the ratio to the
non-paged optimizer is the cost of keeping 3/4 of the state out of memory.

Prints a table (ms per step, ratio to the non-paged optimizer, pages in/out per step, the
accounted and mincore-measured resident high-water marks, and the disk's own time to write and
read the state once with dd O_DIRECT in the same folder: the floor of a step that pages all of it)
and one JSON line per run.

usage: paged_optimizer.py [--build build] [--steps 5] [--run-folder DIR]
  (DIR: where the state files go; default a temporary folder under the build folder, on its disk)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

NUMEL = 134_515_008  # SmolLM2-135M's parameters, as the driver builds them (checked below)
PAGE_BYTES = 16 << 20


def state_bytes(optimizer):
    """Bytes of optimizer state the store holds: fp32 m and v, or 8-bit codes + absmax per 256."""
    if optimizer.endswith("8bit"):
        return NUMEL * 2 + NUMEL // 256 * 8
    return NUMEL * 8


def run(driver, optimizer, opts, steps, run_folder):
    cmd = [driver, "--optimizer", optimizer, "--steps", str(steps), "--warmup", "2", "--run-folder", run_folder]
    for k, v in opts.items():
        cmd += ["--set", f"{k} = {v}"]
    env = dict(os.environ, FTCORE_PAGED_STATS="1")
    env.setdefault("FTCORE_NUM_THREADS", "2")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{result.stdout}{result.stderr}")
    out = json.loads(result.stdout.strip().splitlines()[-1])
    stats = [json.loads(line[len("paged_stats "):]) for line in result.stderr.splitlines()
             if line.startswith("paged_stats ")]
    out["stats"] = stats[-1] if stats else None
    out["steps_total"] = len(stats)
    out["command"] = " ".join(cmd)
    return out


def disk_floor_ms(folder, nbytes):
    """The disk's own time to write and read back `nbytes` (dd, O_DIRECT, 16 MiB blocks) in `folder`:
    what a step that moves the whole state out and in once cannot beat."""
    path = os.path.join(folder, "disk_floor.bin")
    count = max(1, nbytes // PAGE_BYTES)
    total = 0.0
    try:
        for args in ([f"if=/dev/zero", f"of={path}", "oflag=direct"], [f"if={path}", "of=/dev/null", "iflag=direct"]):
            r = subprocess.run(["dd", *args, "bs=16M", f"count={count}"], capture_output=True, text=True, check=True)
            total += float(r.stderr.strip().splitlines()[-1].split(" s,")[0].split(",")[-1])
    finally:
        if os.path.exists(path):
            os.remove(path)
    return total * 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build"))
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--run-folder", default=None)
    args = ap.parse_args()
    driver = os.path.join(args.build, "benchmarks", "paged_optimizer_driver")
    folder = args.run_folder or tempfile.mkdtemp(prefix="paged_bench_", dir=args.build)
    os.environ.setdefault("FTCORE_PLUGIN_PATH", "")
    rows = []
    for base, paged in (("adamw", "paged_adamw_32bit"), ("adamw_8bit", "paged_adamw_8bit")):
        budget = state_bytes(paged) // 4
        runs = [(base, {}, "-"), (paged, {"max_resident_bytes": 0, "page_bytes": PAGE_BYTES}, "unbounded"),
                (paged, {"max_resident_bytes": budget, "page_bytes": PAGE_BYTES}, f"{budget >> 20} MiB (25%)")]
        baseline = None
        floor = disk_floor_ms(folder, state_bytes(paged))
        for optimizer, opts, label in runs:
            r = run(driver, optimizer, opts, args.steps, folder)
            if r["numel"] != NUMEL:
                sys.exit(f"the driver built {r['numel']} parameters, expected {NUMEL}")
            baseline = baseline or r["ms_per_step"]
            r["budget"] = label
            r["ratio"] = r["ms_per_step"] / baseline
            r["disk_floor_ms"] = floor if opts.get("max_resident_bytes") else None
            rows.append(r)
            print(json.dumps({k: v for k, v in r.items() if k != "command"}), flush=True)
    print(f"\n134.5M fp32 parameters, {os.environ.get('FTCORE_NUM_THREADS', '2')} threads, "
          f"{args.steps} timed steps after 2 warm-up, page_bytes {PAGE_BYTES >> 20} MiB, state files in {folder}")
    print(f"{'optimizer':18s} {'budget':16s} {'ms/step':>9s} {'x base':>7s} {'pages in/step':>13s} "
          f"{'high water (acct / mincore)':>28s} {'disk write+read of the state, ms':>33s}")
    for r in rows:
        s = r["stats"]
        per_step = f"{s['pages_in'] / r['steps_total']:.0f}" if s and s["pages_in"] else "-"
        hw = (f"{s['resident_high_water'] >> 20} / {s['measured_high_water'] >> 20} MiB"
              if s and s["pages_in"] else "-")
        floor = f"{r['disk_floor_ms']:.0f}" if r["disk_floor_ms"] else "-"
        print(f"{r['optimizer']:18s} {r['budget']:16s} {r['ms_per_step']:9.1f} {r['ratio']:7.2f} {per_step:>13s} "
              f"{hw:>28s} {floor:>33s}")
    if not args.run_folder:
        os.rmdir(folder)  # the optimizers removed their state files


if __name__ == "__main__":
    main()
