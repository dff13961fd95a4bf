"""LoRA+ against LoRA on the quickstart (default model, quiz data): steps to
reach a target eval loss, three seeds each (issue 7's benchmark; the LoRA+
paper reports up to 2x faster convergence). Steps, not seconds, so machine
load does not matter.

Each run: configs/quickstart.toml with max_steps STEPS, an eval every
EVERY steps (no generation eval), the given seed; lora_plus adds
loraplus_lr_ratio = RATIO to the same adapter options. The target is the
mean final eval loss of the LoRA runs; for every run we report the first
eval step at or below it (or "not reached").

Usage: loraplus_vs_lora.py FTCORE [--steps 60] [--every 10] [--ratio 16] [--out results.json]
"""
import argparse
import json
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def eval_curve(run_dir):
    curve = []
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("phase") == "eval":
                curve.append((r["step"], r["loss"]))
    return curve


def run(ftcore, out, name, seed, steps, every, extra):
    args = [ftcore, "run", "configs/quickstart.toml", "--output-dir", out,
            "--set", f"train.run_name={name}", "--set", f"train.seed={seed}", "--set", f"train.max_steps={steps}",
            "--set", f"train.eval_steps={every}", "--set", "train.eval_generation_samples=0",
            "--set", "train.eval_before_training=false", *extra]
    env = dict(os.environ, FTCORE_PLUGIN_PATH="", OMP_WAIT_POLICY="PASSIVE")
    subprocess.run(args, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return eval_curve(os.path.join(out, name))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ftcore")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--ratio", type=float, default=16.0)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--out")
    a = ap.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    curves = {}
    with tempfile.TemporaryDirectory() as out:
        for seed in seeds:
            curves[("lora", seed)] = run(a.ftcore, out, f"lora_{seed}", seed, a.steps, a.every, [])
            curves[("lora_plus", seed)] = run(a.ftcore, out, f"loraplus_{seed}", seed, a.steps, a.every,
                                              ["--set", "adapter.name=lora_plus",
                                               "--set", f"adapter.loraplus_lr_ratio={a.ratio}"])
    target = sum(curves[("lora", s)][-1][1] for s in seeds) / len(seeds)
    rows = []
    for (adapter, seed), curve in sorted(curves.items()):
        reached = next((step for step, loss in curve if loss <= target), None)
        rows.append({"adapter": adapter, "seed": seed, "final_eval_loss": curve[-1][1], "steps_to_target": reached,
                     "curve": curve})
    print(f"target eval loss (mean final LoRA loss at step {a.steps}): {target:.4f}")
    print(f"{'adapter':10} {'seed':>4} {'final eval loss':>16} {'steps to target':>16}")
    for r in rows:
        print(f"{r['adapter']:10} {r['seed']:>4} {r['final_eval_loss']:>16.4f} {str(r['steps_to_target']):>16}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"target": target, "runs": rows, "steps": a.steps, "every": a.every, "ratio": a.ratio}, f, indent=1)


if __name__ == "__main__":
    main()
