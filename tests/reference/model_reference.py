"""transformers' side of model_test (tests/unit/model_test.cpp).

Writes what the C++ test compares against, always with transformers' own
classes (the tiny configs of every family are in model_families.py):

  tiny CONFIG OUT      a tiny random model (fixed seed) saved with
                       save_pretrained (safetensors) to OUT/model, and
                       OUT/reference.safetensors: input_ids, attention_mask,
                       position_ids and transformers' fp32 logits for a batch
                       with an unpadded, a left-padded and a right-padded row.
  tiny-generate CONFIG OUT   the tiny model as above, and OUT/generate.json:
                       greedy generate(do_sample=False) on three random prompts;
                       OUT/generate_batch.json: the same three prompts left-padded
                       in ONE batched generate, without a stop token and with one
                       that ends the rows at different steps (finished rows then
                       get pad_token_id, which is cut off here).
  tiny-eval OUT        a tiny Llama with a 400-token BPE tokenizer trained here
                       (tests/unit/data_reference.py's) in OUT/model, for the
                       batched-vs-one-at-a-time evaluation test.
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
from transformers import LlamaForCausalLM

from model_families import TINY  # noqa: E402  (every family's tiny config, shared with the other references)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_MODEL = os.path.join(ROOT, "third_party", "models", "SmolLM2-135M-Instruct")

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


def write_tiny_generate(name, out):
    write_tiny(name, out)
    cls, config = TINY[name]
    model = cls.from_pretrained(os.path.join(out, "model"), dtype=torch.float32).eval()
    g = torch.Generator().manual_seed(5)
    cases = []
    for length in (4, 7, 11):
        ids = torch.randint(3, config.vocab_size, (1, length), generator=g)
        with torch.no_grad():
            gen = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=14,
                                 min_new_tokens=14, pad_token_id=config.pad_token_id)
        cases.append({"prompt_ids": ids[0].tolist(), "generated": gen[0, length:].tolist()})
    with open(os.path.join(out, "generate.json"), "w") as f:
        json.dump(cases, f)
    write_batch_generate(model, config, [c["prompt_ids"] for c in cases], out)


def batch_generate(model, config, prompts, **kwargs):
    """transformers' batched greedy generate over left-padded prompts; new tokens per row."""
    longest = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), longest), config.pad_token_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, prompt in enumerate(prompts):
        ids[row, longest - len(prompt):] = torch.tensor(prompt)
        mask[row, longest - len(prompt):] = 1
    with torch.no_grad():
        gen = model.generate(ids, attention_mask=mask, do_sample=False, max_new_tokens=14,
                             pad_token_id=config.pad_token_id, **kwargs)
    return [row[longest:].tolist() for row in gen]


def up_to_stop(tokens, stop):
    return tokens[:tokens.index(stop) + 1] if stop in tokens else tokens


def write_batch_generate(model, config, prompts, out):
    free = batch_generate(model, config, prompts, min_new_tokens=14)
    # The stop token: one the rows emit after their first step, picked so that
    # they stop at as many different steps as possible (a finished row must
    # not disturb the others); ties go to the smallest id, for a fixed pick.
    candidates = sorted({t for row in free for t in row[1:10] if t != config.pad_token_id})
    stop = max(candidates, key=lambda t: (len({len(up_to_stop(row, t)) for row in free}), -t))
    stopped = [up_to_stop(row, stop) for row in batch_generate(model, config, prompts, eos_token_id=stop)]
    with open(os.path.join(out, "generate_batch.json"), "w") as f:
        json.dump({"prompt_ids": prompts, "generated": free, "stop_token": stop, "stopped": stopped}, f)


def write_tiny_eval(out):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "unit"))
    from data_reference import make_tokenizer
    cls, config = TINY["llama_gqa_tied"]
    config = config.__class__.from_dict({**config.to_dict(), "vocab_size": 400})
    torch.manual_seed(1234)
    path = os.path.join(out, "model")
    cls(config).save_pretrained(path, safe_serialization=True)
    make_tokenizer(path)


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
    elif len(argv) == 3 and argv[0] == "tiny-generate" and argv[1] in TINY:
        write_tiny_generate(argv[1], argv[2])
    elif len(argv) == 2 and argv[0] == "tiny-eval":
        write_tiny_eval(argv[1])
    elif len(argv) == 3 and argv[0] == "default":
        write_default(argv[1], argv[2])
    elif len(argv) == 2 and argv[0] == "generate":
        write_generate(argv[1])
    elif len(argv) == 1 and argv[0] == "has-default":
        print("yes" if os.path.exists(os.path.join(DEFAULT_MODEL, "model.safetensors")) else "no")
    else:
        sys.exit(__doc__ + "\nusage: model_reference.py tiny|tiny-generate {%s} OUT | tiny-eval OUT | default fp32|bf16 OUT | generate OUT"
                 % ",".join(TINY))


if __name__ == "__main__":
    main(sys.argv[1:])
