"""`ftcore run` with adapter/relora: the learning rate over three ReLoRA cycles.

Trains the tiny Llama of tiny_training.py for 30 steps with relora_steps = 10
and relora_warmup_steps = 3 (restarts after steps 10 and 20; none after the
last), logging every step, twice:

  cosine    scheduler cosine, warmup_steps 3; relora_anneal_steps 1 (none)
  constant  scheduler constant; relora_anneal_steps 3

and checks every logged "lr" against an independent computation: the base lr
times transformers' schedule lambda (get_cosine_schedule_with_warmup /
get_constant_schedule) times the restart factor of Axolotl's
JaggedLRRestartScheduler, written out below, both at the 0-based index of the
step (LambdaLR's last_epoch). Also: the jagged shape itself (0.001 x the
schedule on the first step of each cycle, 1 x again after the warmup), the
restarts the log reports, and the final adapter (3 cycles of r = 4, saved as
one LoRA of rank 12) loading in PEFT. Then resume: the cosine run again with
a checkpoint every 5 steps, killed inside the write of checkpoint-15 and
resumed from checkpoint-10 (saved just after the first restart: the merged
cycle travels in the adapter file), ends with the uninterrupted run's final
adapter byte for byte and its lr and loss at every step.

Usage: relora_lr_reference.py FTCORE_BINARY [--svg docs/relora_lr.svg]
"""
import json
import os
import re
import sys
import tempfile

import tiny_training as tt

import torch  # noqa: E402
from transformers import get_constant_schedule, get_cosine_schedule_with_warmup  # noqa: E402

STEPS, RELORA_STEPS, RELORA_WARMUP, LR = 30, 10, 3, 1e-3
RUNS = {  # name -> (scheduler table, relora_anneal_steps)
    "cosine": ({"name": "cosine", "warmup_steps": 3}, 1),
    "constant": ({"name": "constant"}, 3),
}


def jagged_factor(step, n, warmup, anneal, min_scale=0.001):
    """Axolotl's JaggedLRRestartScheduler.get_lr scale (src/axolotl/utils/schedulers.py)."""
    if step < n - anneal:
        return 1.0
    p = step % n
    if p < warmup:
        t = min(1.0, p / warmup)
    elif p > n - anneal:
        t = min(1.0, (n - p) / anneal)
    else:
        t = 1.0
    return t * (1 - min_scale) + min_scale


def schedule_factors(scheduler):
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=LR)
    if scheduler["name"] == "cosine":
        s = get_cosine_schedule_with_warmup(opt, scheduler["warmup_steps"], STEPS)
    else:
        s = get_constant_schedule(opt)
    return [s.lr_lambdas[0](i) for i in range(STEPS)]


def write_recipe(out, name, model, data, scheduler, anneal, **train_extra):
    def table(d):
        return "".join(f"{k} = {json.dumps(v)}\n" for k, v in d.items())

    train = dict(micro_batch_size=2, gradient_accumulation_steps=1, max_steps=STEPS, logging_steps=1,
                 precision="fp32", max_grad_norm=1.0, seed=7, output_dir=os.path.join(out, "runs"), run_name=name,
                 **train_extra)
    adapter = dict(name="relora", r=4, alpha=8.0, target_modules=tt.TARGETS, relora_steps=RELORA_STEPS,
                   relora_warmup_steps=RELORA_WARMUP, relora_anneal_steps=anneal, relora_prune_ratio=0.9)
    text = (f"[model]\npath = {json.dumps(model)}\n\n"
            f"[data]\npath = {json.dumps(data)}\nformat = \"alpaca\"\nsequence_len = 64\nval_set_size = 0.0\n\n"
            f"[train]\n{table(train)}\n[optimizer]\nname = \"adamw\"\nlr = {LR}\n\n"
            f"[scheduler]\n{table(scheduler)}\n[adapter]\n{table(adapter)}\n[[logger]]\nname = \"jsonl\"\n")
    path = os.path.join(out, name + ".toml")
    with open(path, "w") as f:
        f.write(text)
    return path


def logged_lrs(run_dir):
    return tt.train_metric(run_dir, "lr")


def check_run(name, lrs, scheduler, anneal, log):
    assert len(lrs) == STEPS, f"{name}: {len(lrs)} lr values logged, expected {STEPS}"
    sched = schedule_factors(scheduler)
    expected = [LR * sched[i] * jagged_factor(i, RELORA_STEPS, RELORA_WARMUP, anneal) for i in range(STEPS)]
    worst = max(abs(a - b) / b if b else abs(a) for a, b in zip(lrs, expected))
    for i, (a, b) in enumerate(zip(lrs, expected)):
        if abs(a - b) > 1e-12 * b or (b == 0 and a != 0):
            raise SystemExit(f"{name}: step {i + 1} lr {a!r}, expected {b!r}")
    for restart in (RELORA_STEPS, 2 * RELORA_STEPS):  # the jagged shape, stated plainly
        assert abs(lrs[restart] / (LR * sched[restart]) - 0.001) < 1e-12, f"{name}: no drop at step {restart + 1}"
        assert abs(lrs[restart + RELORA_WARMUP] / (LR * sched[restart + RELORA_WARMUP]) - 1) < 1e-12
    restarts = re.findall(r"adapter/relora: restart (\d+) after step (\d+):.*?; ([0-9.]+) s", log)
    assert [(int(k), int(s)) for k, s, _ in restarts] == [(1, 10), (2, 20)], f"{name}: restarts logged {restarts}"
    print(f"{name}: {STEPS} logged lrs equal schedule x jagged factor (worst relative difference {worst:.1e}); "
          f"restarts after steps 10 and 20 took {', '.join(t for _, _, t in restarts)} s")


