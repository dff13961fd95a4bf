"""Behaviour of `ftcore run` on a tiny model (tests/reference/tiny_training.py):

- determinism: the same recipe and seed give bit-identical losses and adapter;
- gradient checkpointing with LoRA dropout gives the plain backward's losses;
- under bf16 autocast, frozen Linear weights kept in bf16 only give the same
  losses and adapter as fp32 weights; DoRA keeps them in fp32;
- accumulation: micro_batch_size 4 x accumulation 1 and 1 x 4 give the same
  losses and adapter (token-normalised loss over the accumulated batch);
- SIGKILL at several moments, one of them inside a checkpoint write, then
  resume_from_checkpoint = "auto": the final adapter is byte-identical to
  an uninterrupted run's;
- SIGTERM: exit 143 after saving a checkpoint; resuming finishes the run;
- the loss watchdog stops with exit 1, a message and a checkpoint;
- a NaN/Inf loss stops before the update with exit 1 and a checkpoint;
- a run folder holding checkpoints is not silently overwritten (exit 2).

Usage: trainer_behaviour_test.py FTCORE_BINARY
"""
import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "reference"))
import tiny_training as tt  # noqa: E402

from safetensors.torch import load_file  # noqa: E402

STEPS = 12
LORA = {"dropout": 0.1}


def adapter_recipe(out, name, model, data, **train):
    keys = dict(max_steps=STEPS, save_steps=3, logging_steps=1)
    keys.update(train)
    path = tt.write_recipe(out, name, model, data, train=keys, optimizer={"lr": 5e-3})
    with open(path, "a") as f:  # a freshly initialised adapter (Kaiming A, zero B) with dropout
        f.write("\n[adapter]\nname = \"lora\"\nr = 4\nalpha = 8.0\ndropout = 0.1\n"
                "target_modules = [\"q_proj\", \"k_proj\", \"v_proj\", \"o_proj\"]\n")
    return path


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def logged_steps(metrics):
    if not os.path.exists(metrics):
        return 0
    with open(metrics) as f:
        return sum(1 for line in f if '"loss"' in line)


def run_dir(out, name):
    return os.path.join(out, "runs", name)


def check_determinism(ftcore, out, model, data):
    digests, losses = [], []
    for name in ("det_a", "det_b"):
        tt.run_ftcore(ftcore, adapter_recipe(out, name, model, data))
        digests.append(digest(os.path.join(run_dir(out, name), "adapter_model.safetensors")))
        losses.append(tt.train_losses(run_dir(out, name)))
    assert losses[0] == losses[1], f"same seed, different losses:\n{losses[0]}\n{losses[1]}"
    assert digests[0] == digests[1], "same seed, different adapters"
    assert losses[0][-1] < losses[0][0], f"the loss did not go down: {losses[0]}"
    print(f"determinism: {STEPS} steps bit-identical twice (loss {losses[0][0]:.4f} -> {losses[0][-1]:.4f})")
    return digests[0]


def check_gradient_checkpointing(ftcore, out, model, data):
    # With LoRA dropout on: the recomputation must replay the forward's dropout masks.
    tt.run_ftcore(ftcore, adapter_recipe(out, "ckpt", model, data, gradient_checkpointing=True))
    plain, ckpt = tt.train_losses(run_dir(out, "det_a")), tt.train_losses(run_dir(out, "ckpt"))
    worst = max(abs(a - b) / abs(b) for a, b in zip(plain, ckpt))
    assert len(plain) == len(ckpt) and worst < 1e-6, f"gradient checkpointing changes the losses by {worst:.2e}"
    print(f"gradient checkpointing (dropout 0.1): losses within {worst:.2e} of the plain backward's")


