"""Multi-process `ftcore run` under torchrun (torch's own launcher) on a tiny Llama
(tests/reference/tiny_training.py), fp32 on the CPU, Gloo:

- 2 processes x micro-batch 4 give the losses and final weights of 1 process x
  micro-batch 8 (same seed): LoRA (started with the short form `ftcore run
  --nproc-per-node 2`), full fine-tune, and LoRA with gradient accumulation 2;
  each also with [distributed] shard_optimizer_state (ZeRO-1);
- ZeRO-1 holds about half the optimizer state per rank (the ranks' own report);
- a checkpoint saved by 2 ranks resumes with 1 and with 2 ranks to the
  uninterrupted run's weights;
- two hosts: two network namespaces joined by a veth pair, one torchrun node in
  each (--nnodes 2, static rendezvous), give the 2-process result;
- SIGKILL of one rank: the survivor exits non-zero within timeout_s + 30 s and
  names the lost rank; under --max-restarts 1 the group restarts, resumes from
  the newest checkpoint and reaches the uninterrupted run's adapter.

The reference is torch's own semantics: the 1-process run (checked against
transformers/PEFT by the trainer's reference tests) and torchrun's contract.
Tolerance: 1e-5 relative on losses, 1e-5 absolute on weights (fp32 sums in
another order; measured ~1e-7).

Usage: distributed_test.py FTCORE_BINARY
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "reference"))
import tiny_training as tt  # noqa: E402

from safetensors.torch import load_file  # noqa: E402

STEPS = 6
LOSS_RTOL = 1e-5
WEIGHT_ATOL = 1e-5
LORA = ('\n[adapter]\nname = "lora"\nr = 4\nalpha = 8.0\ndropout = 0.0\n'
        'target_modules = ["q_proj", "k_proj", "v_proj", "o_proj"]\n')


def recipe(out, name, model, data, adapter=True, **train):
    keys = dict(max_steps=STEPS, micro_batch_size=8, gradient_accumulation_steps=1)
    keys.update(train)
    path = tt.write_recipe(out, name, model, data, train=keys, optimizer={"lr": 5e-3})
    if adapter:
        with open(path, "a") as f:
            f.write(LORA)
    return path


def env():
    e = dict(os.environ, FTCORE_PLUGIN_PATH="", OMP_WAIT_POLICY="PASSIVE")
    e.pop("FTCORE_NUM_THREADS", None)  # the workers split the cores themselves
    return e


def torchrun(*args):
    return [sys.executable, "-m", "torch.distributed.run", *args]


def run_workers(ftcore, path, nproc=2, sets=(), extra=(), check=True, timeout=300, short_form=False):
    cmd = torchrun("--standalone", "--nproc-per-node", str(nproc), *extra, "--no-python", ftcore, "run", path)
    if short_form:  # `ftcore run R --nproc-per-node N` execs the same torchrun
        cmd = [ftcore, "run", path, "--nproc-per-node", str(nproc)]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p


def weights(run_dir):
    for f in ("adapter_model.safetensors", "model.safetensors"):
        if os.path.exists(os.path.join(run_dir, f)):
            return load_file(os.path.join(run_dir, f))
    raise SystemExit(f"no final weights in {run_dir}")


def compare(label, ref_dir, got_dir):
    a, b = tt.train_losses(ref_dir), tt.train_losses(got_dir)
    assert len(a) == len(b) == STEPS, f"{label}: {len(b)} logged steps, expected {STEPS} like the reference ({len(a)})"
    loss_err = max(abs(x - y) / abs(x) for x, y in zip(a, b))
    wa, wb = weights(ref_dir), weights(got_dir)
    assert wa.keys() == wb.keys(), f"{label}: different tensors saved"
    weight_err = max((wa[k] - wb[k]).abs().max().item() for k in wa)
    assert loss_err <= LOSS_RTOL, f"{label}: losses differ by {loss_err:.2e} relative\n{a}\n{b}"
    assert weight_err <= WEIGHT_ATOL, f"{label}: final weights differ by {weight_err:.2e}"
    assert a[-1] < a[0], f"{label}: the loss did not go down: {a}"
    print(f"{label}: losses within {loss_err:.1e} relative, weights within {weight_err:.1e}")


def state_bytes(stderr):
    out = {}
    for line in stderr.splitlines():
        if "optimizer state on this rank:" in line:
            rank = int(line.split("[rank ")[1].split("]")[0])
            out[rank] = int(line.split("rank: ")[1].split()[0])
    return out


def check_equivalence(ftcore, out, model, data):
    cases = [("lora", True, {}), ("full", False, {}), ("lora_accum2", True, {"gradient_accumulation_steps": 2})]
    unsharded_state = {}
    for name, adapter, train in cases:
        path = recipe(out, name, model, data, adapter=adapter, **train)
        tt.run_ftcore(ftcore, path)  # 1 process x micro-batch 8
        ref = os.path.join(out, "runs", name)
        for sharded in (False, True):
            run_name = f"{name}_2x4" + ("_zero" if sharded else "")
            p = run_workers(ftcore, path, sets=["train.micro_batch_size=4", f"train.run_name={run_name}",
                                                f"distributed.shard_optimizer_state={str(sharded).lower()}"],
                            short_form=(name == "lora" and not sharded))
            compare(f"{name}: 2 ranks x 4{' ZeRO-1' if sharded else ''} vs 1 x 8", ref, os.path.join(out, "runs", run_name))
            got = state_bytes(p.stderr)
            assert sorted(got) == [0, 1], f"{run_name}: ranks did not report their optimizer state:\n{p.stderr}"
            if not sharded:
                unsharded_state[name] = got
            else:
                # Nothing duplicated: the ranks' shares add up to one replica's state.
                whole = unsharded_state[name][0]
                assert sum(got.values()) == whole, f"{name}: ZeRO-1 shares {got} do not add up to {whole}"
                ratio = max(got.values()) / whole
                # Tensor granularity (as ZeroRedundancyOptimizer): the tiny model's
                # embedding is most of a full fine-tune, so only LoRA splits evenly.
                if adapter:
                    assert 0.4 <= ratio <= 0.6, f"{name}: ZeRO-1 state per rank is {ratio:.2f} of unsharded ({got})"
                print(f"{name}: ZeRO-1 optimizer state per rank {got} bytes, largest share {ratio:.2f} of {whole}")


def check_resume_across_world_sizes(ftcore, out, model, data):
    path = recipe(out, "resume", model, data, adapter=False, save_steps=3)
    run_workers(ftcore, path, sets=["train.micro_batch_size=4", "distributed.shard_optimizer_state=true"])
    full = os.path.join(out, "runs", "resume")
    assert os.path.isdir(os.path.join(full, "checkpoint-3")), "2 ranks saved no checkpoint-3"
    for nproc in (1, 2):
        name = f"resume_on_{nproc}"
        folder = os.path.join(out, "runs", name)
        os.makedirs(folder)
        shutil.copytree(os.path.join(full, "checkpoint-3"), os.path.join(folder, "checkpoint-3"))
        sets = [f"train.run_name={name}", "train.resume_from_checkpoint=auto"]
        if nproc == 1:
            tt.run_ftcore(ftcore, path, *sum((["--set", s] for s in sets), []))
        else:
            run_workers(ftcore, path, sets=sets + ["train.micro_batch_size=4"])
        wa, wb = weights(full), weights(folder)
        err = max((wa[k] - wb[k]).abs().max().item() for k in wa)
        assert err <= WEIGHT_ATOL, f"saved with 2 ranks, resumed with {nproc}: weights differ by {err:.2e}"
        print(f"saved with 2 ranks (ZeRO-1), resumed with {nproc}: final weights within {err:.1e}")


def check_two_hosts(ftcore, out, path, ref_dir):
    if os.geteuid() != 0 or not shutil.which("ip"):
        print("SKIP two hosts: network namespaces need root and iproute2")
        return
    tag = str(os.getpid() % 10000)
    ns = [f"ftA{tag}", f"ftB{tag}"]
    addr = ["10.77.0.1", "10.77.0.2"]
    setup = [f"ip netns add {ns[0]}", f"ip netns add {ns[1]}",
             f"ip link add vA{tag} type veth peer name vB{tag}",
             f"ip link set vA{tag} netns {ns[0]}", f"ip link set vB{tag} netns {ns[1]}"]
    for i, (n, dev) in enumerate(zip(ns, [f"vA{tag}", f"vB{tag}"])):
        setup += [f"ip -n {n} addr add {addr[i]}/24 dev {dev}", f"ip -n {n} link set {dev} up",
                  f"ip -n {n} link set lo up"]
    try:
        for c in setup:
            r = subprocess.run(c.split(), capture_output=True, text=True)
            if r.returncode != 0:
                print(f"SKIP two hosts: `{c}` failed: {r.stderr.strip()}")
                return
        procs = []
        for node in (0, 1):
            e = env()
            e["GLOO_SOCKET_IFNAME"] = f"vA{tag}" if node == 0 else f"vB{tag}"
            cmd = ["ip", "netns", "exec", ns[node]] + torchrun(
                "--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(node), "--master-addr", addr[0],
                "--master-port", "29611", "--no-python", ftcore, "run", path,
                "--set", "train.micro_batch_size=4", "--set", "train.run_name=two_hosts")
            procs.append(subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        outputs = [p.communicate(timeout=300)[0] for p in procs]
        for node, p in enumerate(procs):
            assert p.returncode == 0, f"node {node} exited {p.returncode}:\n{outputs[node]}"
        compare("two hosts (2 namespaces, --nnodes 2) vs 1 x 8", ref_dir, os.path.join(out, "runs", "two_hosts"))
    finally:
        for n in ns:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)


def wait_for(predicate, seconds, what):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise SystemExit(f"timed out after {seconds} s waiting for {what}")


def worker_pids(launcher_pid):
    r = subprocess.run(["pgrep", "-P", str(launcher_pid)], capture_output=True, text=True)
    return [int(x) for x in r.stdout.split()]


def rank_pid(launcher_pid, rank):
    for pid in worker_pids(launcher_pid):
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        if environ.get(b"RANK") == str(rank).encode():
            return pid
    return None


def check_sigkill(ftcore, out, model, data):
    timeout_s = 5
    path = recipe(out, "killed", model, data, max_steps=100000)
    cmd = torchrun("--standalone", "--nproc-per-node", "2", "--no-python", ftcore, "run", path,
                   "--set", "train.micro_batch_size=4", "--set", f"distributed.timeout_s={timeout_s}")
    p = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    metrics = os.path.join(out, "runs", "killed", "metrics.jsonl")
    wait_for(lambda: tt_logged(metrics) >= 1 or p.poll() is not None, 120, "the first logged step")
    victim = rank_pid(p.pid, 1)
    assert victim, "no worker with RANK=1"
    killed_at = time.time()
    os.kill(victim, signal.SIGKILL)
    output = p.communicate(timeout=timeout_s + 60)[0]
    took = time.time() - killed_at
    assert p.returncode != 0, f"the job exited 0 after a rank was killed:\n{output}"
    assert took <= timeout_s + 30, f"the survivor took {took:.0f} s to stop (timeout_s {timeout_s})"
    assert "lost rank 1" in output, f"no message naming the lost rank:\n{output[-3000:]}"
    line = next(x for x in output.splitlines() if "lost rank 1" in x)
    print(f"SIGKILL of rank 1: the job stopped in {took:.1f} s: {line.strip()[:200]}")


def tt_logged(metrics):
    if not os.path.exists(metrics):
        return 0
    with open(metrics) as f:
        return sum(1 for line in f if '"loss"' in line)


def check_elastic_restart(ftcore, out, model, data):
    # Long enough (60 steps) for a kill to land mid-run; the reference is the
    # same recipe uninterrupted on 2 ranks.
    sets = ["--set", "train.micro_batch_size=4", "--set", "distributed.timeout_s=20"]
    ref = recipe(out, "elastic_ref", model, data, max_steps=60, save_steps=5)
    run_workers(ftcore, ref, sets=[s for s in sets if s != "--set"])
    path = recipe(out, "elastic", model, data, max_steps=60, save_steps=5)
    cmd = torchrun("--standalone", "--nproc-per-node", "2", "--max-restarts", "1", "--no-python", ftcore, "run", path,
                   *sets)
    p = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    folder = os.path.join(out, "runs", "elastic")
    wait_for(lambda: os.path.isdir(os.path.join(folder, "checkpoint-5")) or p.poll() is not None, 120, "checkpoint-5")
    victim = rank_pid(p.pid, 1)
    assert victim, "no worker with RANK=1 (did the run finish before the kill?)"
    os.kill(victim, signal.SIGKILL)
    output = p.communicate(timeout=300)[0]
    assert p.returncode == 0, f"the restarted group did not finish (exit {p.returncode}):\n{output[-4000:]}"
    resumed = [x for x in output.splitlines() if "resumed from" in x]
    assert resumed, f"the restarted group did not resume from a checkpoint:\n{output[-4000:]}"
    wa, wb = weights(os.path.join(out, "runs", "elastic_ref")), weights(folder)
    err = max((wa[k] - wb[k]).abs().max().item() for k in wa)
    assert err <= WEIGHT_ATOL, f"after an elastic restart the adapter differs by {err:.2e}"
    print(f"elastic restart (--max-restarts 1, rank 1 SIGKILLed mid-run): {resumed[0].strip()}; "
          f"final adapter within {err:.1e} of the uninterrupted run")


def main():
    ftcore = os.path.abspath(sys.argv[1])
    tt.require_default_tokenizer()
    with tempfile.TemporaryDirectory() as out:
        model, data = tt.make_model(out), tt.make_data(out, rows=64)
        check_equivalence(ftcore, out, model, data)
        check_resume_across_world_sizes(ftcore, out, model, data)
        check_two_hosts(ftcore, out, os.path.join(out, "lora.toml"), os.path.join(out, "runs", "lora"))
        check_sigkill(ftcore, out, model, data)
        check_elastic_restart(ftcore, out, model, data)
    print("distributed: all checks passed")


if __name__ == "__main__":
    main()
