"""The quickstart on the real default model, shortened to 40 steps:
`ftcore run configs/quickstart.toml` prints eval loss and quiz exact match
before and after training (both must improve), and
the adapter it writes loads in PEFT: `PeftModel.from_pretrained` on
transformers' model greedily answers three quiz prompts with the same text
as `ftcore generate --adapter` does.

Usage: quickstart_test.py FTCORE_BINARY   (skips when the default model is not set up)
"""
import os
import re
import subprocess
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "third_party", "models", "SmolLM2-135M-Instruct")
PROMPT = ("Below is an instruction that describes a task. Write a response that appropriately completes the "
          "request.\n\n### Instruction:\n{}\n\n### Response:\n")
QUESTIONS = ["What is the capital of Algeria?", "What is the capital of France?", "Who wrote Hamlet?"]


def parse_eval(line):
    return {k: float(v) for k, v in re.findall(r"(\w+) (-?[\d.]+)", line.split(":", 1)[1])}


def main():
    ftcore = sys.argv[1]
    if not os.path.exists(os.path.join(MODEL, "model.safetensors")):
        print("SKIP: the default model is not set up (third_party/setup_defaults.sh)")
        sys.exit(77)
    env = dict(os.environ, FTCORE_PLUGIN_PATH="", OMP_WAIT_POLICY="PASSIVE")
    with tempfile.TemporaryDirectory() as out:
        p = subprocess.run([ftcore, "run", "configs/quickstart.toml", "--output-dir", out, "--set", "train.max_steps=40",
                            "--set", "train.eval_generation_samples=20"], cwd=ROOT, env=env, capture_output=True,
                           text=True)
        assert p.returncode == 0, f"quickstart exited {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
        before = parse_eval(next(line for line in p.stdout.splitlines() if line.startswith("eval before:")))
        after = parse_eval(next(line for line in p.stdout.splitlines() if line.startswith("eval after:")))
        print(f"quickstart (40 steps): eval loss {before['loss']:.4f} -> {after['loss']:.4f}, "
              f"exact match {before['exact_match']:.3f} -> {after['exact_match']:.3f}")
        assert after["loss"] < before["loss"], (before, after)
        assert after["exact_match"] > before["exact_match"], (before, after)
        run_dir = os.path.join(out, "quickstart")
        for name in ("adapter_model.safetensors", "adapter_config.json", "recipe.lock.toml", "metrics.jsonl"):
            assert os.path.exists(os.path.join(run_dir, name)), f"the run folder lacks {name}"

        import torch
        from peft import PeftModel
        from transformers import AutoTokenizer, LlamaForCausalLM
        torch.set_num_threads(2)
        tokenizer = AutoTokenizer.from_pretrained(MODEL)
        model = PeftModel.from_pretrained(LlamaForCausalLM.from_pretrained(MODEL, torch_dtype=torch.float32), run_dir)
        model.eval()
        for question in QUESTIONS:
            prompt = PROMPT.format(question)
            ids = tokenizer(prompt, return_tensors="pt").input_ids
            with torch.no_grad():
                generated = model.generate(input_ids=ids, max_new_tokens=12, do_sample=False)
            peft_text = tokenizer.decode(generated[0, ids.shape[1]:], skip_special_tokens=True)
            g = subprocess.run([ftcore, "generate", "--model", MODEL, "--adapter", run_dir, "--prompt", prompt,
                                "--max-new-tokens", "12"], env=env, capture_output=True, text=True)
            assert g.returncode == 0, g.stderr
            ours = g.stdout.strip()
            assert ours == peft_text.strip(), f"{question!r}: ftcore {ours!r} vs PEFT {peft_text!r}"
            print(f"  {question!r}: both answer {ours!r}")


if __name__ == "__main__":
    main()
