"""transformers' side of model_test (tests/unit/model_test.cpp).

Writes what the C++ test compares against, always with transformers' own
classes (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM):

  tiny CONFIG OUT      a tiny random model (fixed seed) saved with
                       save_pretrained (safetensors) to OUT/model, and
                       OUT/reference.safetensors: input_ids, attention_mask,
                       position_ids and transformers' fp32 logits for a batch
                       with an unpadded, a left-padded and a right-padded row.
  default DTYPE OUT    the same inputs and logits for the default model
                       (third_party/models/SmolLM2-135M-Instruct) in fp32 or bf16.
  generate OUT         greedy generate(do_sample=False) of the default model
                       (fp32) on three prompts: OUT/generate.json.

Positions skip padding (cumsum(mask) - 1), as ftcore's default positions do;
transformers is given them explicitly.
"""
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
from safetensors.torch import save_file
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_MODEL = os.path.join(ROOT, "third_party", "models", "SmolLM2-135M-Instruct")

COMMON = dict(vocab_size=96, hidden_size=64, intermediate_size=160, num_hidden_layers=3, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5, initializer_range=0.1,
              pad_token_id=0, bos_token_id=1, eos_token_id=2)

# name -> (model class, config); each exercises one feature beyond the first.
TINY = {
    "llama_gqa_tied": (LlamaForCausalLM, LlamaConfig(**COMMON, tie_word_embeddings=True)),
    "llama_mha_bias": (LlamaForCausalLM, LlamaConfig(**{**COMMON, "num_key_value_heads": 4}, attention_bias=True,
                                                     mlp_bias=True, head_dim=32)),
    "llama_rope_linear": (LlamaForCausalLM, LlamaConfig(**COMMON, rope_scaling={"rope_type": "linear", "factor": 2.5})),
    # max_position_embeddings below the sequence so dynamic NTK really rescales.
    "llama_rope_dynamic": (LlamaForCausalLM, LlamaConfig(**{**COMMON, "max_position_embeddings": 12},
                                                         rope_scaling={"rope_type": "dynamic", "factor": 3.0})),
    # original context 64 puts head_dim 16's wavelengths in all three llama3 bands.
    "llama_rope_llama3": (LlamaForCausalLM, LlamaConfig(**COMMON, rope_theta=500000.0, rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64})),
    "qwen2_bias": (Qwen2ForCausalLM, Qwen2Config(**COMMON, rope_theta=1000000.0, tie_word_embeddings=False)),
    "mistral_window": (MistralForCausalLM, MistralConfig(**COMMON, sliding_window=6)),
}

T = 20  # tokens per row


def batch_inputs(vocab, seed):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (3, T), generator=g)
    mask = torch.ones(3, T, dtype=torch.long)
    mask[1, :7] = 0   # left padding
    mask[2, -5:] = 0  # right padding
    ids = ids.masked_fill(mask == 0, 0)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return ids, mask, positions


def logits_of(model, ids, mask, positions):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask, position_ids=positions).logits.float()


def write_tiny(name, out):
    cls, config = TINY[name]
    torch.manual_seed(1234)
    model = cls(config).eval()
    model.save_pretrained(os.path.join(out, "model"), safe_serialization=True)
    ids, mask, positions = batch_inputs(config.vocab_size, 7)
    logits = logits_of(model, ids, mask, positions)
    save_file({"input_ids": ids, "attention_mask": mask, "position_ids": positions, "logits": logits.contiguous()},
              os.path.join(out, "reference.safetensors"))


def write_default(dtype_name, out):
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
    model = LlamaForCausalLM.from_pretrained(DEFAULT_MODEL, dtype=dtype).eval()
    ids, mask, positions = batch_inputs(model.config.vocab_size, 11)
    logits = logits_of(model, ids, mask, positions)
    save_file({"input_ids": ids, "attention_mask": mask, "position_ids": positions, "logits": logits.contiguous()},
              os.path.join(out, "reference.safetensors"))


PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, in a small village,",
]


def write_generate(out):
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(DEFAULT_MODEL)
    model = LlamaForCausalLM.from_pretrained(DEFAULT_MODEL, dtype=torch.float32).eval()
    cases = []
    for prompt in PROMPTS:
        ids = tok(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            gen = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=24,
                                 pad_token_id=model.generation_config.pad_token_id)
        cases.append({"prompt": prompt, "prompt_ids": ids[0].tolist(), "generated": gen[0, ids.shape[1]:].tolist(),
                      "eos": model.generation_config.eos_token_id})
    with open(os.path.join(out, "generate.json"), "w") as f:
        json.dump(cases, f)


def main(argv):
    torch.set_num_threads(int(os.environ.get("FTCORE_NUM_THREADS", "2")))
    if len(argv) == 3 and argv[0] == "tiny" and argv[1] in TINY:
        write_tiny(argv[1], argv[2])
    elif len(argv) == 3 and argv[0] == "default":
        write_default(argv[1], argv[2])
    elif len(argv) == 2 and argv[0] == "generate":
        write_generate(argv[1])
    elif len(argv) == 1 and argv[0] == "has-default":
        print("yes" if os.path.exists(os.path.join(DEFAULT_MODEL, "model.safetensors")) else "no")
    else:
        sys.exit(__doc__ + "\nusage: model_reference.py tiny {%s} OUT | default fp32|bf16 OUT | generate OUT"
                 % ",".join(TINY))


if __name__ == "__main__":
    main(sys.argv[1:])
