"""QLoRA on the real default model: LoRA (r 8, all-linear) trained on the
quiz data for 40 steps on three bases, same data, seed and schedule:

  dense   the checkpoint as stored (bf16)
  nf4     configs/qlora.toml: NF4 + double quant, quantized at load
  gptq    configs/qlora_gptq.toml: 4-bit GPTQ, group 128, calibrated at load
          on 32 x 256 tokens of the training data (the recipe's 64, halved for time)

Each run's final eval loss must improve on the untrained model's and lie
within 10% of the dense run's (the band: QLoRA's paper reports NF4 matching
16-bit LoRA; 4-bit RTN-level damage to this 135M model moves eval loss by a
few percent, which this bound allows while catching a broken base, whose
loss stays near the untrained 6.9). Tokens/s of each run are printed.

Usage: qlora_default_test.py FTCORE_BINARY   (skips when the default model is not set up)
"""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "third_party", "models", "SmolLM2-135M-Instruct")
BAND = 0.10
UNTRAINED_LOSS = 6.0  # the untrained model's quiz eval loss is 6.9 (quickstart's "eval before")


def run(ftcore, recipe, out, name, env):
    p = subprocess.run([ftcore, "run", recipe, "--output-dir", out, "--set", f'train.run_name="{name}"',
                        "--set", "train.max_steps=40", "--set", "train.eval_before_training=false",
                        "--set", "train.eval_generation_samples=0", "--set", "calibration.samples=32"], cwd=ROOT, env=env, capture_output=True,
                       text=True)
    assert p.returncode == 0, f"{name} exited {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    after = next(line for line in p.stdout.splitlines() if line.startswith("eval after:"))
    loss = float(re.search(r"loss (-?[\d.]+)", after).group(1))
    speeds = []
    with open(os.path.join(out, name, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("phase") == "train" and "tokens_per_second" in r:
                speeds.append(r["tokens_per_second"])
    memory = [line for line in p.stdout.splitlines() + p.stderr.splitlines() if "quantized base" in line]
    return loss, (sum(speeds[1:]) / max(len(speeds) - 1, 1) if speeds else float("nan")), memory


def main():
    ftcore = sys.argv[1]
    if not os.path.exists(os.path.join(MODEL, "model.safetensors")):
        print("SKIP: the default model is not set up (third_party/setup_defaults.sh)")
        sys.exit(77)
    env = dict(os.environ, FTCORE_PLUGIN_PATH="", OMP_WAIT_POLICY="PASSIVE")
    with tempfile.TemporaryDirectory() as out:
        dense = os.path.join(out, "dense.toml")
        with open(dense, "w") as f:
            f.write(f'base = "{ROOT}/configs/quickstart.toml"\n\n[adapter]\nname = "lora"\nr = 8\nalpha = 16.0\n'
                    'dropout = 0.05\ntarget_modules = ["all-linear"]\n')
        results = {}
        for name, recipe in (("dense", dense), ("nf4", "configs/qlora.toml"), ("gptq", "configs/qlora_gptq.toml")):
            results[name] = run(ftcore, recipe, out, name, env)
            loss, speed, memory = results[name]
            print(f"{name}: eval loss after 40 steps {loss:.4f}, {speed:.0f} tokens/s"
                  + (f"; {memory[0].split('quantized base: ', 1)[-1]}" if memory else ""))
        reference = results["dense"][0]
        for name in ("nf4", "gptq"):
            loss = results[name][0]
            assert loss < UNTRAINED_LOSS, f"{name}: eval loss {loss:.4f} did not improve on the untrained model"
            assert abs(loss - reference) <= BAND * reference, \
                f"{name}: eval loss {loss:.4f} is not within {BAND:.0%} of the dense LoRA's {reference:.4f}"
        print(f"nf4 and gptq within {BAND:.0%} of dense LoRA's eval loss {reference:.4f}")


if __name__ == "__main__":
    main()
