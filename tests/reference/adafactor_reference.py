"""optimizer/adafactor against transformers.optimization.Adafactor.

For several configurations, ftcore's plugin and transformers' Adafactor run
50 steps on identical parameters and gradients, for each ISA variant of the
fused kernel. Parameters are 0-D to 4-D (factored statistics for
>= 2 dims), large enough that the column statistics are summed over several
chunks, and one of them has no gradient on some steps.

  defaults        relative_step, scale_parameter, lr unset
  warmup_init     relative step min(1e-6*t, 1/sqrt(t)), with weight decay
  beta1_wd        fixed lr, beta1 (exp_avg), weight decay
  unscaled        fixed lr, scale_parameter off, clip_threshold 0.5, decay_rate -0.5, other eps
  groups          fixed lr, two groups (lr_scale 4 and 1; the second overrides weight decay), beta1
  relative_beta1  relative_step with beta1 and weight decay
  bf16            the defaults on bfloat16 parameters (transformers computes in fp32, rounds once)

Tolerances. fp32: every parameter tensor and every state tensor within
1e-6 relative in the max norm, max|ours - ref| <= 1e-6 * max|ref|. The
elementwise fp32 operations round as transformers' do; the only difference is
in the sums: transformers takes norm() and mean() in fp32 with ATen's
reduction order, ftcore in double (so its bits do not depend on the thread
count or the ISA). RMS(p), RMS(update) and the row and column means therefore
differ by a few ulps, the step size with them, and 50 steps carry that along;
the measured worst errors are printed (about 2e-7 on parameters, up to 6e-7 on
state such as exp_avg, which sums 50 such steps). An elementwise relative test
would be the wrong measure: elements crossing zero have no relative scale.
bf16: transformers rounds the fp32 result to bf16 once per step, and so does
ftcore, so a few-ulp fp32 difference flips that rounding on a few elements,
by one bf16 ulp of the element's size at that step; later steps carry the
difference along (it can move by an ulp at a time), including through zero.
So the measure is scale-relative again: max|ours - ref| <= 2 bf16 ulps of
max|ref| (2 * 2^(floor(log2 max|ref|) - 7)), and at most 1% of elements may
differ at all (the counts are printed).

The three ISA variants must agree with each other bit for bit (the sums do
not depend on the ISA).

That the sums are the only difference is checked, too: transformers' Adafactor
is run a second time with its two reductions (Adafactor._rms and
Tensor.mean) replaced, for the length of that run, by double-precision sums
rounded to fp32 as ftcore takes them; then parameters and state must be
bit-identical to ftcore's, in every configuration including bf16.

Then resume: 25 steps, save parameters and optimizer state, continue 25 steps
in a FRESH process; the result must equal the uninterrupted 50 steps bit for bit.

usage: adafactor_reference.py FTCORE_BINARY   (its `ftcore plugin steps` drives the optimizer)
"""
import contextlib
import json
import os
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file
from transformers.optimization import Adafactor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from optimizer_steps_client import run_optimizer_steps  # noqa: E402

STEPS = 50
RTOL = 1e-6
BF16_ULPS = 2
BF16_MAX_DIFFERING = 0.01
SHAPES = {"w.a": (64, 32), "w.b": (32,), "w.c": (3, 5, 7), "w.d": (1,), "w.e": (300, 257),
          "w.f": (4, 40, 600), "w.g": (70000,), "w.h": (2, 3, 4, 5), "w.i": (1, 64), "w.j": (64, 1), "w.k": ()}
ALL = [{"name": "all", "params": list(SHAPES)}]

CONFIGS = [
    {"name": "defaults", "opts": {}, "groups": ALL},
    {"name": "warmup_init", "opts": {"warmup_init": True, "weight_decay": 0.1}, "groups": ALL},
    {"name": "beta1_wd", "opts": {"relative_step": False, "lr": 1e-2, "beta1": 0.9, "weight_decay": 0.01},
     "groups": ALL},
    {"name": "unscaled", "opts": {"relative_step": False, "lr": 3e-3, "scale_parameter": False,
                                  "clip_threshold": 0.5, "decay_rate": -0.5, "eps": (1e-20, 1e-2)},
     "groups": ALL},
    {"name": "groups", "opts": {"relative_step": False, "lr": 1e-3, "beta1": 0.8, "weight_decay": 0.05},
     "groups": [{"name": "a", "params": ["w.a", "w.c", "w.f", "w.i"], "lr_scale": 4.0},
                {"name": "b", "params": ["w.b", "w.d", "w.e", "w.g", "w.h", "w.j", "w.k"], "weight_decay": 0.0}]},
    {"name": "relative_beta1", "opts": {"beta1": 0.5, "weight_decay": 0.02}, "groups": ALL},
    {"name": "bf16", "opts": {}, "groups": ALL, "dtype": torch.bfloat16},
]
STATE_SLOTS = ("exp_avg_sq_row", "exp_avg_sq_col", "exp_avg_sq", "exp_avg")


