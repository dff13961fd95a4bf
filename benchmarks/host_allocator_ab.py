"""`ftcore run` on its own malloc, tcmalloc (core/CMakeLists.txt, FTCORE_TCMALLOC), against
glibc's malloc with its defaults (LD_PRELOAD="libc.so.6 libstdc++.so.6" puts glibc's malloc and
libstdc++'s operator new, which calls it, first in the dynamic linker's lookup order, so the same
executable allocates from glibc's heap), alternated,
on train_vs_hf.py's recipes (SmolLM2-135M, quiz data, batch 8, no evaluation).

Per run: median tokens_per_second of steps 3..N (metrics.jsonl), peak RSS and
minor page faults (the kernel's rusage of the child, os.wait4), the last loss
(must be equal: only where memory comes from changes).

usage: host_allocator_ab.py [--steps 12] [--rounds 2] [--runs lora_bf16,full_bf16,lora_fp32,full_fp32]
                            [--threads 2] [--ftcore build/bin/ftcore]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_vs_hf as tvh  # noqa: E402


GLIBC = "libc.so.6 libstdc++.so.6"


def run_once(args, recipe, out_dir, glibc):
    env = dict(os.environ, FTCORE_NUM_THREADS=str(args.threads))
    for name in ("GLIBC_TUNABLES", "LD_PRELOAD"):
        env.pop(name, None)
    if glibc:
        env["LD_PRELOAD"] = GLIBC
    with open(os.path.join(out_dir, "log.txt"), "w") as log:
        proc = subprocess.Popen([args.ftcore, "run", recipe, "--overwrite"], env=env, stdout=log,
                                stderr=subprocess.STDOUT, cwd=tvh.ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"ftcore run {recipe} failed: see {out_dir}/log.txt")
    records = []
    for root, _, files in os.walk(out_dir):
        if "metrics.jsonl" in files:
            with open(os.path.join(root, "metrics.jsonl")) as f:
                records = [json.loads(line) for line in f]
    train = [r for r in records if r.get("phase") == "train" and "tokens_per_second" in r]
    return {"tok_s": statistics.median(r["tokens_per_second"] for r in train[2:]),
            "rss_mb": usage.ru_maxrss / 1024, "minor_faults": usage.ru_minflt, "last_loss": train[-1]["loss"]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--runs", default="lora_bf16,full_bf16,lora_fp32,full_fp32")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ftcore", default=os.path.join(tvh.ROOT, "build", "bin", "ftcore"))
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="ftcore_host_allocator_ab_")
    print(f"load before {os.getloadavg()[0]:.2f}")
    results = {}
    for rnd in range(args.rounds):
        for name in args.runs.split(","):
            mode, precision = name.split("_")
            # Which arm goes first alternates with the round.
            for glibc in ((True, False) if rnd % 2 else (False, True)):
                label = "glibc's malloc" if glibc else "tcmalloc"
                out_dir = os.path.join(work, f"{name}_{int(glibc)}_{rnd}")
                os.makedirs(out_dir)
                recipe = os.path.join(out_dir, "recipe.toml")
                with open(recipe, "w") as f:
                    f.write(tvh.ftcore_recipe(mode, precision, args.steps, out_dir))
                t0 = time.time()
                r = run_once(args, recipe, out_dir, glibc)
                results.setdefault((name, glibc), []).append(r)
                print(f"  round {rnd + 1} {name:9s} {label:19s} {r['tok_s']:7.1f} tok/s  peak RSS {r['rss_mb']:6.0f} MB  "
                      f"minor faults {r['minor_faults']:9d}  last loss {r['last_loss']!r}  ({time.time() - t0:.0f} s)",
                      flush=True)
    print(f"\n{args.steps} steps, {args.threads} threads, median tok/s of steps 3..{args.steps}; load after "
          f"{os.getloadavg()[0]:.2f}")
    print("run       glibc tok/s  tcmalloc tok/s  tcmalloc/glibc per round  glibc RSS  tcmalloc RSS"
          "  glibc faults  tcmalloc faults  losses equal")
    for name in args.runs.split(","):
        glibc_runs, tcmalloc_runs = results[(name, True)], results[(name, False)]
        ratios = " ".join(f"{b['tok_s'] / a['tok_s']:.2f}" for a, b in zip(glibc_runs, tcmalloc_runs))
        equal = all(a["last_loss"] == b["last_loss"] for a, b in zip(glibc_runs, tcmalloc_runs))
        print(f"{name:9s} {statistics.median(r['tok_s'] for r in glibc_runs):11.1f} {statistics.median(r['tok_s'] for r in tcmalloc_runs):15.1f}"
              f"  {ratios:24s}  {max(r['rss_mb'] for r in glibc_runs):9.0f} {max(r['rss_mb'] for r in tcmalloc_runs):13.0f}"
              f" {statistics.median(r['minor_faults'] for r in glibc_runs):13.0f} {statistics.median(r['minor_faults'] for r in tcmalloc_runs):16.0f}"
              f"  {equal}")


if __name__ == "__main__":
    main()
