"""`ftcore run` shares the cores with the other ftcore processes of the machine
(core/src/util/thread_registry.h, runtime.h), on a tiny model: the thread count
each step ran with is the "threads" field of metrics.jsonl.

- alone: every core; its slot is gone when it ends; a dead holder's slot
  (its lock free) is removed and not counted
- beside a live sharing holder: half; beside a fixed holder: what it leaves
- the holder goes away mid-run: the run takes every core back
- two real runs at once: each on its share, the registry empty after both
- the user's choice wins: FTCORE_NUM_THREADS / OMP_NUM_THREADS fix the count,
  FTCORE_THREAD_SHARING=0 is the old default; a caller's OMP_WAIT_POLICY is
  left as it is (ftcore sets no OpenMP variable) and the run still shares;
  a malformed FTCORE_THREAD_SHARING is exit 2

Holders are slot files this script locks with flock, as a live ftcore process
does, in a private registry (FTCORE_THREAD_REGISTRY) so that other ftcore
processes on the machine do not disturb the counts.
"""
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "reference"))
import tiny_training as tt  # noqa: E402

CORES = os.cpu_count()
HALF = max(1, CORES // 2)


class Holder:
    """A slot file held locked by this script: a live ftcore process to the registry."""

    def __init__(self, registry, name, text):
        self.path = os.path.join(registry, name + ".slot")
        self.f = open(self.path, "w")
        self.f.write(text)
        self.f.flush()
        fcntl.flock(self.f, fcntl.LOCK_EX)

    def release(self):
        os.unlink(self.path)
        self.f.close()


def env(registry, **extra):
    e = dict(os.environ, FTCORE_PLUGIN_PATH="", FTCORE_THREAD_REGISTRY=registry)
    for name in ("FTCORE_NUM_THREADS", "OMP_NUM_THREADS", "FTCORE_THREAD_SHARING", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT"):
        e.pop(name, None)
    e.update(extra)
    return e


def start(ftcore, recipe, e):
    return subprocess.Popen([ftcore, "run", recipe, "--overwrite"], env=e, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(p, label):
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, f"{label}: exit {p.returncode}\n{out}\n{err}"
    return err


def threads_of(out, name):
    return tt.train_metric(os.path.join(out, "runs", name), "threads")


def last_step(metrics):
    """The newest train step in a metrics.jsonl being written (0: none yet)."""
    step = 0
    if os.path.exists(metrics):
        with open(metrics) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue  # a line being written
                if r.get("phase") == "train" and "loss" in r:
                    step = max(step, r["step"])
    return step


def slots(registry):
    return sorted(n for n in os.listdir(registry) if n.endswith(".slot"))


def main():
    ftcore = sys.argv[1]
    tt.require_default_tokenizer()
    if CORES < 2:
        print("SKIP: one core: every share is 1 thread")
        sys.exit(tt.SKIP)
    out = tempfile.mkdtemp(prefix="ftcore_thread_sharing_")
    registry = os.path.join(out, "registry")
    os.makedirs(registry)
    model, data = tt.make_model(out), tt.make_data(out)
    short = tt.lora_recipe(out, "short", model, data, max_steps=3, gradient_accumulation_steps=1)
    long = tt.lora_recipe(out, "long", model, data, max_steps=60, gradient_accumulation_steps=1)

    # Alone, but for a holder that died: its slot file stays, nobody holds its lock.
    dead = os.path.join(registry, "4242-0.slot")
    with open(dead, "w") as f:
        f.write("sharing\n")
    finish(start(ftcore, short, env(registry)), "alone")
    tt.check("alone (a dead holder's slot beside it): threads per step", threads_of(out, "short"), [CORES] * 3)
    tt.check("alone: slots left after it ended (the dead one removed too)", slots(registry), [])

    h = Holder(registry, "4242-1", "sharing\n")
    err = finish(start(ftcore, short, env(registry)), "beside a sharing holder")
    tt.check("beside a live sharing holder", threads_of(out, "short"), [HALF] * 3)
    assert f"threads: {CORES} -> {HALF}: this machine's {CORES} cores, 2 sharing ftcore processes" in err, err
    tt.check("the holder's slot is kept", slots(registry), ["4242-1.slot"])
    h.release()

    h = Holder(registry, "4242-2", f"fixed {CORES - 1}\n")
    finish(start(ftcore, short, env(registry)), "beside a fixed holder")
    tt.check("beside a holder fixed at cores-1", threads_of(out, "short"), [1] * 3)
    h.release()

    # The holder leaves mid-run: the steps after show every core again.
    h = Holder(registry, "4242-3", "sharing\n")
    p = start(ftcore, long, env(registry))
    metrics = os.path.join(out, "runs", "long", "metrics.jsonl")
    deadline = time.time() + 300
    while last_step(metrics) < 2:
        assert p.poll() is None and time.time() < deadline, "the long run ended before its second step was seen"
        time.sleep(0.01)
    h.release()
    finish(p, "holder leaving")
    t = threads_of(out, "long")
    assert t[0] == HALF and t[-1] == CORES, f"holder leaving: first step {t[0]} (want {HALF}), last {t[-1]} (want {CORES})"
    print(f"holder leaving mid-run: {t.count(HALF)} steps on {HALF}, then {t.count(CORES)} on {CORES}")

    # Two real runs at once.
    a = tt.lora_recipe(out, "pair_a", model, data, max_steps=80, gradient_accumulation_steps=1)
    b = tt.lora_recipe(out, "pair_b", model, data, max_steps=80, gradient_accumulation_steps=1)
    pa, pb = start(ftcore, a, env(registry)), start(ftcore, b, env(registry))
    finish(pa, "pair a"), finish(pb, "pair b")
    for name in ("pair_a", "pair_b"):
        t = threads_of(out, name)
        assert HALF in t and set(t) <= {HALF, CORES}, f"{name}: threads per step {t}"
        print(f"two runs at once, {name}: {t.count(HALF)} of {len(t)} steps on {HALF} threads")
    tt.check("after the pair: slots left", slots(registry), [])

    # The user's settings win over the registry.
    h = Holder(registry, "4242-5", "sharing\n")
    finish(start(ftcore, short, env(registry, FTCORE_NUM_THREADS=str(CORES))), "FTCORE_NUM_THREADS")
    tt.check("FTCORE_NUM_THREADS=cores beside a holder", threads_of(out, "short"), [CORES] * 3)
    finish(start(ftcore, short, env(registry, OMP_NUM_THREADS=str(CORES))), "OMP_NUM_THREADS")
    tt.check("OMP_NUM_THREADS=cores beside a holder", threads_of(out, "short"), [CORES] * 3)
    finish(start(ftcore, short, env(registry, FTCORE_THREAD_SHARING="0")), "FTCORE_THREAD_SHARING=0")
    tt.check("FTCORE_THREAD_SHARING=0 beside a holder", threads_of(out, "short"), [CORES] * 3)
    finish(start(ftcore, short, env(registry, OMP_WAIT_POLICY="PASSIVE")), "OMP_WAIT_POLICY")
    tt.check("OMP_WAIT_POLICY=PASSIVE beside a holder (still shares)", threads_of(out, "short"), [HALF] * 3)
    h.release()
    bad = subprocess.run([ftcore, "run", short], env=env(registry, FTCORE_THREAD_SHARING="yes"),
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "environment FTCORE_THREAD_SHARING: 'yes' is not 0 or 1" in bad.stderr, bad.stderr
    print("FTCORE_THREAD_SHARING=yes: exit 2, names the variable")
    print("thread sharing: all checks passed")


if __name__ == "__main__":
    main()