def make_inputs(seed, dtype):
    g = torch.Generator().manual_seed(seed)
    tensors = {f"param.{n}": torch.randn(s, generator=g).to(dtype) for n, s in SHAPES.items()}
    for step in range(STEPS):
        for n, s in SHAPES.items():
            if n == "w.d" and step % 7 == 3:
                continue  # no gradient this step: both sides must skip it
            tensors[f"grad.{step}.{n}"] = (torch.randn(s, generator=g) * (0.1 + step / STEPS)).to(dtype)
    return tensors


@contextlib.contextmanager
def double_precision_sums():
    """Adafactor's norm and means as ftcore takes them: in double, rounded to fp32 once."""
    mean, rms = torch.Tensor.mean, Adafactor._rms

    def mean_in_double(self, dim, keepdim=False):
        return self.double().sum(dim=dim, keepdim=keepdim).float() / self.shape[dim]

    torch.Tensor.mean = mean_in_double
    Adafactor._rms = staticmethod(lambda t: t.double().square().sum().sqrt().float() / (t.numel() ** 0.5))
    try:
        yield
    finally:
        torch.Tensor.mean, Adafactor._rms = mean, staticmethod(rms)


def transformers_run(tensors, config):
    opts = {"lr": None, "eps": (1e-30, 1e-3), "clip_threshold": 1.0, "decay_rate": -0.8, "beta1": None,
            "weight_decay": 0.0, "scale_parameter": True, "relative_step": True, "warmup_init": False}
    opts.update(config["opts"])
    params = {n: tensors[f"param.{n}"].clone().requires_grad_(True) for n in SHAPES}
    groups = []
    for g in config["groups"]:
        group = {"params": [params[n] for n in g["params"]]}
        if opts["lr"] is not None:
            group["lr"] = opts["lr"] * g.get("lr_scale", 1.0)
        if "weight_decay" in g:
            group["weight_decay"] = g["weight_decay"]
        groups.append(group)
    optimizer = Adafactor(groups, **opts)
    for step in range(STEPS):
        for n, p in params.items():
            key = f"grad.{step}.{n}"
            p.grad = tensors[key].clone() if key in tensors else None
        optimizer.step()
    state = {f"{n}.{slot}": optimizer.state[p][slot] for n, p in params.items() for slot in STATE_SLOTS
             if slot in optimizer.state[p]}
    return {n: p.detach() for n, p in params.items()}, state


def run_ftcore(binary, inputs, out, opts, extra=(), env=None):
    return run_optimizer_steps(binary, "adafactor", inputs, out, opts, extra, env)


def relative_error(got, ref):
    return ((got.double() - ref.double()).abs().max() / ref.double().abs().max()).item()


def compare_fp32(label, ours, state, reference, ref_state, failures):
    worst_p = max(relative_error(ours[f"param.{n}"], ref) for n, ref in reference.items())
    worst_s = 0.0
    for key, ref in ref_state.items():
        if f"state.{key}" not in state:
            failures.append(f"{label}: ftcore saved no state tensor {key}")
            continue
        worst_s = max(worst_s, relative_error(state[f"state.{key}"], ref))
    extra = {k[len("state."):] for k in state if k.startswith("state.") and not k.endswith(".step")} - set(ref_state)
    if extra:
        failures.append(f"{label}: ftcore saved state tensors transformers does not keep: {sorted(extra)}")
    if worst_p > RTOL or worst_s > RTOL:
        failures.append(f"{label}: worst relative error params {worst_p:.3e}, state {worst_s:.3e} > {RTOL:.0e}")
    print(f"{label:24s} worst relative error: params {worst_p:.2e}, state {worst_s:.2e} (tolerance {RTOL:.0e})")


