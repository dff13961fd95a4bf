"""Nothing lost, nothing silent (issue 15, parts 2-5), on the tiny model of
tests/reference/tiny_training.py:

- convert: a non-empty OUT is refused without --overwrite, an OUT holding the
  input even with it (exit 2; the files stay);
- run folders: a second run into a locked folder is refused with the holder's
  pid; a finished run is refused without --overwrite or resume, and
  --overwrite leaves one history;
- metrics.jsonl holds every logged step while the run goes on; after a
  SIGKILL past the last checkpoint and a resume, each step is there once;
- SIGTERM inside data preparation, the evaluation before training, and an
  evaluation after step 2 (a checkpoint is saved; the resumed run ends with
  the uninterrupted run's adapter); a double SIGINT exits at once, says so,
  and leaves the last checkpoint whole;
- a step whose update is not finite (lr 1e39 in fp32) is not saved: exit 1
  naming the tensor, the last checkpoint is the last finite state;
- a full disk (tmpfs, where mounting is allowed) at the final save: "No space
  left on device", no .tmp left, the metrics kept.

Signals are put inside a phase with FTCORE_FAULT_SIGNAL_IN=<phase> (the
process signals itself at its first check there), not with a clock.

Usage: run_safety_test.py FTCORE_BINARY
"""
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "reference"))
import tiny_training as tt  # noqa: E402

def recipe(out, name, model, data, adapter=True, **train):
    keys = dict(max_steps=6, save_steps=3, logging_steps=1)
    keys.update(train)
    return tt.lora_recipe(out, name, model, data, adapter=adapter, **keys)


def folder(out, name):
    return os.path.join(out, "runs", name)


digest = tt.sha256_of


