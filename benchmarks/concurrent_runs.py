"""Two ftcore runs on one machine: does each keep its share? (issue #14 item 3)

Measures, in interleaved rounds on the same machine:
  alone        one `ftcore run`, environment untouched (thread sharing on, the default)
  alone-old    the same with FTCORE_THREAD_SHARING=0 (every core, as before sharing existed)
  pair         two `ftcore run` started together, environment untouched
  pair-old     (--old-pair) two together with FTCORE_THREAD_SHARING=0: the collapse sharing fixes
  alone-env, pair-env  (--compare-env K=V,...) sharing off and K=V set instead: another
               option, e.g. OMP_WAIT_POLICY=PASSIVE or GOMP_SPINCOUNT=10000 (what a
               re-exec would set before libgomp loads), judged by the same ratios
and prints tokens/s of each, and the ratios the issue sets targets for:
  pair / alone      each of the two   >= 0.45 (a fair share of a 2-run machine is 0.5)
  alone / alone-old                   >= 0.97 (a run alone loses <= 3%)
A ratio is taken within a round (the runs it compares ran minutes apart at
most), then the median over rounds is reported.

The recipe: configs/quickstart.toml (the default model, SmolLM2-135M-Instruct,
on the quiz data, LoRA r=8, micro-batch 8, precision "auto") with --set:
STEPS steps, a metrics record every step, no evaluation, no validation split,
a run folder under a temporary folder. --model / --data swap in another model
(a tiny one for a quick check) or dataset.

tokens/s of a run: metrics.jsonl has one record per step, written at its end,
with "time" (wall clock) and "tokens_per_second" (that step's tokens over its
duration). Step 1 (lazy initialisation) is left out. For a pair, only steps
that began and ended while BOTH runs were training count (a run that ends first
leaves the other alone, which would flatter it): the script says how many.

Registry: by default the runs use a private thread registry
(FTCORE_THREAD_REGISTRY=a temporary folder), so only this benchmark's runs see
each other; --machine-registry uses the real one (other ftcore processes on
the machine then count too). FTCORE_NUM_THREADS, OMP_NUM_THREADS and
FTCORE_THREAD_SHARING are removed from the children's environment (each fixes
or switches off the behaviour under test); OMP_WAIT_POLICY / GOMP_SPINCOUNT
from the caller's environment are kept and printed.

usage: concurrent_runs.py [--ftcore build/bin/ftcore] [--steps 12] [--rounds 3] [--old-pair] [--compare-env K=V,...]
                          [--model DIR] [--data FILE.jsonl] [--sequence-len N] [--machine-registry] [--out FILE.json]
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXING = ("FTCORE_NUM_THREADS", "OMP_NUM_THREADS", "FTCORE_THREAD_SHARING")
WAITING = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
CHILDREN = []  # every run started, killed on the way out if still running (Ctrl-C, a failed run)


def cpu_facts():
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"{model}, {os.cpu_count()} logical cores, AVX-512 {'yes' if 'avx512f' in flags else 'no'}, "
            f"AMX-BF16 {'yes' if 'amx_bf16' in flags else 'no'}")


def child_env(registry, sharing, extra=None):
    env = dict(os.environ, FTCORE_PLUGIN_PATH="")
    for name in FIXING:
        env.pop(name, None)
    env.update(extra or {})
    if registry:
        env["FTCORE_THREAD_REGISTRY"] = registry
    if not sharing:
        env["FTCORE_THREAD_SHARING"] = "0"
    return env


def start_run(args, work, name, env):
    out = os.path.join(work, "runs")
    shutil.rmtree(os.path.join(out, name), ignore_errors=True)
    sets = [f"model.path={json.dumps(args.model)}", f"data.path={json.dumps(args.data)}",
            f"train.max_steps={args.steps}", "train.logging_steps=1", "train.eval_before_training=false",
            "train.eval_generation_samples=0", "data.val_set_size=0.0", f"train.output_dir={json.dumps(out)}",
            f"train.run_name={json.dumps(name)}"]
    if args.sequence_len:
        sets.append(f"data.sequence_len={args.sequence_len}")
    cmd = [args.ftcore, "run", os.path.join(ROOT, "configs", "quickstart.toml")]
    for s in sets:
        cmd += ["--set", s]
    log = open(os.path.join(work, name + ".log"), "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    CHILDREN.append(proc)
    return proc, log, os.path.join(out, name)


def wait_run(proc, log, run_dir):
    rc = proc.wait()
    log.close()
    if rc != 0:
        with open(log.name, errors="replace") as f:
            tail = "".join(f.readlines()[-20:])
        sys.exit(f"ftcore run exited {rc} ({log.name}):\n{tail}")
    records = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("phase") == "train" and "tokens_per_second" in r:
                records[r["step"]] = r
    return [records[k] for k in sorted(records)]


def step_tokens(records, k):
    return records[k]["tokens_per_second"] * (records[k]["time"] - records[k - 1]["time"])


def rate(records, begin=None, end=None):
    """tokens/s over steps 2.. that began at or after `begin` and ended by `end`."""
    ks = [k for k in range(1, len(records))
          if (begin is None or records[k - 1]["time"] >= begin) and (end is None or records[k]["time"] <= end)]
    if not ks:
        return None, 0, []
    tokens = sum(step_tokens(records, k) for k in ks)
    seconds = sum(records[k]["time"] - records[k - 1]["time"] for k in ks)
    return tokens / seconds, len(ks), sorted({int(records[k].get("threads", 0)) for k in ks})


def run_alone(args, work, name, sharing, registry, extra=None):
    proc, log, run_dir = start_run(args, work, name, child_env(registry, sharing, extra))
    records = wait_run(proc, log, run_dir)
    tok_s, steps, threads = rate(records)
    return {"tokens_per_s": tok_s, "steps": steps, "threads": threads}


def run_pair(args, work, name, sharing, registry, extra=None):
    started = [start_run(args, work, f"{name}_{i}", child_env(registry, sharing, extra)) for i in range(2)]
    runs = [wait_run(*s) for s in started]
    begin = max(r[0]["time"] for r in runs)   # both past step 1
    end = min(r[-1]["time"] for r in runs)    # neither finished
    out = []
    for r in runs:
        tok_s, steps, threads = rate(r, begin, end)
        if steps < 3:
            sys.exit(f"{name}: only {steps} steps of a run overlapped the other's; raise --steps")
        out.append({"tokens_per_s": tok_s, "steps": steps, "threads": threads})
    return out


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ftcore", default=os.path.join(ROOT, "build", "bin", "ftcore"))
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--old-pair", action="store_true", help="also the pair without sharing (slow: the collapse)")
    p.add_argument("--compare-env", default="", help="K=V[,K=V]: also alone/pair with these set, sharing off")
    p.add_argument("--model", default=os.path.join(ROOT, "third_party", "models", "SmolLM2-135M-Instruct"))
    p.add_argument("--data", default=os.path.join(ROOT, "third_party", "data", "quiz", "train.jsonl"))
    p.add_argument("--sequence-len", type=int, help="data.sequence_len (default: the quickstart's 512; a tiny model may need less)")
    p.add_argument("--machine-registry", action="store_true", help="the real registry instead of a private one")
    p.add_argument("--out", help="write every round as JSON here")
    args = p.parse_args()
    args.model, args.data, args.ftcore = map(os.path.abspath, (args.model, args.data, args.ftcore))
    if args.steps < 6:
        sys.exit("--steps must be at least 6 (step 1 is left out; a pair needs overlapping steps)")

    work = tempfile.mkdtemp(prefix="ftcore_concurrent_")
    registry = None if args.machine_registry else os.path.join(work, "registry")
    print(f"machine: {cpu_facts()}")
    print(f"model: {args.model}\ndata: {args.data}\nsteps per run: {args.steps} (step 1 left out), rounds: {args.rounds}")
    print("caller's OpenMP settings kept: " +
          (", ".join(f"{n}={os.environ[n]}" for n in WAITING if n in os.environ) or "none (libgomp defaults)"))
    print(f"registry: {'the machine one' if args.machine_registry else 'private (' + registry + ')'}")
    compare = dict(kv.split("=", 1) for kv in args.compare_env.split(",") if kv)
    if compare:
        print(f"compared option (sharing off): {args.compare_env}")
    kinds = ["alone", "alone-old", "pair"] + (["pair-old"] if args.old_pair else [])
    kinds += ["alone-env", "pair-env"] if compare else []
    rounds = []
    started = time.time()
    for i in range(args.rounds):
        order = kinds if i % 2 == 0 else kinds[::-1]  # interleaved: each kind goes first in turn
        result = {}
        for kind in order:
            sharing = kind in ("alone", "pair")
            extra = compare if kind.endswith("-env") else None
            run = run_alone if kind.startswith("alone") else run_pair
            result[kind] = run(args, work, f"r{i}_{kind}", sharing, registry, extra)
        rounds.append(result)
        line = f"round {i + 1}: alone {result['alone']['tokens_per_s']:.1f} tok/s ({result['alone']['threads']} threads), "
        line += f"alone-old {result['alone-old']['tokens_per_s']:.1f} ({result['alone-old']['threads']}), pair "
        line += " / ".join(f"{r['tokens_per_s']:.1f} ({r['threads']}, {r['steps']} steps)" for r in result["pair"])
        for kind in ("pair-old", "pair-env"):
            if kind in result:
                line += f", {kind} " + " / ".join(f"{r['tokens_per_s']:.1f} ({r['threads']})" for r in result[kind])
        if "alone-env" in result:
            line += f", alone-env {result['alone-env']['tokens_per_s']:.1f}"
        print(line, flush=True)

    def per_round(f):
        return median([f(r) for r in rounds])

    alone = per_round(lambda r: r["alone"]["tokens_per_s"])
    alone_old = per_round(lambda r: r["alone-old"]["tokens_per_s"])
    summary = {
        "alone_tokens_per_s": alone,
        "alone_old_tokens_per_s": alone_old,
        "pair_tokens_per_s": [per_round(lambda r, j=j: r["pair"][j]["tokens_per_s"]) for j in range(2)],
        "pair_over_alone": [per_round(lambda r, j=j: r["pair"][j]["tokens_per_s"] / r["alone"]["tokens_per_s"])
                            for j in range(2)],
        "alone_over_alone_old": per_round(lambda r: r["alone"]["tokens_per_s"] / r["alone-old"]["tokens_per_s"]),
    }
    if args.old_pair:
        summary["pair_old_over_alone_old"] = [
            per_round(lambda r, j=j: r["pair-old"][j]["tokens_per_s"] / r["alone-old"]["tokens_per_s"]) for j in range(2)]
    if compare:
        summary["alone_env_over_alone_old"] = per_round(
            lambda r: r["alone-env"]["tokens_per_s"] / r["alone-old"]["tokens_per_s"])
        summary["pair_env_over_alone_old"] = [
            per_round(lambda r, j=j: r["pair-env"][j]["tokens_per_s"] / r["alone-old"]["tokens_per_s"]) for j in range(2)]

    print(f"\nmedians over {args.rounds} rounds ({time.time() - started:.0f} s in all):")
    print("| measurement | tokens/s | ratio | target |\n|---|---|---|---|")
    print(f"| alone, sharing on (default) | {alone:.1f} | {summary['alone_over_alone_old']:.3f}x alone-old | >= 0.97x |")
    print(f"| alone, FTCORE_THREAD_SHARING=0 (old default) | {alone_old:.1f} | 1 | |")
    for j in range(2):
        print(f"| pair, run {j + 1} of 2 | {summary['pair_tokens_per_s'][j]:.1f} | "
              f"{summary['pair_over_alone'][j]:.3f}x alone | >= 0.45x |")
    if args.old_pair:
        for j in range(2):
            print(f"| pair without sharing, run {j + 1} | | {summary['pair_old_over_alone_old'][j]:.3f}x alone-old | |")
    if compare:
        print(f"| alone, {args.compare_env}, sharing off | | {summary['alone_env_over_alone_old']:.3f}x alone-old | >= 0.97x |")
        for j in range(2):
            print(f"| pair, {args.compare_env}, sharing off, run {j + 1} | | "
                  f"{summary['pair_env_over_alone_old'][j]:.3f}x alone-old | >= 0.45x |")
    ok = min(summary["pair_over_alone"]) >= 0.45 and summary["alone_over_alone_old"] >= 0.97
    print(f"targets {'met' if ok else 'NOT met'}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"machine": cpu_facts(), "args": vars(args), "rounds": rounds, "summary": summary}, f, indent=1)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    finally:
        for child in CHILDREN:
            if child.poll() is None:
                child.kill()
