"""`ftcore run` restarts itself with glibc's malloc on transparent huge pages
(core/src/cli/huge_page_malloc.h), on a tiny model. What the restart did is
read from the kernel while the run is live: /proc/PID/environ is the
environment the running image was exec'd with, /proc/PID/smaps_rollup its huge
pages (AnonHugePages). glibc parses GLIBC_TUNABLES in place and ends its
first item with a NUL, so the record shows the items as separate strings.

- FTCORE_HUGE_PAGES=1: the running image has GLIBC_TUNABLES=glibc.malloc.hugetlb=1,
  same pid, and trains every step; where the kernel's THP mode is "always" or
  "madvise", huge pages appear in the process
- a caller's other tunables are kept, after the hugetlb one
- a caller's own glibc.malloc.hugetlb is left as it is: no restart
- FTCORE_HUGE_PAGES=0, and unset (the default since stop 29): no restart
- the exec record also carries FTCORE_CALLERS_GLIBC_TUNABLES, what the
  restarted process puts back for the processes it starts (that a child then
  sees the caller's environment is not run here: `ftcore run` starts none
  without torchrun)
- FTCORE_HUGE_PAGES=yes: exit 2 naming the variable
"""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "reference"))
import tiny_training as tt  # noqa: E402

TUNABLE = "glibc.malloc.hugetlb"


def kernel_offers_huge_pages():
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            text = f.read()
    except OSError:
        return False
    return "[always]" in text or "[madvise]" in text


def read_environ(pid):
    """The exec record: its raw bytes and its NAME=VALUE strings as a dict."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        raw = f.read()
    entries = dict(e.decode().split("=", 1) for e in raw.split(b"\0") if b"=" in e)
    entries["raw"] = raw
    return entries


def anon_huge_kb(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("AnonHugePages:"):
                return int(line.split()[1])
    return 0


def run_watched(ftcore, recipe, run_dir, **variables):
    """Runs `ftcore run RECIPE` with the caller's environment changed by
    `variables` (None removes one); returns (the last environment the kernel
    showed for its pid, the most AnonHugePages seen in kB)."""
    env = dict(os.environ, FTCORE_PLUGIN_PATH="")
    for name in ("FTCORE_HUGE_PAGES", "GLIBC_TUNABLES", "FTCORE_CALLERS_GLIBC_TUNABLES"):
        env.pop(name, None)
    for name, value in variables.items():
        if value is not None:
            env[name] = value
    p = subprocess.Popen([ftcore, "run", recipe, "--overwrite"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    last, huge_kb = None, 0
    while p.poll() is None:
        try:
            last = read_environ(p.pid)
            huge_kb = max(huge_kb, anon_huge_kb(p.pid))
        except (OSError, ValueError):
            pass  # the process is between images or gone
        time.sleep(0.005)
    out, err = p.communicate()
    assert p.returncode == 0, f"exit {p.returncode}\n{out}\n{err}"
    steps = tt.train_losses(run_dir)
    assert len(steps) == 8, f"trained {len(steps)} steps, want 8"
    assert last is not None, "the run ended before its environment could be read"
    return last, huge_kb


def main():
    ftcore = sys.argv[1]
    tt.require_default_tokenizer()
    out = tempfile.mkdtemp(prefix="ftcore_huge_pages_")
    model, data = tt.make_model(out), tt.make_data(out)
    recipe = tt.lora_recipe(out, "hp", model, data, max_steps=8, gradient_accumulation_steps=1)
    run_dir = os.path.join(out, "runs", "hp")

    env, huge_kb = run_watched(ftcore, recipe, run_dir, FTCORE_HUGE_PAGES="1")
    tt.check("FTCORE_HUGE_PAGES=1: GLIBC_TUNABLES of the running image", env.get("GLIBC_TUNABLES"), TUNABLE + "=1")
    tt.check("  what the restart puts back for its children", env.get("FTCORE_CALLERS_GLIBC_TUNABLES"), "unset")
    if kernel_offers_huge_pages():
        assert huge_kb > 0, "restarted with the tunable, yet the kernel showed no AnonHugePages in the process"
        print(f"  the kernel offers THP: AnonHugePages seen, up to {huge_kb} kB")

    env, _ = run_watched(ftcore, recipe, run_dir, FTCORE_HUGE_PAGES="1", GLIBC_TUNABLES="glibc.malloc.check=0")
    tt.check("a caller's other tunable: kept, after hugetlb (as exec'd, before glibc's NUL)",
          b"\0GLIBC_TUNABLES=" + TUNABLE.encode() + b"=1\0glibc.malloc.check=0\0" in env["raw"], True)
    tt.check("  what the restart puts back", env.get("FTCORE_CALLERS_GLIBC_TUNABLES"), "set:glibc.malloc.check=0")

    env, _ = run_watched(ftcore, recipe, run_dir, FTCORE_HUGE_PAGES="1", GLIBC_TUNABLES=TUNABLE + "=0")
    tt.check("a caller's own hugetlb: left as it is", env.get("GLIBC_TUNABLES"), TUNABLE + "=0")
    tt.check("  no restart", "FTCORE_CALLERS_GLIBC_TUNABLES" in env, False)

    env, _ = run_watched(ftcore, recipe, run_dir, FTCORE_HUGE_PAGES="0")
    tt.check("FTCORE_HUGE_PAGES=0: no tunable", "GLIBC_TUNABLES" in env, False)

    env, _ = run_watched(ftcore, recipe, run_dir)
    tt.check("unset (the default): no tunable", "GLIBC_TUNABLES" in env, False)
    tt.check("  no restart", "FTCORE_CALLERS_GLIBC_TUNABLES" in env, False)

    tt.check_malformed_switch(ftcore, recipe, "FTCORE_HUGE_PAGES")
    print("all huge-page restart checks passed")


if __name__ == "__main__":
    main()