def check_final_adapter(run_dir, model_path):
    from peft import PeftModel
    from transformers import LlamaForCausalLM
    with open(os.path.join(run_dir, "adapter_config.json")) as f:
        config = json.load(f)
    assert config["r"] == 12 and config["lora_alpha"] == 24, config
    base = LlamaForCausalLM.from_pretrained(model_path, torch_dtype=torch.float32)
    PeftModel.from_pretrained(base, run_dir)
    print("final adapter: 3 cycles saved as one LoRA of rank 12, loads in PEFT")


def check_resume(ftcore, out, model_path, data):
    scheduler, anneal = RUNS["cosine"]
    recipe = write_recipe(out, "resumed", model_path, data, scheduler, anneal, save_steps=5,
                          resume_from_checkpoint="auto")
    p = tt.run_ftcore(ftcore, recipe, env={"FTCORE_FAULT_KILL_IN_CHECKPOINT": "15"}, check=False)
    assert p.returncode in (-9, 137), f"fault injection did not kill the run (exit {p.returncode})"
    folder = os.path.join(out, "runs", "resumed")
    from safetensors.torch import load_file
    a = load_file(os.path.join(folder, "checkpoint-10", "adapter_model.safetensors"))
    rows = {t.shape[0] for k, t in a.items() if k.endswith("lora_A.weight")}
    assert rows == {8}, f"checkpoint-10 should hold 2 cycles of r 4, has A rows {rows}"
    p = tt.run_ftcore(ftcore, recipe)
    assert "merged 1 earlier cycle(s)" in p.stderr, p.stderr[-2000:]

    def read(name, file):
        with open(os.path.join(out, "runs", name, file), "rb") as f:
            return f.read()
    assert read("resumed", "adapter_model.safetensors") == read("cosine", "adapter_model.safetensors"), \
        "the resumed run's final adapter differs from the uninterrupted run's"
    assert logged_lrs(folder)[-20:] == logged_lrs(os.path.join(out, "runs", "cosine"))[-20:]
    assert tt.train_losses(folder)[-20:] == tt.train_losses(os.path.join(out, "runs", "cosine"))[-20:]
    print("resume: killed inside checkpoint-15's write, resumed from checkpoint-10 (1 merged cycle reloaded); "
          "final adapter byte-identical, lr and loss of steps 11-30 identical")


def write_svg(path, runs):
    """A plain SVG: lr against step for each run, restarts marked."""
    w, h, left, right, top, bottom = 640, 340, 70, 20, 72, 50
    top_lr = max(max(lrs) for lrs in runs.values()) * 1.05
    x = lambda step: left + (w - left - right) * (step - 1) / (STEPS - 1)  # noqa: E731
    y = lambda lr: top + (h - top - bottom) * (1 - lr / top_lr)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
           'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">adapter/relora learning rate: '
           f'relora_steps {RELORA_STEPS}, relora_warmup_steps {RELORA_WARMUP} (ftcore run, metrics.jsonl)</text>',
           f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>']
    for step in (1, 10, 11, 20, 21, 30):
        out.append(f'<text x="{x(step):.1f}" y="{h - bottom + 16}" text-anchor="middle">{step}</text>')
    for restart in (RELORA_STEPS, 2 * RELORA_STEPS):
        xr = (x(restart) + x(restart + 1)) / 2
        out.append(f'<line x1="{xr:.1f}" y1="{top}" x2="{xr:.1f}" y2="{h - bottom}" stroke="#999" '
                   'stroke-dasharray="4 3"/>')
    for lr in (0.0, LR / 2, LR):
        out.append(f'<text x="{left - 6}" y="{y(lr) + 4:.1f}" text-anchor="end">{lr:g}</text>')
    out.append(f'<text x="{(left + w - right) / 2}" y="{h - 12}" text-anchor="middle">optimizer step</text>')
    colours = {"cosine": "#1f77b4", "constant": "#d62728"}
    for i, (name, lrs) in enumerate(runs.items()):
        points = " ".join(f"{x(s + 1):.1f},{y(lr):.1f}" for s, lr in enumerate(lrs))
        out.append(f'<polyline fill="none" stroke="{colours[name]}" stroke-width="2" points="{points}"/>')
        label = (f"{name}: {RUNS[name][0]['name']} schedule"
                 + (f", warmup {RUNS[name][0].get('warmup_steps')}" if "warmup_steps" in RUNS[name][0] else "")
                 + f", relora_anneal_steps {RUNS[name][1]}")
        out.append(f'<text x="{w - right}" y="{40 + 16 * i}" text-anchor="end" '
                   f'fill="{colours[name]}">{label}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {path}")


def main():
    ftcore = sys.argv[1]
    svg = sys.argv[sys.argv.index("--svg") + 1] if "--svg" in sys.argv else None
    tt.require_default_tokenizer()
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as out:
        model_path = tt.make_model(out)
        data = tt.make_data(out)
        runs = {}
        for name, (scheduler, anneal) in RUNS.items():
            recipe = write_recipe(out, name, model_path, data, scheduler, anneal)
            p = tt.run_ftcore(ftcore, recipe)
            run_dir = os.path.join(out, "runs", name)
            runs[name] = logged_lrs(run_dir)
            check_run(name, runs[name], scheduler, anneal, p.stderr + p.stdout)
            if name == "cosine":
                check_final_adapter(run_dir, model_path)
        check_resume(ftcore, out, model_path, data)
        if svg:
            write_svg(svg, runs)


if __name__ == "__main__":
    main()