def compare_exact(label, ours, state, reference, ref_state, failures):
    same = all(torch.equal(ours[f"param.{n}"], ref) for n, ref in reference.items()) and \
        all(torch.equal(state[f"state.{k}"], ref) for k, ref in ref_state.items())
    if not same:
        failures.append(f"{label}: not bit-identical to transformers with double-precision sums")
    print(f"{label:24s} bit-identical to transformers with double-precision sums: {same}")


def compare_bf16(label, ours, reference, failures):
    differing = total = 0
    worst_ulps = 0.0
    for n, ref in reference.items():
        got = ours[f"param.{n}"]
        top_ulp = 2.0 ** (torch.floor(torch.log2(ref.float().abs().max())).item() - 7)  # bf16: 8 significant bits
        worst_ulps = max(worst_ulps, ((got.float() - ref.float()).abs().max() / top_ulp).item())
        differing += int((got != ref).sum())
        total += ref.numel()
    if worst_ulps > BF16_ULPS or differing > BF16_MAX_DIFFERING * total:
        failures.append(f"{label}: {differing}/{total} bf16 elements differ, "
                        f"worst by {worst_ulps:.1f} ulps of max|ref|")
    print(f"{label:24s} bf16 elements differing {differing}/{total}, worst by {worst_ulps:.1f} ulps of max|ref| "
          f"(tolerance {BF16_ULPS} ulps, {BF16_MAX_DIFFERING:.0%} of elements)")


def main():
    binary = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, config in enumerate(CONFIGS):
            dtype = config.get("dtype", torch.float32)
            tensors = make_inputs(3000 + i, dtype)
            inputs = os.path.join(tmp, f"in_{i}.safetensors")
            save_file(tensors, inputs, metadata={"groups": json.dumps(config["groups"])})
            reference, ref_state = transformers_run(tensors, config)
            with double_precision_sums():
                exact_reference, exact_state = transformers_run(tensors, config)
            state_path = os.path.join(tmp, "state_full.safetensors")
            outputs = {}
            for isa in ("generic", "avx2", "avx512"):
                env = dict(os.environ, FTCORE_CPU_ISA=isa)
                ours = run_ftcore(binary, inputs, os.path.join(tmp, f"out_{isa}.safetensors"), config["opts"],
                                  ["--steps", str(STEPS), "--save-state", state_path], env)
                outputs[isa] = ours
                label = f"{config['name']}/{isa}"
                ours_state = load_file(state_path)
                if dtype == torch.float32:
                    compare_fp32(label, ours, ours_state, reference, ref_state, failures)
                else:
                    compare_bf16(label, ours, reference, failures)
                compare_exact(label, ours, ours_state, exact_reference, exact_state, failures)
            # Sums in double over fixed lanes: the ISA variants must agree bit for bit.
            if not all(torch.equal(o[k], outputs["generic"][k]) for o in outputs.values() for k in o):
                failures.append(f"{config['name']}: the ISA variants do not agree bit for bit")

            # Resume in a fresh process (default ISA): bit-identical to the uninterrupted run.
            full = outputs["generic"]
            state = os.path.join(tmp, "state.safetensors")
            run_ftcore(binary, inputs, os.path.join(tmp, "half.safetensors"), config["opts"],
                       ["--steps", str(STEPS // 2), "--save-state", state])
            resumed = run_ftcore(binary, inputs, os.path.join(tmp, "resumed.safetensors"), config["opts"],
                                 ["--resume", state, "--first-step", str(STEPS // 2), "--steps",
                                  str(STEPS - STEPS // 2)])
            exact = all(torch.equal(full[f"param.{n}"], resumed[f"param.{n}"]) for n in SHAPES)
            if not exact:
                failures.append(f"{config['name']}: the resumed run is not bit-identical to the uninterrupted run")
            print(f"{config['name'] + '/resume':24s} bit-identical: {exact}")
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print(f"{len(CONFIGS)} configurations x 3 ISA variants match transformers' Adafactor (fp32 rtol {RTOL}, "
          f"bf16 within {BF16_ULPS} ulps; bit-exact with double-precision sums); resume bit-exact")


if __name__ == "__main__":
    main()
