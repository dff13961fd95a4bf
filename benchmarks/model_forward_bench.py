"""Forward throughput of the default model, ftcore vs transformers, on CPU,
side by side in one run: the same batch shape, dtype and thread count, full
logits [B, T, V], inference (no grad). Each side runs in its own process
(so its peak RSS is its own); the two alternate for ROUNDS rounds, each
round timing ITERS forwards after one warmup; the table shows each side's
median over all its timed forwards, every round's median, and the ratio.
Target: ftcore >= 1.3x transformers' tokens/s.

OpenMP threads that spin while waiting make every parallel region cost a
scheduler time slice on a machine whose cores are busy with other work (on
the 2-core build machine, 2 threads ran 3-5x slower than 1 for both sides).
Both sides therefore run with OMP_WAIT_POLICY=PASSIVE unless the caller's
environment sets it (set OMP_WAIT_POLICY=ACTIVE to see the spinning numbers).

usage: model_forward_bench.py BUILD_DIR [MODEL_DIR] [--dtype bf16] [--batch 4] [--seq 256]
                              [--iters 3] [--rounds 2] [--threads N]
       (transformers' side alone: model_forward_bench.py --hf-worker MODEL_DIR DTYPE B T ITERS)
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL = os.path.join(ROOT, "third_party", "models", "SmolLM2-135M-Instruct")


def hf_worker(model_dir, dtype_name, batch, seq, iters):
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import torch
    from transformers import AutoModelForCausalLM
    threads = int(os.environ.get("FTCORE_NUM_THREADS", os.cpu_count()))
    torch.set_num_threads(threads)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
    start = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).eval()
    load_s = time.perf_counter() - start
    torch.manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (batch, seq))
    times = []
    with torch.no_grad():
        model(input_ids=ids)  # warmup
        for _ in range(iters):
            start = time.perf_counter()
            model(input_ids=ids)
            times.append(time.perf_counter() - start)
    median = sorted(times)[len(times) // 2]
    print(json.dumps({"impl": "transformers", "threads": threads, "load_s": round(load_s, 3), "median_s": median,
                      "tokens_per_s": batch * seq / median,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "times_s": [round(t, 4) for t in times]}))


def run_json(cmd, env):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def add_side_by_side_arguments(p, dtype, seq):
    """The options every side-by-side benchmark shares (also moe_bench.py)."""
    p.add_argument("--dtype", default=dtype)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=seq)
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=int(os.environ.get("FTCORE_NUM_THREADS", os.cpu_count())))


def side_env(threads):
    """Both sides' environment: the thread count, and passive OpenMP waits unless the caller chose."""
    env = dict(os.environ, FTCORE_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--hf-worker":
        m, d, b, t, n = sys.argv[2:7]
        return hf_worker(m, d, int(b), int(t), int(n))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("build_dir")
    p.add_argument("model_dir", nargs="?", default=DEFAULT_MODEL)
    add_side_by_side_arguments(p, dtype="bf16", seq=256)
    a = p.parse_args()
    env = side_env(a.threads)
    driver = os.path.join(a.build_dir, "bin", "model_forward_driver")
    shape = [str(a.batch), str(a.seq), str(a.iters)]
    results = {"ftcore": [], "transformers": []}
    for _ in range(a.rounds):
        results["ftcore"].append(run_json([driver, a.model_dir, a.dtype] + shape, env))
        results["transformers"].append(
            run_json([sys.executable, os.path.abspath(__file__), "--hf-worker", a.model_dir, a.dtype] + shape, env))
    tokens = a.batch * a.seq
    median_s = {k: statistics.median([t for r in v for t in r["times_s"]]) for k, v in results.items()}
    print(f"model {os.path.basename(a.model_dir)}, {a.dtype}, batch {a.batch} x {a.seq} tokens, {a.threads} threads "
          f"(OMP_WAIT_POLICY={env['OMP_WAIT_POLICY']}), full logits, no grad; {a.rounds} alternating rounds x "
          f"{a.iters} forwards")
    print(f"{'':14s}{'tokens/s':>10s}{'s/forward':>11s}{'peak RSS MB':>13s}   per round (tokens/s)")
    for k in ("ftcore", "transformers"):
        rounds = ", ".join(f"{x['tokens_per_s']:.0f}" for x in results[k])
        rss = max(x["peak_rss_mb"] for x in results[k])
        print(f"{k:14s}{tokens / median_s[k]:10.1f}{median_s[k]:11.3f}{rss:13.0f}   {rounds}")
    ratio = median_s["transformers"] / median_s["ftcore"]
    print(f"ratio ftcore / transformers = {ratio:.2f}x (target >= 1.3x: {'met' if ratio >= 1.3 else 'MISSED'})")


if __name__ == "__main__":
    main()
