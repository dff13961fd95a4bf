"""optimizer/adamw against torch.optim.AdamW (the same libtorch, from Python).

For several configurations (defaults, AMSGrad with weight decay, small betas
that take torch's other lerp branch, param groups with lr_scale and a
weight_decay override, parameters without a gradient on some steps) ftcore's
plugin and torch.optim.AdamW run 50 steps on identical parameters and
gradients; every parameter tensor must agree within 1e-6 relative in the max
norm: max|ours - torch| <= 1e-6 * max|torch|. (Per element the two differ by
an ulp or two: ATen computes the tail of each thread's range with scalar code
that rounds its lerp differently from its vectorized FMA, and 50 steps carry
those ulps along; an elementwise relative test would fail on elements that
cross zero.) Each ISA variant of the fused kernel is run.

Then resume: 25 steps, save parameters and optimizer state, continue 25 steps
in a FRESH process; the result must equal the uninterrupted 50 steps bit for bit.

usage: adamw_reference.py FTCORE_BINARY   (its `ftcore plugin steps` drives the optimizer)
"""
import json
import os
import sys
import tempfile

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from optimizer_steps_client import run_optimizer_steps  # noqa: E402

STEPS = 50
RTOL = 1e-6
SHAPES = {"w.a": (64, 32), "w.b": (32,), "w.c": (3, 5, 7), "w.d": (1,), "w.e": (300, 257)}

CONFIGS = [
    {"name": "defaults", "opts": {}, "groups": [{"name": "all", "params": list(SHAPES)}]},
    {"name": "amsgrad_wd", "opts": {"lr": 3e-3, "weight_decay": 0.1, "amsgrad": True},
     "groups": [{"name": "all", "params": list(SHAPES)}]},
    {"name": "low_beta1", "opts": {"lr": 1e-2, "betas": (0.3, 0.95), "eps": 1e-6},
     "groups": [{"name": "all", "params": list(SHAPES)}]},
    {"name": "groups", "opts": {"lr": 2e-3, "weight_decay": 0.05},
     "groups": [{"name": "a", "params": ["w.a", "w.c"], "lr_scale": 16.0},
                {"name": "b", "params": ["w.b", "w.d", "w.e"], "weight_decay": 0.0}]},
]


def make_inputs(path, seed):
    g = torch.Generator().manual_seed(seed)
    tensors = {f"param.{n}": torch.randn(s, generator=g) for n, s in SHAPES.items()}
    for step in range(STEPS):
        for n, s in SHAPES.items():
            if n == "w.d" and step % 7 == 3:
                continue  # no gradient this step: both sides must skip it
            tensors[f"grad.{step}.{n}"] = torch.randn(s, generator=g) * (0.1 + step / STEPS)
    return tensors


def torch_reference(tensors, config, shapes=SHAPES, steps=STEPS):
    """torch.optim.AdamW over `steps` steps of the inputs (also used by paged_adamw_reference.py)."""
    opts = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01, "amsgrad": False}
    opts.update(config["opts"])
    params = {n: tensors[f"param.{n}"].clone().requires_grad_(True) for n in shapes}
    groups = []
    for g in config["groups"]:
        group = {"params": [params[n] for n in g["params"]], "lr": opts["lr"] * g.get("lr_scale", 1.0)}
        if "weight_decay" in g:
            group["weight_decay"] = g["weight_decay"]
        groups.append(group)
    optimizer = torch.optim.AdamW(groups, lr=opts["lr"], betas=opts["betas"], eps=opts["eps"],
                                  weight_decay=opts["weight_decay"], amsgrad=opts["amsgrad"])
    for step in range(steps):
        for n, p in params.items():
            key = f"grad.{step}.{n}"
            p.grad = tensors[key].clone() if key in tensors else None
        optimizer.step()
    return {n: p.detach() for n, p in params.items()}


def run_ftcore(binary, inputs, out, opts, extra=(), env=None):
    return run_optimizer_steps(binary, "adamw", inputs, out, opts, extra, env)


def main():
    binary = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, config in enumerate(CONFIGS):
            tensors = make_inputs(os.path.join(tmp, "in.safetensors"), seed=1000 + i)
            inputs = os.path.join(tmp, f"in_{i}.safetensors")
            save_file(tensors, inputs, metadata={"groups": json.dumps(config["groups"])})
            reference = torch_reference(tensors, config)
            for isa in ("generic", "avx2", "avx512"):
                env = dict(os.environ, FTCORE_CPU_ISA=isa)
                ours = run_ftcore(binary, inputs, os.path.join(tmp, "out.safetensors"), config["opts"],
                                  ["--steps", str(STEPS)], env)
                worst = 0.0
                for n, ref in reference.items():
                    got = ours[f"param.{n}"]
                    err = ((got - ref).abs().max() / ref.abs().max()).item()
                    worst = max(worst, err)
                    if err > RTOL:
                        failures.append(f"{config['name']}/{isa}: {n} differs: max abs "
                                        f"{(got - ref).abs().max().item():.3e}")
                print(f"{config['name']:12s} {isa:8s} worst relative error {worst:.2e} (tolerance {RTOL:.0e})")

            # Resume in a fresh process: bit-identical to the uninterrupted run.
            full = run_ftcore(binary, inputs, os.path.join(tmp, "full.safetensors"), config["opts"],
                              ["--steps", str(STEPS)])
            state = os.path.join(tmp, "state.safetensors")
            run_ftcore(binary, inputs, os.path.join(tmp, "half.safetensors"), config["opts"],
                       ["--steps", str(STEPS // 2), "--save-state", state])
            resumed = run_ftcore(binary, inputs, os.path.join(tmp, "resumed.safetensors"), config["opts"],
                                 ["--resume", state, "--first-step", str(STEPS // 2), "--steps",
                                  str(STEPS - STEPS // 2)])
            for n in SHAPES:
                if not torch.equal(full[f"param.{n}"], resumed[f"param.{n}"]):
                    failures.append(f"{config['name']}: resumed {n} is not bit-identical to the uninterrupted run")
            print(f"{config['name']:12s} resume   bit-identical: {not any('resumed' in f for f in failures)}")
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print(f"{len(CONFIGS)} configurations x 3 ISA variants match torch.optim.AdamW (rtol {RTOL}); resume bit-exact")


if __name__ == "__main__":
    main()
