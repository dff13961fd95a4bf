"""Training tokens/s of LoRA on the default model's dense base
against the same LoRA on an NF4 (QLoRA) and a GPTQ base, in one session.

Each round runs `ftcore run` three times (dense, nf4, gptq; LoRA r 8 on
all-linear, batch 8, quiz data, 12 steps, no evals) and reads tokens/s of
steps 2..12 from metrics.jsonl. Rounds alternate the order so load drift hits all sides; the table
shows each side's best round, and the ratios quantized / dense. GPTQ bases
are calibrated at load (32 x 256 tokens), so the GPTQ quantization wall time
on the default model is reported from its log line too.

usage: qlora_vs_lora.py BUILD_DIR [--rounds N]
"""
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "third_party", "models", "SmolLM2-135M-Instruct")
STEPS = 12
QUANTIZERS = {
    "dense": "",
    "nf4": '[quantizer]\nname = "nf4"\ndouble_quant = true\ncompute_dtype = "bf16"\n',
    "gptq": '[quantizer]\nname = "gptq"\nbits = 4\ngroup_size = 128\n\n[calibration]\nsamples = 32\nsequence_len = 256\n',
}


def recipe(out, name):
    path = os.path.join(out, name + ".toml")
    with open(path, "w") as f:
        f.write(f'base = "{ROOT}/configs/quickstart.toml"\n\n[adapter]\nname = "lora"\nr = 8\nalpha = 16.0\n'
                f'dropout = 0.05\ntarget_modules = ["all-linear"]\n\n{QUANTIZERS[name]}')
    return path


def run(ftcore, out, name, index):
    run_name = f"{name}-{index}"
    env = dict(os.environ, FTCORE_PLUGIN_PATH="", OMP_WAIT_POLICY="PASSIVE", FTCORE_NUM_THREADS="2")
    start = time.time()
    p = subprocess.run([ftcore, "run", recipe(out, name), "--output-dir", out, "--set", f'train.run_name="{run_name}"',
                        "--set", f"train.max_steps={STEPS}", "--set", "train.eval_before_training=false",
                        "--set", "train.eval_generation_samples=0", "--set", "data.val_set_size=0.0",
                        "--set", "train.logging_steps=1"], cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.time() - start
    if p.returncode != 0:
        sys.exit(f"{name} failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    speeds = []
    with open(os.path.join(out, run_name, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("phase") == "train" and "tokens_per_second" in r and r["step"] >= 2:
                speeds.append(r["tokens_per_second"])
    log = p.stdout + p.stderr
    return {"tokens_per_second": sum(speeds) / len(speeds), "wall": wall,
            "quantize_line": [line for line in log.splitlines() if "quantized base" in line]}


def main():
    build = sys.argv[1]
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 2
    ftcore = os.path.join(os.path.abspath(build), "bin", "ftcore")
    if not os.path.exists(os.path.join(MODEL, "model.safetensors")):
        sys.exit("the default model is not set up (third_party/setup_defaults.sh)")
    best = {}
    with tempfile.TemporaryDirectory() as out:
        for index in range(rounds):
            order = list(QUANTIZERS) if index % 2 == 0 else list(reversed(QUANTIZERS))
            for name in order:
                result = run(ftcore, out, name, index)
                print(f"round {index + 1} {name}: {result['tokens_per_second']:.1f} tokens/s, run {result['wall']:.0f} s"
                      + (f"; {result['quantize_line'][0].split('info: ', 1)[-1]}" if result["quantize_line"] else ""),
                      flush=True)
                if name not in best or result["tokens_per_second"] > best[name]["tokens_per_second"]:
                    best[name] = result
    print("\n| base | tokens/s (best round) | ratio to dense | run wall time (s) |\n|---|---|---|---|")
    for name, r in best.items():
        print(f"| {name} | {r['tokens_per_second']:.1f} | {r['tokens_per_second'] / best['dense']['tokens_per_second']:.2f} "
              f"| {r['wall']:.0f} |")


if __name__ == "__main__":
    main()