def check_frozen_weights_under_autocast(ftcore, out, model, data):
    # bf16 autocast with LoRA keeps the frozen Linear weights in bf16 only: the values autocast's
    # cast gives, so the run must equal one that keeps fp32 weights bit for bit (here with the
    # recomputation of gradient checkpointing and LoRA dropout on).
    runs = {}
    for name, env, said in (("frozen_bf16", {}, "frozen Linear weights kept in bf16 only"),
                            ("frozen_fp32", {"FTCORE_FROZEN_WEIGHTS": "fp32"}, "frozen weights stay in fp32")):
        recipe = adapter_recipe(out, name, model, data, precision="bf16", gradient_checkpointing=True)
        p = tt.run_ftcore(ftcore, recipe, env=env)
        assert said in p.stdout + p.stderr, f"{name}: the log does not say '{said}':\n{p.stdout}{p.stderr}"
        runs[name] = (tt.train_losses(run_dir(out, name)),
                      digest(os.path.join(run_dir(out, name), "adapter_model.safetensors")))
    (lb, db), (lf, df) = runs["frozen_bf16"], runs["frozen_fp32"]
    assert lb == lf, f"bf16-only frozen weights change the losses:\n{lb}\n{lf}"
    assert db == df, "bf16-only frozen weights change the adapter"
    # Gradient checkpointing replays the forward: without it the run must be the same bit for bit
    # (a checkpointed layer's first forward takes the attention path its recomputation takes), also
    # when nothing below layer 0's attention is trainable (LoRA on the MLP only).
    for targets in (None, '["gate_proj", "up_proj", "down_proj"]'):
        pair = {}
        for checkpointing in (True, False):
            name = f"ckpt_{checkpointing}_{'mlp' if targets else 'attn'}"
            recipe = adapter_recipe(out, name, model, data, precision="bf16", gradient_checkpointing=checkpointing)
            tt.run_ftcore(ftcore, recipe, *(("--set", f"adapter.target_modules={targets}") if targets else ()))
            pair[checkpointing] = (tt.train_losses(run_dir(out, name)),
                                   digest(os.path.join(run_dir(out, name), "adapter_model.safetensors")))
        assert pair[True] == pair[False], f"gradient checkpointing changes the bf16 run (targets {targets}):\n{pair}"
    # DoRA reads ||W|| in every forward: its base weights must stay fp32.
    p = tt.run_ftcore(ftcore, adapter_recipe(out, "frozen_dora", model, data, precision="bf16", max_steps=2),
                      "--set", "adapter.use_dora=true")
    assert "the adapter reads the base weights" in p.stdout + p.stderr, f"DoRA run:\n{p.stdout}{p.stderr}"
    print(f"frozen weights under bf16 autocast: {len(lb)} losses and the adapter identical with and without "
          "the fp32 copies and without gradient checkpointing; DoRA keeps them")


def check_accumulation(ftcore, out, model, data):
    runs = {}
    for name, mb, acc in (("acc_4x1", 4, 1), ("acc_1x4", 1, 4)):
        recipe = adapter_recipe(out, name, model, data, micro_batch_size=mb, gradient_accumulation_steps=acc)
        tt.run_ftcore(ftcore, recipe, "--set", "adapter.dropout=0.0")
        runs[name] = (tt.train_losses(run_dir(out, name)),
                      load_file(os.path.join(run_dir(out, name), "adapter_model.safetensors")))
    (la, wa), (lb, wb) = runs["acc_4x1"], runs["acc_1x4"]
    worst_loss = max(abs(a - b) / abs(b) for a, b in zip(la, lb))
    assert worst_loss < 1e-5, f"accumulation changes the losses by {worst_loss:.2e} relative"
    worst_w = max(float((wa[k] - wb[k]).abs().max() / wb[k].abs().max().clamp_min(1e-12)) for k in wa)
    assert worst_w < 1e-4, f"accumulation changes the adapter by {worst_w:.2e} relative"
    print(f"accumulation: 4x1 vs 1x4 losses within {worst_loss:.2e}, adapters within {worst_w:.2e} (relative)")


