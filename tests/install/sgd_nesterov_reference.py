"""The out-of-tree example optimizer/sgd_nesterov against torch.optim.SGD.

Run by install_and_example_test.sh with FTCORE_PLUGIN_PATH naming the
example's build folder (built against the INSTALLED ftcore), so the plugin
that `ftcore plugin steps` loads is the out-of-tree one.

For each configuration, ftcore's plugin and torch.optim.SGD (same libtorch,
single-tensor path, the same thread count) run 30 steps on identical
parameters and gradients. Every parameter tensor must agree within
    max|ours - torch| <= 1e-6 * max|torch|         (relative, in the max norm)
The plugin performs the same ATen operations in the same order as torch, so
the measured error is expected to be 0 (bit-identical); the tolerance only
leaves room for a different CPU kernel choice between the two processes.

Configurations: Nesterov with weight decay and two param groups with
different lr_scale (one also overrides weight_decay); classical momentum
with dampening. Some parameters have no gradient on some steps, one gets its
first gradient only after the resume point.

Then, per configuration: 15 steps, save parameters and optimizer state,
continue 15 steps in a FRESH process; the result must equal the uninterrupted
30 steps bit for bit. The saved state must carry the schema metadata and
"<name>.momentum_buffer" tensors equal to torch's momentum buffers. Finally,
nesterov with dampening must be refused with a message.

usage: sgd_nesterov_reference.py FTCORE_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from optimizer_steps_client import set_args, steps_command  # noqa: E402

STEPS = 30
RESUME_AT = 15
RTOL = 1e-6
THREADS = 2  # both sides: ATen's per-thread ranges decide where its scalar tails fall
SHAPES = {"w.a": (64, 32), "w.b": (33,), "w.c": (3, 5, 7), "w.d": (1,), "w.e": (300, 257), "w.late": (17, 3)}
LATE_START = 20  # w.late has no gradient before this step: no buffer in the saved state

CONFIGS = [
    {"name": "nesterov_wd_groups",
     "opts": {"lr": 0.01, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01},
     "groups": [{"name": "a", "params": ["w.a", "w.c", "w.late"], "lr_scale": 4.0},
                {"name": "b", "params": ["w.b", "w.d", "w.e"], "lr_scale": 0.25, "weight_decay": 0.1}]},
    {"name": "heavy_ball_damped",
     "opts": {"lr": 0.02, "momentum": 0.8, "nesterov": False, "dampening": 0.1, "weight_decay": 0.05},
     "groups": [{"name": "a", "params": ["w.a", "w.b", "w.c"], "lr_scale": 2.0},
                {"name": "b", "params": ["w.d", "w.e", "w.late"], "lr_scale": 0.5}]},
]
DEFAULTS = {"lr": 0.01, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.0, "nesterov": True}


def make_inputs(seed):
    g = torch.Generator().manual_seed(seed)
    tensors = {f"param.{n}": torch.randn(s, generator=g) for n, s in SHAPES.items()}
    for step in range(STEPS):
        for n, s in SHAPES.items():
            if n == "w.d" and step % 7 == 3:
                continue  # no gradient this step: both sides must skip it
            if n == "w.late" and step < LATE_START:
                continue
            tensors[f"grad.{step}.{n}"] = torch.randn(s, generator=g) * (0.1 + step / STEPS)
    return tensors


def torch_reference(tensors, config, steps):
    """Parameters and momentum buffers of torch.optim.SGD after `steps` steps."""
    opts = dict(DEFAULTS, **config["opts"])
    params = {n: tensors[f"param.{n}"].clone().requires_grad_(True) for n in SHAPES}
    groups = []
    for g in config["groups"]:
        group = {"params": [params[n] for n in g["params"]], "lr": opts["lr"] * g.get("lr_scale", 1.0)}
        if "weight_decay" in g:
            group["weight_decay"] = g["weight_decay"]
        groups.append(group)
    optimizer = torch.optim.SGD(groups, lr=opts["lr"], momentum=opts["momentum"], dampening=opts["dampening"],
                                weight_decay=opts["weight_decay"], nesterov=opts["nesterov"], foreach=False)
    for step in range(steps):
        for n, p in params.items():
            key = f"grad.{step}.{n}"
            p.grad = tensors[key].clone() if key in tensors else None
        optimizer.step()
    buffers = {n: optimizer.state[p]["momentum_buffer"] for n, p in params.items()
               if p in optimizer.state and optimizer.state[p].get("momentum_buffer") is not None}
    return {n: p.detach() for n, p in params.items()}, buffers


def run_steps(binary, inputs, out, opts, extra=()):
    cmd = [*steps_command(binary), "--optimizer", "sgd_nesterov", "--inputs", inputs, "--out", out, *set_args(opts), *extra]
    result = subprocess.run(cmd, capture_output=True, text=True)
    return result, cmd


def run_ok(binary, inputs, out, opts, extra=()):
    result, cmd = run_steps(binary, inputs, out, opts, extra)
    if result.returncode != 0:
        sys.exit(f"FAIL: ftcore plugin steps failed: {' '.join(cmd)}\n{result.stdout}{result.stderr}")
    return load_file(out)


def main():
    binary = sys.argv[1]
    torch.set_num_threads(THREADS)
    os.environ["FTCORE_NUM_THREADS"] = str(THREADS)
    failures = []
    worst_overall = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for i, config in enumerate(CONFIGS):
            name = config["name"]
            tensors = make_inputs(seed=2000 + i)
            inputs = os.path.join(tmp, f"in_{i}.safetensors")
            save_file(tensors, inputs, metadata={"groups": json.dumps(config["groups"])})

            # 1. 30 steps against torch.optim.SGD.
            reference, _ = torch_reference(tensors, config, STEPS)
            full = run_ok(binary, inputs, os.path.join(tmp, "full.safetensors"), config["opts"],
                          ["--steps", str(STEPS)])
            worst_rel, worst_abs, identical = 0.0, 0.0, True
            for n, ref in reference.items():
                got = full[f"param.{n}"]
                abs_err = (got - ref).abs().max().item()
                rel_err = abs_err / ref.abs().max().item()
                worst_rel, worst_abs = max(worst_rel, rel_err), max(worst_abs, abs_err)
                identical = identical and torch.equal(got, ref)
                if rel_err > RTOL:
                    failures.append(f"{name}: {n} differs from torch.optim.SGD: max abs {abs_err:.3e}, "
                                    f"relative {rel_err:.3e} > {RTOL:.0e}")
            worst_overall = max(worst_overall, worst_rel)
            print(f"check {name}: {STEPS} steps vs torch.optim.SGD: max abs error {worst_abs:.3e}, "
                  f"max relative error {worst_rel:.3e} (tolerance {RTOL:.0e}), bit-identical: {identical}")

            # 2. Save at step 15, resume in a fresh process, compare with the uninterrupted run.
            state_path = os.path.join(tmp, "state.safetensors")
            run_ok(binary, inputs, os.path.join(tmp, "half.safetensors"), config["opts"],
                   ["--steps", str(RESUME_AT), "--save-state", state_path])
            saved = load_file(state_path)
            with open(state_path, "rb") as f:  # safetensors header: u64 length, then JSON
                header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
            meta = header.get("__metadata__", {})
            expected_meta = {"ftcore.optimizer.schema_version": "1", "ftcore.optimizer.name": "sgd_nesterov",
                             "ftcore.optimizer.family": "sgd"}
            for k, v in expected_meta.items():
                if meta.get(k) != v:
                    failures.append(f"{name}: saved state metadata {k} = {meta.get(k)!r}, expected {v!r}")
            _, ref_buffers = torch_reference(tensors, config, RESUME_AT)
            saved_buffers = {k[len("state."):-len(".momentum_buffer")]: t for k, t in saved.items()
                             if k.startswith("state.") and k.endswith(".momentum_buffer")}
            if set(saved_buffers) != set(ref_buffers):
                failures.append(f"{name}: saved buffers {sorted(saved_buffers)}, torch has {sorted(ref_buffers)}")
            for n in set(saved_buffers) & set(ref_buffers):
                if (saved_buffers[n] - ref_buffers[n]).abs().max().item() > RTOL * ref_buffers[n].abs().max().item():
                    failures.append(f"{name}: saved {n}.momentum_buffer differs from torch's momentum_buffer")
            print(f"check {name}: state saved at step {RESUME_AT} has schema metadata and "
                  f"{len(saved_buffers)} momentum buffers matching torch's (w.late, not yet stepped, has none)")

            resumed = run_ok(binary, inputs, os.path.join(tmp, "resumed.safetensors"), config["opts"],
                             ["--resume", state_path, "--first-step", str(RESUME_AT),
                              "--steps", str(STEPS - RESUME_AT)])
            same = all(torch.equal(full[f"param.{n}"], resumed[f"param.{n}"]) for n in SHAPES)
            if not same:
                failures.append(f"{name}: resumed run is not bit-identical to the uninterrupted run")
            print(f"check {name}: {RESUME_AT} steps + resume in a fresh process + {STEPS - RESUME_AT} steps "
                  f"== {STEPS} uninterrupted steps bit for bit: {same}")

        # 3. Nesterov with dampening is refused by the spec's rule (exit 2), with a message.
        result, _ = run_steps(binary, inputs, os.path.join(tmp, "bad.safetensors"), {"dampening": 0.1},
                              ["--steps", "1"])
        refused = result.returncode == 2 and "needs momentum > 0 and dampening = 0" in result.stderr
        if not refused:
            failures.append(f"nesterov with dampening was not refused as expected: rc {result.returncode}, "
                            f"stderr {result.stderr.strip()!r}")
        print(f"check nesterov + dampening refused with a message: {refused}")

    if failures:
        print("\n".join("FAIL: " + f for f in failures))
        sys.exit(1)
    print(f"PASS: {len(CONFIGS)} configurations match torch.optim.SGD (max relative error {worst_overall:.3e}, "
          f"tolerance {RTOL:.0e}); resume bit-exact")


if __name__ == "__main__":
    main()