def records(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def train_steps(run_dir):
    return [r["step"] for r in records(run_dir) if r.get("phase") == "train" and "loss" in r]


def checkpoints(run_dir):
    return sorted(d for d in os.listdir(run_dir) if d.startswith("checkpoint-") and "." not in d)


def ftcore_env(**extra):
    return dict(os.environ, FTCORE_PLUGIN_PATH="", OMP_WAIT_POLICY="PASSIVE", **extra)


def expect(p, code, *phrases):
    text = p.stdout + p.stderr
    assert p.returncode == code, f"exit {p.returncode}, expected {code}:\n{text}"
    for phrase in phrases:
        assert phrase in text, f"{phrase!r} missing from:\n{text}"


def check_convert(ftcore, out):
    from convert_reference import write_tiny_gguf  # noqa: E402
    src = os.path.join(out, "gguf")
    os.makedirs(src)
    gguf = os.path.join(src, "tiny.gguf")
    write_tiny_gguf(gguf)
    run = lambda *a: subprocess.run([ftcore, "convert", *a], capture_output=True, text=True, env=ftcore_env())  # noqa: E731
    for extra in ([], ["--overwrite"]):
        expect(run(gguf, src, *extra), 2, "holds the input", "even with --overwrite")
        assert os.path.exists(gguf), "convert deleted its own input"
    busy = os.path.join(out, "busy")
    os.makedirs(busy)
    with open(os.path.join(busy, "keep.txt"), "w") as f:
        f.write("mine")
    expect(run(gguf, busy), 2, "not empty", "--overwrite")
    assert os.path.exists(os.path.join(busy, "keep.txt")), "convert replaced a non-empty folder without --overwrite"
    expect(run(gguf, busy, "--overwrite"), 0, "converted")
    assert os.path.exists(os.path.join(busy, "config.json")) and not os.path.exists(os.path.join(busy, "keep.txt"))
    empty = os.path.join(out, "empty")
    os.makedirs(empty)
    expect(run(gguf, empty), 0, "converted")
    print("convert: OUT holding IN refused (exit 2, also with --overwrite), non-empty OUT needs --overwrite")


def check_lock(ftcore, out, model, data):
    path = recipe(out, "locked", model, data)
    os.makedirs(folder(out, "locked"))
    holder = subprocess.Popen(["sleep", "600"])
    try:  # another process holds the lock, as a running ftcore would
        with open(os.path.join(folder(out, "locked"), ".ftcore.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            lock.write(f"{holder.pid}\n")
            lock.flush()
            p = tt.run_ftcore(ftcore, path, check=False)
            expect(p, 2, "in use by another ftcore run", f"pid {holder.pid}")
    finally:
        holder.kill()
        holder.wait()
    assert not os.path.exists(os.path.join(folder(out, "locked"), "metrics.jsonl")), "a refused run wrote metrics"
    # The lock went with its holder: the same folder trains now.
    tt.run_ftcore(ftcore, path)
    print(f"lock: a second run into a held folder is refused naming pid {holder.pid}; free once the holder is gone")


def check_finished_run(ftcore, out, model, data):
    name = "finished"
    path = recipe(out, name, model, data, max_steps=4, save_steps=1000)
    tt.run_ftcore(ftcore, path)
    run_dir = folder(out, name)
    adapter = digest(os.path.join(run_dir, "adapter_model.safetensors"))
    before = records(run_dir)
    expect(tt.run_ftcore(ftcore, path, check=False), 2, "holds a previous run", "--overwrite")
    assert digest(os.path.join(run_dir, "adapter_model.safetensors")) == adapter, "the trained adapter was replaced"
    assert records(run_dir) == before, "a refused rerun changed metrics.jsonl"
    tt.run_ftcore(ftcore, path, "--overwrite")
    assert train_steps(run_dir) == [1, 2, 3, 4], f"--overwrite: not one history: {train_steps(run_dir)}"
    runs = [r for r in records(run_dir) if r.get("phase") == "run"]
    assert len(runs) == 1, f"--overwrite kept the previous history ({len(runs)} run records)"
    print("finished run: rerun refused (exit 2, adapter and metrics untouched); --overwrite leaves one history")
    return adapter


def wait_for_steps(proc, run_dir, steps):
    metrics = os.path.join(run_dir, "metrics.jsonl")
    while proc.poll() is None:
        if os.path.exists(metrics) and len(train_steps_tolerant(metrics)) >= steps:
            return True
        time.sleep(0.01)
    return False


def train_steps_tolerant(metrics):
    steps = []
    with open(metrics) as f:
        for line in f:
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue  # the line being written
            if r.get("phase") == "train" and "loss" in r:
                steps.append(r["step"])
    return steps


def check_metrics_survive_kill(ftcore, out, model, data):
    name = "killed"
    path = recipe(out, name, model, data, max_steps=12, save_steps=4, resume_from_checkpoint="auto")
    run_dir = folder(out, name)
    proc = subprocess.Popen([ftcore, "run", path], env=ftcore_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Step 6: past checkpoint-4 and before checkpoint-8, so only the per-step writes can have put it there.
    reached = wait_for_steps(proc, run_dir, 6)
    proc.kill()
    proc.wait()
    assert reached, "the run ended before metrics.jsonl showed 6 steps"
    seen = train_steps_tolerant(os.path.join(run_dir, "metrics.jsonl"))
    assert seen[:6] == [1, 2, 3, 4, 5, 6], f"metrics.jsonl during the run: {seen}"
    last = max(int(c.split("-")[1]) for c in checkpoints(run_dir))
    assert seen[-1] > last, f"metrics.jsonl holds steps up to {seen[-1]} only, the last checkpoint's ({last})"
    tt.run_ftcore(ftcore, path)
    steps = train_steps(run_dir)
    assert steps == list(range(1, 13)), f"after SIGKILL at step {len(seen)} and a resume: steps {steps}"
    print(f"metrics: {seen[-1]} steps on disk at the SIGKILL, the last checkpoint at {last}; "
          "after the resume each of 1..12 once")


def check_signal_phases(ftcore, out, model, data):
    for phase, extra in (("data preparation", {}), ("evaluation", {"eval_before_training": True})):
        name = "sig_" + phase.split()[0]
        path = recipe(out, name, model, data, **extra)
        p = tt.run_ftcore(ftcore, path, "--set", "data.val_set_size=0.25", env={"FTCORE_FAULT_SIGNAL_IN": phase},
                          check=False)
        expect(p, 143, f"SIGTERM during {phase}", "nothing to save")
        run_dir = folder(out, name)
        assert not os.path.exists(run_dir) or not checkpoints(run_dir), f"{phase}: a checkpoint without a step"
        if os.path.exists(os.path.join(run_dir, "metrics.jsonl")):
            assert not train_steps(run_dir), f"{phase}: trained on after the signal: {train_steps(run_dir)}"
        print(f"SIGTERM in {phase}: exit 143 there, before any step, nothing saved")


def check_signal_in_evaluation_saves(ftcore, out, model, data):
    # The uninterrupted run, then one stopped inside the evaluation after step 2 and resumed.
    digests = []
    for name, env in (("eval_plain", {}), ("eval_cut", {"FTCORE_FAULT_SIGNAL_IN": "evaluation"})):
        path = recipe(out, name, model, data, eval_steps=2, eval_before_training=False, resume_from_checkpoint="auto")
        p = tt.run_ftcore(ftcore, path, "--set", "data.val_set_size=0.25", env=env, check=False)
        if env:
            expect(p, 143, "SIGTERM during evaluation", "stopped at step 2", "checkpoint-2")
            assert checkpoints(folder(out, name)) == ["checkpoint-2"], checkpoints(folder(out, name))
            p = tt.run_ftcore(ftcore, path, "--set", "data.val_set_size=0.25")
        expect(p, 0)
        digests.append(digest(os.path.join(folder(out, name), "adapter_model.safetensors")))
    assert digests[0] == digests[1], "stopped in an evaluation and resumed: the adapter differs"
    print("SIGTERM in the evaluation after step 2: checkpoint-2 saved, exit 143; the resumed adapter is byte-identical")


def check_double_sigint(ftcore, out, model, data):
    # The first SIGINT comes from here; the second arrives inside the checkpoint the first one's stop writes
    # (FTCORE_FAULT_SIGINT_AGAIN_IN_CHECKPOINT): two signals sent from here a few ms apart can merge into one
    # pending SIGINT on a loaded machine, which is how this check once failed in CI.
    # checkpoint-2 comes from a first run; the resumed run saves only when stopped, so whenever the SIGINT lands
    # after step 3 the stop writes a checkpoint for the second SIGINT to cut short.
    name = "double_sigint"
    path = recipe(out, name, model, data, max_steps=40, save_steps=2, gradient_accumulation_steps=8,
                  resume_from_checkpoint="auto")
    run_dir = folder(out, name)
    tt.run_ftcore(ftcore, path, "--set", "train.max_steps=2")
    proc = subprocess.Popen([ftcore, "run", path, "--set", "train.save_steps=1000"],
                            env=ftcore_env(FTCORE_FAULT_SIGINT_AGAIN_IN_CHECKPOINT="1"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wait_for_steps(proc, run_dir, 3), "the run ended early"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate()
    assert proc.returncode == 130, f"double SIGINT: exit {proc.returncode}\n{err}"
    assert "second SIGINT" in err and "checkpoint is intact" in err, err
    assert "stopped at step" not in err, f"the second SIGINT did not cut the save short:\n{err}"
    saved = checkpoints(run_dir)
    assert saved == ["checkpoint-2"], saved
    unfinished = [d for d in os.listdir(run_dir) if d.startswith("checkpoint-") and d not in saved]
    assert unfinished, f"no cut-short checkpoint folder left beside {saved}"
    for c in saved:
        for f in ("trainer_state.json", "adapter_model.safetensors", "optimizer.safetensors"):
            assert os.path.exists(os.path.join(run_dir, c, f)), f"{c} lacks {f}"
    print(f"double SIGINT: exit 130 at once with a message; {unfinished[0]} left unfinished, {saved[-1]} whole")


def check_non_finite_update(ftcore, out, model, data):
    import torch
    from safetensors.torch import load_file
    name = "blowup"
    path = recipe(out, name, model, data, max_steps=6, save_steps=3, resume_from_checkpoint="auto")
    tt.run_ftcore(ftcore, path, "--set", "train.max_steps=3")
    run_dir = folder(out, name)
    trained = digest(os.path.join(run_dir, "adapter_model.safetensors"))
    # lr 1e39 is a finite double and +-inf in fp32: step 4's update sends the adapter to Inf/NaN.
    p = tt.run_ftcore(ftcore, path, "--set", "optimizer.lr=1e39", check=False)
    expect(p, 1, "step 4: ", "lora_", "after the update is not finite", "nothing of this step is saved",
           os.path.join(folder(out, name), "checkpoint-3"))
    assert checkpoints(run_dir) == ["checkpoint-3"], checkpoints(run_dir)
    assert digest(os.path.join(run_dir, "adapter_model.safetensors")) == trained, "a diverged run wrote final outputs"
    weights = load_file(os.path.join(run_dir, "checkpoint-3", "adapter_model.safetensors"))
    assert all(bool(torch.isfinite(t).all()) for t in weights.values()), "the saved state is not finite"
    print("non-finite update: exit 1 naming the tensor; nothing saved of the step; checkpoint-3 finite")


def check_disk_full(ftcore, out, model, data):
    mount = os.path.join(out, "small_disk")
    os.makedirs(mount)
    # 4 MiB: room for the lock, the metrics and recipe.lock.toml, not for the 13 MB model of a full fine-tune.
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mount], capture_output=True).returncode != 0:
        print("SKIPPED disk full: cannot mount a tmpfs here (needs root)")
        return
    try:
        path = recipe(out, "full_disk", model, data, adapter=False, max_steps=3, save_steps=1000,
                      output_dir=mount)
        p = tt.run_ftcore(ftcore, path, check=False)
        expect(p, 1, "No space left on device")
        run_dir = os.path.join(mount, "full_disk")
        left = [f for f in os.listdir(run_dir) if f.endswith(".tmp")]
        assert not left, f"partial files left on the full disk: {left}"
        assert train_steps(run_dir) == [1, 2, 3], f"the metrics of the run: {train_steps(run_dir)}"
        print("disk full at the final save: exit 1 with 'No space left on device', no .tmp left, metrics kept")
    finally:
        subprocess.run(["umount", mount])


def main():
    tt.require_default_tokenizer()
    ftcore = sys.argv[1]
    with tempfile.TemporaryDirectory() as out:
        model, data = tt.make_model(out), tt.make_data(out)
        check_convert(ftcore, out)
        check_lock(ftcore, out, model, data)
        check_finished_run(ftcore, out, model, data)
        check_metrics_survive_kill(ftcore, out, model, data)
        check_signal_phases(ftcore, out, model, data)
        check_signal_in_evaluation_saves(ftcore, out, model, data)
        check_double_sigint(ftcore, out, model, data)
        check_non_finite_update(ftcore, out, model, data)
        check_disk_full(ftcore, out, model, data)
        shutil.rmtree(os.path.join(out, "runs"), ignore_errors=True)


if __name__ == "__main__":
    main()
