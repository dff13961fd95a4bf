"""optimizer/lion against lion-pytorch's Lion (https://github.com/lucidrains/lion-pytorch).

For several configurations (defaults; weight decay; two param groups with
different lr_scale and a weight_decay override; decoupled_weight_decay with
small betas; parameters without a gradient on some steps) ftcore's plugin and
lion_pytorch.Lion run 50 steps on identical fp32 parameters and gradients, for
each ISA variant of the fused kernel.

What is compared, and why it can be exact: the kernel performs lion-pytorch's
fp32 operations in its order with its roundings (ATen's add(alpha) is one
fused multiply-add, in vector and scalar code alike), so the momentum, the
pre-sign quantity c = beta1*m + (1-beta1)*g and the parameters are expected
to be bit-identical; the counts of bit-identical elements are printed.

What must hold for the test to pass:
  * momentum (exp_avg, read back with --save-state): max|ours - ref| <= 1e-6 * max|ref|.
  * parameters: every element within 1e-6 * max|ref| of the reference, except
    elements whose update sign flipped. A flip moves an element by 2*lr, so it
    cannot hide in a norm; it is only legitimate where the reference's c was
    within a few ulps of zero (|c| <= 4 * 2^-23 * (|beta1*m| + |(1-beta1)*g|))
    at some step, since m and g agree. Flips elsewhere fail the test, and the
    number of flips is printed (0 on x86-64 with AVX2 or AVX-512).

Then resume: 25 steps, save parameters and optimizer state, continue 25 steps
in a FRESH process; the result must equal the uninterrupted 50 steps bit for bit.

usage: lion_reference.py FTCORE_BINARY   (its `ftcore plugin steps` drives the optimizer)
"""
import json
import os
import sys
import tempfile

import torch
from lion_pytorch import Lion
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from optimizer_steps_client import run_optimizer_steps  # noqa: E402

STEPS = 50
RTOL = 1e-6
FLIP_ULPS = 4 * 2.0 ** -23
SHAPES = {"w.a": (64, 32), "w.b": (32,), "w.c": (3, 5, 7), "w.d": (1,), "w.e": (300, 257)}
ALL = [{"name": "all", "params": list(SHAPES)}]

CONFIGS = [
    {"name": "defaults", "opts": {}, "groups": ALL},
    {"name": "weight_decay", "opts": {"lr": 3e-4, "weight_decay": 0.1}, "groups": ALL},
    {"name": "groups", "opts": {"lr": 2e-4, "weight_decay": 0.05},
     "groups": [{"name": "a", "params": ["w.a", "w.c"], "lr_scale": 16.0},
                {"name": "b", "params": ["w.b", "w.d", "w.e"], "lr_scale": 0.5, "weight_decay": 0.0}]},
    {"name": "decoupled_wd", "opts": {"lr": 1e-3, "betas": (0.5, 0.9), "weight_decay": 1e-4,
                                      "decoupled_weight_decay": True}, "groups": ALL},
]


def make_inputs(seed):
    g = torch.Generator().manual_seed(seed)
    tensors = {f"param.{n}": torch.randn(s, generator=g) for n, s in SHAPES.items()}
    for step in range(STEPS):
        for n, s in SHAPES.items():
            if n == "w.d" and step % 7 == 3:
                continue  # no gradient this step: both sides must skip it
            tensors[f"grad.{step}.{n}"] = torch.randn(s, generator=g) * (0.1 + step / STEPS)
    return tensors


def reference_run(tensors, config):
    """lion_pytorch.Lion on the inputs; also the per-element smallest |c| relative to its terms."""
    opts = {"lr": 1e-4, "betas": (0.9, 0.99), "weight_decay": 0.0, "decoupled_weight_decay": False}
    opts.update(config["opts"])
    params = {n: tensors[f"param.{n}"].clone().requires_grad_(True) for n in SHAPES}
    groups = []
    for g in config["groups"]:
        group = {"params": [params[n] for n in g["params"]], "lr": opts["lr"] * g.get("lr_scale", 1.0)}
        if "weight_decay" in g:
            group["weight_decay"] = g["weight_decay"]
        groups.append(group)
    optimizer = Lion(groups, lr=opts["lr"], betas=opts["betas"], weight_decay=opts["weight_decay"],
                     decoupled_weight_decay=opts["decoupled_weight_decay"])
    beta1 = opts["betas"][0]
    margin = {n: torch.full(s, float("inf")) for n, s in SHAPES.items()}
    for step in range(STEPS):
        for n, p in params.items():
            key = f"grad.{step}.{n}"
            p.grad = tensors[key].clone() if key in tensors else None
            if p.grad is not None:
                m = optimizer.state[p]["exp_avg"] if optimizer.state[p] else torch.zeros_like(p)
                c = m.clone().mul_(beta1).add(p.grad, alpha=1 - beta1)  # lion-pytorch's own ops
                scale = (m * beta1).abs() + (p.grad * (1 - beta1)).abs()
                margin[n] = torch.minimum(margin[n], c.abs() / scale.clamp_min(1e-38))
        optimizer.step()
    exp_avg = {n: optimizer.state[p]["exp_avg"] for n, p in params.items()}
    return {n: p.detach() for n, p in params.items()}, exp_avg, margin


