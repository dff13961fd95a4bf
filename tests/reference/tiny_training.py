"""Shared fixture of the trainer's reference and behaviour tests.

Builds, in a scratch folder, what `ftcore run` needs to train in seconds:
a tiny Llama made by transformers (fixed seed, the default model's
tokenizer, tied embeddings like SmolLM2), an alpaca JSONL of rows of varied
lengths, a PEFT LoRA adapter with nonzero A and B written by PEFT (so both
sides start from the same weights), and recipes; runs the ftcore binary and
reads its metrics.jsonl.
"""
import json
import os
import random
import shutil
import subprocess
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_MODEL = os.path.join(ROOT, "third_party", "models", "SmolLM2-135M-Instruct")
SKIP = 77  # CTest SKIP_RETURN_CODE
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj"]
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def require_default_tokenizer():
    if not os.path.exists(os.path.join(DEFAULT_MODEL, "tokenizer.json")):
        print("SKIP: the default model's tokenizer is not set up (third_party/setup_defaults.sh)")
        sys.exit(SKIP)


def make_model(out):
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         rms_norm_eps=1e-5, initializer_range=0.05, tie_word_embeddings=True,
                         bos_token_id=1, eos_token_id=2, pad_token_id=2)
    model = LlamaForCausalLM(config).to(torch.float32)
    path = os.path.join(out, "model")
    model.save_pretrained(path, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        src = os.path.join(DEFAULT_MODEL, name)
        if os.path.exists(src):
            shutil.copy(src, path)
    return path


def make_data(out, rows=48, seed=0):
    rng = random.Random(seed)
    path = os.path.join(out, "data.jsonl")
    with open(path, "w") as f:
        for i in range(rows):
            instruction = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 12)))
            output = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 10)))
            f.write(json.dumps({"instruction": f"Q{i}: {instruction}", "input": "", "output": output}) + "\n")
    return path


def make_adapter(out, model_path, r=4, alpha=8):
    """A PEFT adapter with random nonzero A and B (B is zero at PEFT's init)."""
    from peft import LoraConfig, get_peft_model
    base = LlamaForCausalLM.from_pretrained(model_path, torch_dtype=torch.float32)
    peft_model = get_peft_model(base, LoraConfig(r=r, lora_alpha=alpha, lora_dropout=0.0, target_modules=TARGETS))
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.05)
    path = os.path.join(out, "init_adapter")
    peft_model.save_pretrained(path)
    return path


def write_recipe(out, name, model, data, adapter_dir=None, train=None, optimizer=None):
    train_keys = dict(micro_batch_size=2, gradient_accumulation_steps=2, max_steps=20, logging_steps=1,
                      precision="fp32", max_grad_norm=1.0, seed=7, output_dir=os.path.join(out, "runs"),
                      run_name=name)
    train_keys.update(train or {})
    opt = dict(name="adamw", lr=1e-3, weight_decay=0.01)
    opt.update(optimizer or {})

    def table(d):
        return "".join(f"{k} = {json.dumps(v)}\n" for k, v in d.items())

    text = (f"[model]\npath = {json.dumps(model)}\n\n"
            f"[data]\npath = {json.dumps(data)}\nformat = \"alpaca\"\nsequence_len = 64\nval_set_size = 0.0\n\n"
            f"[train]\n{table(train_keys)}\n[optimizer]\n{table(opt)}\n"
            "[scheduler]\nname = \"cosine\"\nwarmup_steps = 3\n\n[[logger]]\nname = \"jsonl\"\n")
    if adapter_dir is not None:
        text += (f"\n[adapter]\nname = \"lora\"\nr = 4\nalpha = 8.0\ndropout = 0.0\n"
                 f"target_modules = {json.dumps(TARGETS)}\nlora_model_dir = {json.dumps(adapter_dir)}\n")
    path = os.path.join(out, name + ".toml")
    with open(path, "w") as f:
        f.write(text)
    return path


def run_ftcore(ftcore, recipe, *extra, env=None, check=True):
    e = dict(os.environ, FTCORE_PLUGIN_PATH="", OMP_WAIT_POLICY="PASSIVE")
    e.update(env or {})
    p = subprocess.run([ftcore, "run", recipe, *extra], env=e, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise SystemExit(f"ftcore run {recipe} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    return p


def run_ftcore_command(ftcore, *args, expect=0):
    """Runs `ftcore ARGS...` (in-tree plugins only); returns stdout + stderr, fails unless it exits `expect`."""
    cmd = [ftcore, *args]
    p = subprocess.run(cmd, capture_output=True, text=True,
                       env=dict(os.environ, FTCORE_PLUGIN_PATH="", OMP_WAIT_POLICY="PASSIVE"))
    if p.returncode != expect:
        raise SystemExit(f"{' '.join(cmd)} exited {p.returncode}, expected {expect}:\n{p.stdout}\n{p.stderr}")
    return p.stdout + p.stderr


def check(label, got, want):
    """Asserts got == want, naming the check; prints it when it holds."""
    assert got == want, f"{label}: got {got!r}, want {want!r}"
    print(f"{label}: {got!r}")


def train_metric(run_dir, key):
    """Per-step values of a training metric from metrics.jsonl (logging_steps = 1;
    a step logged again after a resume keeps its last value)."""
    values = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("phase") == "train" and key in r:
                values[r["step"]] = r[key]
    return [values[k] for k in sorted(values)]


def train_losses(run_dir):
    return train_metric(run_dir, "loss")


LORA_SECTION = ("\n[adapter]\nname = \"lora\"\nr = 4\nalpha = 8.0\ndropout = 0.0\n"
                f"target_modules = {json.dumps(TARGETS)}\n")


def lora_recipe(out, name, model, data, adapter=True, lr=5e-3, **train):
    """A recipe training a fresh LoRA adapter (Kaiming A, zero B; or the whole model without `adapter`)."""
    path = write_recipe(out, name, model, data, train=train, optimizer={"lr": lr})
    if adapter:
        with open(path, "a") as f:
            f.write(LORA_SECTION)
    return path


def sha256_of(path):
    import hashlib
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()