def check_kill_and_resume(ftcore, out, model, data, expected):
    name = "killed"
    recipe = adapter_recipe(out, name, model, data, resume_from_checkpoint="auto")
    # 1: SIGKILL inside the write of checkpoint-6 (after the adapter file, before the optimizer state).
    p = tt.run_ftcore(ftcore, recipe, env={"FTCORE_FAULT_KILL_IN_CHECKPOINT": "6"}, check=False)
    assert p.returncode in (-9, 137), f"fault injection did not kill the run (exit {p.returncode})"
    folder = run_dir(out, name)
    assert os.path.exists(os.path.join(folder, "checkpoint-6.tmp")), "no partial checkpoint-6.tmp left by the kill"
    assert not os.path.exists(os.path.join(folder, "checkpoint-6")), "a half-written checkpoint-6 looks complete"
    assert os.path.exists(os.path.join(folder, "checkpoint-3", "trainer_state.json"))
    # 2: SIGKILL the resumed runs after they log 2, 1 and 3 more steps (between and at checkpoints).
    kills = 0
    metrics = os.path.join(folder, "metrics.jsonl")
    for more_steps in (2, 1, 3):
        before = logged_steps(metrics)
        e = dict(os.environ, FTCORE_PLUGIN_PATH="", OMP_WAIT_POLICY="PASSIVE")
        proc = subprocess.Popen([ftcore, "run", recipe], env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while proc.poll() is None and logged_steps(metrics) < before + more_steps:
            time.sleep(0.01)
        if proc.poll() is None:
            proc.kill()
            kills += 1
        proc.wait()
    tt.run_ftcore(ftcore, recipe)
    got = digest(os.path.join(folder, "adapter_model.safetensors"))
    assert got == expected, "the resumed run's adapter differs from the uninterrupted run's"
    print(f"kill and resume: killed inside checkpoint-6's write and {kills} more times; final adapter byte-identical")


def check_sigterm(ftcore, out, model, data, expected):
    name = "terminated"
    recipe = adapter_recipe(out, name, model, data, resume_from_checkpoint="auto")
    e = dict(os.environ, FTCORE_PLUGIN_PATH="", OMP_WAIT_POLICY="PASSIVE")
    proc = subprocess.Popen([ftcore, "run", recipe], env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = os.path.join(run_dir(out, name), "metrics.jsonl")
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if os.path.exists(metrics) and sum(1 for line in open(metrics) if '"loss"' in line) >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate()
    assert proc.returncode == 143, f"SIGTERM: exit {proc.returncode}, expected 143\n{err}"
    assert "SIGTERM" in err and "resume" in err, err
    checkpoints = [d for d in os.listdir(run_dir(out, name)) if d.startswith("checkpoint-") and "." not in d]
    assert checkpoints, "SIGTERM left no checkpoint"
    tt.run_ftcore(ftcore, recipe)
    assert digest(os.path.join(run_dir(out, name), "adapter_model.safetensors")) == expected
    print(f"SIGTERM: exit 143 with {sorted(checkpoints)}; resumed to the same final adapter")


def check_watchdog_and_refusal(ftcore, out, model, data):
    recipe = adapter_recipe(out, "watchdog", model, data, loss_watchdog_threshold=0.01, loss_watchdog_patience=2)
    p = tt.run_ftcore(ftcore, recipe, check=False)
    assert p.returncode == 1, f"watchdog: exit {p.returncode}\n{p.stderr}"
    assert "loss watchdog" in p.stderr and "checkpoint-2" in p.stderr, p.stderr
    assert os.path.exists(os.path.join(run_dir(out, "watchdog"), "checkpoint-2", "trainer_state.json"))
    p = tt.run_ftcore(ftcore, recipe, check=False)
    assert p.returncode == 2 and "already holds checkpoints" in p.stderr, f"exit {p.returncode}: {p.stderr}"
    print("watchdog: stopped at step 2 with exit 1 and a checkpoint; rerunning into it is refused with exit 2")


def check_non_finite_loss(ftcore, out, model, data):
    # lr 1e30 sends the adapter to huge values at step 1; step 2's loss is no longer finite.
    recipe = adapter_recipe(out, "diverged", model, data)
    p = tt.run_ftcore(ftcore, recipe, "--set", "optimizer.lr=1e30", "--set", "adapter.dropout=0.0", check=False)
    assert p.returncode == 1, f"non-finite loss: exit {p.returncode}\n{p.stderr}"
    assert ("NaN" in p.stderr or "infinite" in p.stderr) and "stopped before updating" in p.stderr, p.stderr
    folder = run_dir(out, "diverged")
    saved = [d for d in os.listdir(folder) if d.startswith("checkpoint-") and "." not in d]
    assert saved, "no checkpoint saved at the non-finite loss"
    assert not os.path.exists(os.path.join(folder, "adapter_model.safetensors")), "a diverged run wrote final outputs"
    print(f"non-finite loss: exit 1 before updating, state saved in {sorted(saved)}")


def main():
    ftcore = sys.argv[1]
    tt.require_default_tokenizer()
    with tempfile.TemporaryDirectory() as out:
        model = tt.make_model(out)
        data = tt.make_data(out)
        expected = check_determinism(ftcore, out, model, data)
        check_gradient_checkpointing(ftcore, out, model, data)
        check_frozen_weights_under_autocast(ftcore, out, model, data)
        check_accumulation(ftcore, out, model, data)
        check_kill_and_resume(ftcore, out, model, data, expected)
        check_sigterm(ftcore, out, model, data, expected)
        check_watchdog_and_refusal(ftcore, out, model, data)
        check_non_finite_loss(ftcore, out, model, data)


if __name__ == "__main__":
    main()