def run_ftcore(binary, inputs, out, opts, extra=(), env=None):
    return run_optimizer_steps(binary, "lion", inputs, out, opts, extra, env)


def compare(config, isa, ours, state, reference, exp_avg, margin, failures):
    worst_p = worst_m = 0.0
    flips = same = total = 0
    for n, ref in reference.items():
        got = ours[f"param.{n}"]
        bad = (got - ref).abs() > RTOL * ref.abs().max()
        unexplained = bad & (margin[n] > FLIP_ULPS)
        flips += int(bad.sum())
        if unexplained.any():
            failures.append(f"{config['name']}/{isa}: {n}: {int(unexplained.sum())} elements differ by more than "
                            f"{RTOL:.0e} relative where the reference's sign(c) was not ambiguous")
        if (~bad).any():
            worst_p = max(worst_p, ((got - ref).abs()[~bad].max() / ref.abs().max()).item())
        same += int((got == ref).sum())
        total += ref.numel()
        m_ref, m_got = exp_avg[n], state[f"state.{n}.exp_avg"]
        err = ((m_got - m_ref).abs().max() / m_ref.abs().max()).item()
        worst_m = max(worst_m, err)
        if err > RTOL:
            failures.append(f"{config['name']}/{isa}: {n}.exp_avg differs: relative max error {err:.3e}")
    print(f"{config['name']:13s} {isa:8s} params: worst relative error {worst_p:.2e}, bit-identical {same}/{total}, "
          f"sign flips {flips}; exp_avg worst relative error {worst_m:.2e} (tolerance {RTOL:.0e})")


def main():
    binary = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, config in enumerate(CONFIGS):
            tensors = make_inputs(seed=2000 + i)
            inputs = os.path.join(tmp, f"in_{i}.safetensors")
            save_file(tensors, inputs, metadata={"groups": json.dumps(config["groups"])})
            reference, exp_avg, margin = reference_run(tensors, config)
            state_path = os.path.join(tmp, "state_full.safetensors")
            for isa in ("generic", "avx2", "avx512"):
                env = dict(os.environ, FTCORE_CPU_ISA=isa)
                ours = run_ftcore(binary, inputs, os.path.join(tmp, "out.safetensors"), config["opts"],
                                  ["--steps", str(STEPS), "--save-state", state_path], env)
                compare(config, isa, ours, load_file(state_path), reference, exp_avg, margin, failures)

            # Resume in a fresh process: bit-identical to the uninterrupted run.
            full = run_ftcore(binary, inputs, os.path.join(tmp, "full.safetensors"), config["opts"],
                              ["--steps", str(STEPS)])
            state = os.path.join(tmp, "state.safetensors")
            run_ftcore(binary, inputs, os.path.join(tmp, "half.safetensors"), config["opts"],
                       ["--steps", str(STEPS // 2), "--save-state", state])
            resumed = run_ftcore(binary, inputs, os.path.join(tmp, "resumed.safetensors"), config["opts"],
                                 ["--resume", state, "--first-step", str(STEPS // 2), "--steps",
                                  str(STEPS - STEPS // 2)])
            exact = all(torch.equal(full[f"param.{n}"], resumed[f"param.{n}"]) for n in SHAPES)
            if not exact:
                failures.append(f"{config['name']}: the resumed run is not bit-identical to the uninterrupted run")
            print(f"{config['name']:13s} resume   bit-identical: {exact}")
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print(f"{len(CONFIGS)} configurations x 3 ISA variants match lion_pytorch.Lion (rtol {RTOL}, sign flips only "
          f"where c is within {FLIP_ULPS / 2.0 ** -23:.0f} ulps of zero); resume bit-exact")


if __name__ == "__main__":
    main()
