"""transformers' and PEFT's side of relora_test (tests/reference/relora_test.cpp).

  model OUT            OUT/model, OUT/model_tied: a tiny LlamaForCausalLM (fixed seed,
                       untied / tied embeddings) saved with save_pretrained; OUT/inputs.safetensors:
                       input_ids, attention_mask (right padding) and labels.
  peft OUT ADAPTER     loads ADAPTER (an adapter folder adapter/relora wrote after
                       restarts, rank (K + 1) r) with PeftModel.from_pretrained on
                       OUT/model and writes OUT/peft_logits.safetensors (logits, and
                       merged_logits after merge_and_unload) plus the rank PEFT read.
"""
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import warnings  # noqa: E402

import torch  # noqa: E402
from peft import PeftModel  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

warnings.filterwarnings("ignore")
B, T, V = 3, 12, 96


def make_model(out):
    for name, tied in (("model", False), ("model_tied", True)):
        torch.manual_seed(0)
        config = LlamaConfig(vocab_size=V, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                             rms_norm_eps=1e-5, initializer_range=0.1, tie_word_embeddings=tied,
                             pad_token_id=0, bos_token_id=1, eos_token_id=2)
        LlamaForCausalLM(config).to(torch.float32).save_pretrained(os.path.join(out, name), safe_serialization=True)
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(3, V, (B, T), generator=g)
    mask = torch.ones(B, T, dtype=torch.long)
    mask[1, 9:] = 0
    mask[2, 5:] = 0
    labels = ids.masked_fill(mask == 0, -100)
    save_file({"input_ids": ids, "attention_mask": mask, "labels": labels}, os.path.join(out, "inputs.safetensors"))


def peft_logits(out, adapter):
    base = LlamaForCausalLM.from_pretrained(os.path.join(out, "model"), torch_dtype=torch.float32)
    model = PeftModel.from_pretrained(base, adapter).eval()
    inputs = load_file(os.path.join(out, "inputs.safetensors"))
    with torch.no_grad():
        logits = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).logits
        merged = model.merge_and_unload()
        merged_logits = merged(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).logits
    save_file({"logits": logits.contiguous(), "merged_logits": merged_logits.contiguous()},
              os.path.join(out, "peft_logits.safetensors"))
    config = model.peft_config["default"]
    print(json.dumps({"r": config.r, "lora_alpha": config.lora_alpha}))


if __name__ == "__main__":
    torch.set_num_threads(2)
    if sys.argv[1] == "model":
        make_model(sys.argv[2])
    elif sys.argv[1] == "peft":
        peft_logits(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit(f"unknown command {sys.argv[1]}")
