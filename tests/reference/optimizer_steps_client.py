"""Driving `ftcore plugin steps` (core/src/cli/optimizer_steps.h) from the
optimizer reference scripts: options written as `--set key = value` TOML
assignments, and a run that stops the script with the command's stderr when
it fails. `binary` is the ftcore executable."""
import subprocess
import sys

from safetensors.torch import load_file


def set_args(opts):
    """{"lr": 1e-3, "betas": (0.9, 0.99), "amsgrad": True} -> --set arguments (TOML values)."""
    args = []
    for key, value in opts.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, tuple):
            value = "[" + ", ".join(repr(x) for x in value) + "]"
        else:
            value = repr(value)
        args += ["--set", f"{key} = {value}"]
    return args


def steps_command(binary):
    """The command line prefix of the step harness."""
    return [binary, "plugin", "steps"]


def run_optimizer_steps(binary, optimizer, inputs, out, opts, extra=(), env=None):
    """Runs the tool and returns the tensors it wrote to `out`."""
    cmd = [*steps_command(binary), "--optimizer", optimizer, "--inputs", inputs, "--out", out, *set_args(opts), *extra]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        sys.exit(f"ftcore plugin steps failed: {' '.join(cmd)}\n{result.stdout}{result.stderr}")
    return load_file(out)
