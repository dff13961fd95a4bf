"""`ftcore` allocates through gperftools' tcmalloc (core/CMakeLists.txt,
FTCORE_TCMALLOC), checked by what glibc's dynamic linker reports, not by
ftcore:

- the bindings: with LD_DEBUG=bindings and LD_BIND_NOW=1 the dynamic linker
  prints, for every library, where each symbol it uses was bound. libc10's
  posix_memalign (c10's CPU allocator: every tensor's memory), libtorch_cpu's
  malloc and operator new (autograd's nodes, TensorImpls) and libgomp's malloc
  must be bound to libtcmalloc_minimal. A link that dropped the library
  (--as-needed) or a library loaded before it would bind them to libc.so.6
  and libstdc++ and pass every other test.
- the same losses to the bit as under glibc's allocator (LD_PRELOAD="libc.so.6
  libstdc++.so.6" puts glibc's malloc and libstdc++'s operator new, which
  calls it, first in the lookup order; those bindings are checked too): only
  where memory comes from changes.

What tcmalloc is for (a training step's peak memory, its page faults) shows on
the default model, not on a tiny one, and is measured in
benchmarks/host_allocator_ab.py (docs/benchmarks.md), not asserted here.
"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "reference"))
import tiny_training as tt  # noqa: E402

# Sonames: the dynamic linker finds them where it finds every library.
GLIBC = "libc.so.6 libstdc++.so.6"
# What each watched (library, symbol) must be bound to: the library's basename up to ".so".
WATCHED = [("libc10.so", "posix_memalign"), ("libtorch_cpu.so", "malloc"), ("libtorch_cpu.so", "_Znwm"),
           ("libgomp.so.1", "malloc")]
BOUND_TO_TCMALLOC = {watched: "libtcmalloc_minimal.so" for watched in WATCHED}
BOUND_TO_GLIBC = {watched: "libstdc++.so" if watched[1] == "_Znwm" else "libc.so" for watched in WATCHED}


def environment(**variables):
    env = dict(os.environ, FTCORE_PLUGIN_PATH="")
    for name in ("LD_PRELOAD", "LD_DEBUG", "LD_BIND_NOW"):
        env.pop(name, None)
    env.update(variables)
    return env


def bound_to(ftcore, **variables):
    """{(library basename, symbol): basename of the library the dynamic linker bound it to}."""
    p = subprocess.run([ftcore, "--version"], capture_output=True, text=True,
                       env=environment(LD_DEBUG="bindings", LD_BIND_NOW="1", **variables))
    assert p.returncode == 0, p.stderr[-2000:]
    pattern = re.compile(r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: normal symbol `(\w+)'")
    return {(os.path.basename(m[1]), m[3]): os.path.basename(m[2]) for m in pattern.finditer(p.stderr)}


def check_bindings(ftcore, want, **variables):
    """Each (library, symbol) of `want` is bound to the library `want` names (its basename up to .so)."""
    bindings = bound_to(ftcore, **variables)
    for (user, symbol), library in want.items():
        got = bindings.get((user, symbol), "(not bound)")
        setting = " ".join(f"{k}={v}" for k, v in variables.items()) or "default"
        tt.check(f"{user}'s {symbol} ({setting}) bound to", got.split(".so")[0] + ".so", library)


def train_losses(ftcore, recipe, run_dir, **variables):
    """`ftcore run RECIPE` with the environment changed by `variables`; its per-step losses."""
    tt.run_ftcore(ftcore, recipe, "--overwrite", env=environment(**variables))
    return tt.train_losses(run_dir)


def main():
    ftcore = sys.argv[1]
    tt.require_default_tokenizer()
    check_bindings(ftcore, BOUND_TO_TCMALLOC)
    check_bindings(ftcore, BOUND_TO_GLIBC, LD_PRELOAD=GLIBC)

    out = tempfile.mkdtemp(prefix="ftcore_host_allocator_")
    model, data = tt.make_model(out), tt.make_data(out)
    # A full fine-tune: every weight's gradient and optimizer state pass through the allocator.
    recipe = tt.lora_recipe(out, "full", model, data, adapter=False, max_steps=4, gradient_accumulation_steps=1)
    run_dir = os.path.join(out, "runs", "full")
    losses = train_losses(ftcore, recipe, run_dir)
    tt.check("steps trained", len(losses), 4)
    tt.check("the same losses under tcmalloc and glibc's allocator", losses,
             train_losses(ftcore, recipe, run_dir, LD_PRELOAD=GLIBC))
    print("all host-allocator checks passed")


if __name__ == "__main__":
    main()
