"""Reference lr factors for scheduler_reference_test.cpp, from the libraries
users trust: transformers' get_*_schedule_with_warmup lambdas and torch's
OneCycleLR, computed now, at test time.

Input: a JSON list (argv[1], or stdin when no argument) of
  {"id": str, "scheduler": ftcore name, "total": T, "base_lr": lr,
   "options": {only the keys the recipe sets}}
Output: a JSON list of {"id": str, "factors": [f(0), ..., f(T-1)]}, where
f(k) multiplies the base lr for the optimizer step numbered k (0-based):
  - LambdaLR schedules: the lambda's value at k;
  - OneCycleLR: the lr the optimizer holds for its k-th step, / max_lr.

Options the recipe leaves unset are NOT passed on, so the references' own
defaults apply: the test also checks that ftcore's defaults are theirs.

Two things have no library to compare with, and are written here from their
definitions, independently of the C++:
  - quadratic warmup (ftcore warmup_type = "quadratic"; Axolotl's
    lr_quadratic_warmup): (k / max(1, W))^2 during warmup;
  - Axolotl's cosine_constant_lr_ratio (Axolotl is not installed here): its
    curve is transformers' min-lr cosine run to C = int(T r) steps and held
    at its value at C, which is how it is built from transformers below.
"""

import json
import math
import sys
import types

import torch
from torch.optim.lr_scheduler import OneCycleLR
from transformers import optimization as hf
from transformers.training_args import TrainingArguments

# ftcore's own default, with no counterpart: transformers' get_wsd_schedule
# requires num_decay_steps.
FTCORE_DEFAULT_DECAY_RATIO = 0.1


def resolve_warmup(options, total):
    """Warmup steps as the HF Trainer resolves them (warmup_steps < 1 is a ratio, ceil(total x ratio))."""
    value = options.get("warmup_ratio", options.get("warmup_steps", 0))
    return TrainingArguments.get_warmup_steps(types.SimpleNamespace(warmup_steps=value), total)


def has_warmup_key(options):
    return "warmup_steps" in options or "warmup_ratio" in options


def make_optimizer(base_lr):
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=base_lr)


def picked(options, *keys):
    return {k: options[k] for k in keys if k in options}


def lambda_values(scheduler, total, at=lambda k: k):
    lam = scheduler.lr_lambdas[0]
    return [float(lam(at(k))) for k in range(total)]


def hf_factors(name, total, base_lr, o, warmup):
    opt = make_optimizer(base_lr)
    if name == "constant" and not has_warmup_key(o):
        return lambda_values(hf.get_constant_schedule(opt), total)
    if name in ("constant", "constant_with_warmup"):
        return lambda_values(hf.get_constant_schedule_with_warmup(opt, warmup), total)
    if name == "linear":
        return lambda_values(hf.get_linear_schedule_with_warmup(opt, warmup, total), total)
    if name == "cosine":
        cycles = picked(o, "num_cycles")
        if "cosine_constant_lr_ratio" in o:
            hold = int(total * o["cosine_constant_lr_ratio"])  # Axolotl's hold point
            s = hf.get_cosine_with_min_lr_schedule_with_warmup(
                opt, warmup, hold, min_lr_rate=o.get("cosine_min_lr_ratio", 0.0), **cycles)
            return lambda_values(s, total, at=lambda k: min(k, hold))
        if "cosine_min_lr_ratio" in o:
            s = hf.get_cosine_with_min_lr_schedule_with_warmup(
                opt, warmup, total, min_lr_rate=o["cosine_min_lr_ratio"], **cycles)
            return lambda_values(s, total)
        return lambda_values(hf.get_cosine_schedule_with_warmup(opt, warmup, total, **cycles), total)
    if name == "cosine_with_restarts":
        s = hf.get_cosine_with_hard_restarts_schedule_with_warmup(opt, warmup, total, **picked(o, "num_cycles"))
        return lambda_values(s, total)
    if name == "polynomial":
        s = hf.get_polynomial_decay_schedule_with_warmup(opt, warmup, total, **picked(o, "lr_end", "power"))
        return lambda_values(s, total)
    if name == "inverse_sqrt":
        return lambda_values(hf.get_inverse_sqrt_schedule(opt, warmup, **picked(o, "timescale")), total)
    if name == "warmup_stable_decay":
        if "num_decay_steps" in o:
            decay = o["num_decay_steps"]
        else:  # ftcore's decay_ratio resolves like warmup_ratio: ceil(total x ratio)
            decay = math.ceil(total * o.get("decay_ratio", FTCORE_DEFAULT_DECAY_RATIO))
        s = hf.get_wsd_schedule(opt, warmup, decay, num_training_steps=total,
                                **picked(o, "num_stable_steps", "decay_type", "min_lr_ratio", "num_cycles"))
        return lambda_values(s, total)
    if name == "one_cycle":
        return one_cycle_factors(total, base_lr, o, warmup)
    raise ValueError(f"no reference for scheduler {name!r}")


def one_cycle_factors(total, base_lr, o, warmup):
    opt = make_optimizer(base_lr)
    kwargs = picked(o, "pct_start", "anneal_strategy", "div_factor", "final_div_factor", "three_phase")
    if has_warmup_key(o):
        kwargs["pct_start"] = warmup / total  # Axolotl's mapping of warmup onto OneCycleLR
    # cycle_momentum only moves momentum, never the lr; off, so SGD needs none.
    scheduler = OneCycleLR(opt, max_lr=base_lr, total_steps=total, cycle_momentum=False, **kwargs)
    factors = []
    for k in range(total):
        factors.append(opt.param_groups[0]["lr"] / base_lr)
        opt.step()
        if k + 1 < total:  # OneCycleLR refuses to step past total_steps
            scheduler.step()
    return factors


def apply_quadratic_warmup(factors, warmup, floor=0.0):
    """Replaces the warmup steps by (k / max(1, W))^2, raised from `floor` as WSD raises its ramp."""
    for k in range(min(warmup, len(factors))):
        ramp = (k / max(1, warmup)) ** 2
        factors[k] = max(0.0, ramp * (1.0 - floor) + floor)
    return factors


def reference(config):
    name, total, base_lr, o = config["scheduler"], config["total"], config["base_lr"], config["options"]
    warmup = resolve_warmup(o, total)
    factors = hf_factors(name, total, base_lr, o, warmup)
    if o.get("warmup_type") == "quadratic":
        floor = o.get("min_lr_ratio", 0.0) if name == "warmup_stable_decay" else 0.0
        factors = apply_quadratic_warmup(factors, warmup, floor)
    return {"id": config["id"], "factors": factors}


def main():
    configs = json.loads(sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read())
    json.dump([reference(c) for c in configs], sys.stdout)


if __name__ == "__main__":
    main()
