"""`ftcore generate` against transformers end to end (tokenizer, chat
template, model, greedy decoding, streamed detokenization):

1. --prompt TEXT on three prompts: ftcore's printed text must equal
   transformers' tokenizer.decode(generate(do_sample=False), skip_special_tokens=True).
2. --chat TEXT: the same with tokenizer.apply_chat_template(add_generation_prompt=True).
3. --adapter with a folder that is not an adapter, and --prompt with --chat,
   are refused with a clear message (exit 2).

Runs on the default model (fp32); says SKIPPED and exits 0 when it is absent.

usage: model_reference_cli.py FTCORE_BINARY
"""
import os
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import torch  # noqa: E402
from transformers import AutoTokenizer, LlamaForCausalLM  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "third_party", "models", "SmolLM2-135M-Instruct")
NEW_TOKENS = 20
PROMPTS = ["The capital of France is", "def fibonacci(n):", "Once upon a time, in a small village,"]
CHAT = "What is the capital of France?"


def ftcore(binary, *args):
    env = dict(os.environ, FTCORE_NUM_THREADS=os.environ.get("FTCORE_NUM_THREADS", "2"))
    return subprocess.run([binary, "generate", "--model", MODEL, *args], capture_output=True, text=True, env=env)


def hf_text(model, tok, ids):
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=NEW_TOKENS,
                             pad_token_id=model.generation_config.pad_token_id)
    return tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)


def main():
    binary = sys.argv[1]
    if not os.path.exists(os.path.join(MODEL, "model.safetensors")):
        print(f"SKIPPED: default model absent at {MODEL} (run third_party/setup_defaults.sh)")
        return 0
    torch.set_num_threads(int(os.environ.get("FTCORE_NUM_THREADS", "2")))
    tok = AutoTokenizer.from_pretrained(MODEL)
    model = LlamaForCausalLM.from_pretrained(MODEL, dtype=torch.float32).eval()
    failures = 0
    cases = [(["--prompt", p], tok(p, return_tensors="pt").input_ids) for p in PROMPTS]
    chat_ids = tok.apply_chat_template([{"role": "user", "content": CHAT}], add_generation_prompt=True,
                                       return_tensors="pt", return_dict=True)["input_ids"]
    cases.append((["--chat", CHAT], chat_ids))
    for args, ids in cases:
        expected = hf_text(model, tok, ids)
        r = ftcore(binary, *args, "--max-new-tokens", str(NEW_TOKENS))
        got = r.stdout[:-1] if r.stdout.endswith("\n") else r.stdout  # the command ends with a newline
        ok = r.returncode == 0 and got == expected
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {' '.join(args)!r}: {got!r}" + ("" if ok else f"\n     expected {expected!r}\n     stderr {r.stderr}"))
    for args, needle in [(["--adapter", "/tmp/none", "--prompt", "hi"], "not a PEFT adapter folder"),
                         (["--prompt", "a", "--chat", "b"], "exactly one of --prompt and --chat")]:
        r = ftcore(binary, *args)
        ok = r.returncode == 2 and needle in r.stderr
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} refuses {' '.join(args)!r}" + ("" if ok else f": rc {r.returncode}, {r.stderr!r}"))
    print("all agree" if failures == 0 else f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
