"""Data-parallel cost on one machine (issue: multi-process training).

Runs the quickstart recipe (LoRA, default model) for STEPS steps two ways in
one go: 1 rank x 2 threads (micro-batch 8) and 2 ranks x 1 thread under
torchrun (micro-batch 4 each: the same global batch), and reports the
whole-job tokens/s ratio (target >= 0.9), the all-reduce time per step over
the step time for LoRA and for a full fine-tune, and the full fine-tune's
optimizer state per rank with and without [distributed] shard_optimizer_state
(target <= 0.55 of unsharded). Evaluation is off: this measures training.

Usage: third_party/venv/bin/python benchmarks/distributed_scaling.py [BUILD_DIR] [STEPS]
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 10
FTCORE = os.path.join(BUILD, "bin", "ftcore")
FULL_RECIPE = """
[model]
path = "{root}/third_party/models/SmolLM2-135M-Instruct"
[data]
path = "{root}/third_party/data/quiz/train.jsonl"
format = "alpaca"
sequence_len = 512
[train]
precision = "auto"
[optimizer]
name = "adamw"
lr = 2e-5
[[logger]]
name = "jsonl"
"""
NO_EVAL = ["data.val_set_size=0.0", "train.eval_before_training=false", "train.eval_generation_samples=0"]


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        flags = next(line for line in f if line.startswith("flags")).split()
    return "AVX-512" + (" + AMX-BF16" if "amx_bf16" in flags else " without AMX") if "avx512f" in flags else "no AVX-512"


def run(recipe, out, name, ranks, threads, micro_batch, sets=()):
    args = [FTCORE, "run", recipe]
    for s in [*NO_EVAL, f"train.max_steps={STEPS}", f"train.logging_steps={STEPS // 2}", f"train.run_name={name}",
              f"train.output_dir={out}", f"train.micro_batch_size={micro_batch}", "train.save_steps=100000", *sets]:
        args += ["--set", s]
    env = dict(os.environ, FTCORE_PLUGIN_PATH="", FTCORE_NUM_THREADS=str(threads))
    if ranks > 1:
        env.pop("FTCORE_NUM_THREADS")  # the workers split the cores: 1 thread each on 2 cores
        args = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
                "--no-python"] + args
    p = subprocess.run(args, env=env, capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        raise SystemExit(f"{name} failed:\n{p.stderr[-3000:]}")
    with open(os.path.join(out, name, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    last = [r for r in records if r.get("phase") == "train" and "tokens_per_second" in r][-1]
    states = {}
    for line in p.stderr.splitlines():
        if "optimizer state on this rank:" in line:
            states[int(line.split("[rank ")[1].split("]")[0])] = int(line.split("rank: ")[1].split()[0])
    return last, states


def main():
    print(f"machine: {os.cpu_count()} cores, {cpu_flags()}; {STEPS} steps, second log window")
    with tempfile.TemporaryDirectory() as out:
        quick = os.path.join(ROOT, "configs", "quickstart.toml")
        one, _ = run(quick, out, "lora_1x2", 1, 2, 8)
        two, _ = run(quick, out, "lora_2x1", 2, 1, 4)
        ratio = two["tokens_per_second"] / one["tokens_per_second"]
        print(f"LoRA tokens/s: 1 rank x 2 threads {one['tokens_per_second']:.0f}, 2 ranks x 1 thread "
              f"{two['tokens_per_second']:.0f}: ratio {ratio:.2f} (target >= 0.9)")
        print(f"LoRA: all-reduce {two['communication_seconds_per_step'] * 1000:.1f} ms per step of "
              f"{two['seconds_per_step'] * 1000:.0f} ms "
              f"({two['communication_seconds_per_step'] / two['seconds_per_step']:.3f})")
        full = os.path.join(out, "full.toml")
        with open(full, "w") as f:  # the quickstart without its adapter: every weight trains
            f.write(FULL_RECIPE.format(root=ROOT))
        steps_full = ["train.max_steps=4", "train.logging_steps=2"]
        f_plain, s_plain = run(full, out, "full_2x1", 2, 1, 4, sets=steps_full)
        f_zero, s_zero = run(full, out, "full_2x1_zero", 2, 1, 4,
                             sets=steps_full + ["distributed.shard_optimizer_state=true"])
        print(f"full fine-tune: all-reduce {f_plain['communication_seconds_per_step'] * 1000:.0f} ms per step of "
              f"{f_plain['seconds_per_step'] * 1000:.0f} ms "
              f"({f_plain['communication_seconds_per_step'] / f_plain['seconds_per_step']:.3f}; "
              f"{f_plain['tokens_per_second']:.0f} tokens/s whole job)")
        whole = max(s_plain.values())
        print(f"full fine-tune optimizer state per rank: unsharded {s_plain}, ZeRO-1 {s_zero}: "
              f"largest share {max(s_zero.values()) / whole:.3f} of unsharded (target <= 0.55)")


if __name__ == "__main__":
    main()
