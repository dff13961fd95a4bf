"""Time of one ReLoRA restart (merge B A * scaling into the base, re-initialise
A and B, magnitude-prune the LoRA optimizer state) on the default model.

Runs `ftcore run` on the default model (SmolLM2-135M-Instruct, dense fp32)
and the quiz data with adapter/relora, relora_steps = 2 over 7 steps (three
restarts, after steps 2, 4 and 6), and reads the time of each restart from
the adapter's log line. Configurations: the quickstart's targets (q/k/v/o,
r 8) and all-linear r 64, each with relora_cpu_offload off and on (on a
machine without an accelerator both merge on the CPU; the numbers then
differ only by noise).

usage: relora_restart.py BUILD_DIR [--device cpu|cuda]
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "third_party", "models", "SmolLM2-135M-Instruct")
DATA = os.path.join(ROOT, "third_party", "data", "quiz", "train.jsonl")
CONFIGS = [
    ("q/k/v/o r 8", dict(r=8, alpha=16.0, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])),
    ("all-linear r 64", dict(r=64, alpha=128.0, target_modules=["all-linear"])),
]
LINE = re.compile(r"restart (\d+) after step (\d+): (\d+) slots merged.*?pruned, (\d+) of (\d+) values in .*?; "
                  r"([0-9.]+) s \(merge \+ re-init ([0-9.]+) s, prune ([0-9.]+) s\)")


def recipe(out, name, adapter, offload, device):
    def table(d):
        return "".join(f"{k} = {json.dumps(v)}\n" for k, v in d.items())

    train = dict(micro_batch_size=2, gradient_accumulation_steps=1, max_steps=7, logging_steps=1, precision="fp32",
                 seed=1, output_dir=os.path.join(out, "runs"), run_name=name)
    relora = dict(name="relora", relora_steps=2, relora_warmup_steps=1, relora_cpu_offload=offload, **adapter)
    text = (f"[model]\npath = {json.dumps(MODEL)}\ndevice = \"{device}\"\n\n"
            f"[data]\npath = {json.dumps(DATA)}\nformat = \"alpaca\"\nsequence_len = 128\nval_set_size = 0.0\n\n"
            f"[train]\n{table(train)}\n[optimizer]\nname = \"adamw\"\nlr = 2e-4\n\n"
            f"[adapter]\n{table(relora)}\n[[logger]]\nname = \"jsonl\"\n")
    path = os.path.join(out, name + ".toml")
    with open(path, "w") as f:
        f.write(text)
    return path


def main():
    build = sys.argv[1]
    device = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cpu"
    ftcore = os.path.join(build, "bin", "ftcore")
    print(f"default model {os.path.basename(MODEL)} (fp32), device {device}, "
          f"FTCORE_NUM_THREADS={os.environ.get('FTCORE_NUM_THREADS', 'all')}")
    with tempfile.TemporaryDirectory() as out:
        for label, adapter in CONFIGS:
            for offload in (False, True):
                name = re.sub(r"[^a-z0-9]+", "_", label) + ("_offload" if offload else "")
                p = subprocess.run([ftcore, "run", recipe(out, name, adapter, offload, device)], capture_output=True,
                                   text=True, env=dict(os.environ, FTCORE_PLUGIN_PATH="", OMP_WAIT_POLICY="PASSIVE"))
                if p.returncode != 0:
                    raise SystemExit(f"ftcore run exited {p.returncode}:\n{p.stderr[-3000:]}")
                rows = LINE.findall(p.stderr)
                assert len(rows) == 3, p.stderr[-3000:]
                total = [float(r[5]) for r in rows]
                merge = [float(r[6]) for r in rows]
                prune = [float(r[7]) for r in rows]
                print(f"{label:16s} cpu_offload={str(offload).lower():5s}  {rows[0][2]} slots, "
                      f"{int(rows[0][4]):>9,d} state values: restart median {statistics.median(total) * 1000:7.1f} ms "
                      f"(merge + re-init {statistics.median(merge) * 1000:6.1f} ms, "
                      f"prune {statistics.median(prune) * 1000:6.1f} ms; all: "
                      f"{', '.join(f'{t * 1000:.1f}' for t in total)} ms)")


if __name__ == "__main__":
    main()
