"""`ftcore run` of 10 LoRA steps (all-linear) on a tiny Qwen3 and a tiny Gemma 3.

Each model is the family's tiny config of model_families.py (vocabulary
widened to a BPE tokenizer trained here, tests/unit/data_reference.py's),
made by transformers and saved with that tokenizer; the data is
tiny_training.py's alpaca rows. Checks that the run exits 0, logs 10 finite
losses whose last three average below the first three, and that the adapter
it saves loads in PEFT onto the transformers model and changes its logits.

Usage: family_training.py FTCORE_BINARY
"""
import json
import math
import os
import sys
import tempfile

import tiny_training as tt
from model_families import TINY

import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "unit"))
from data_reference import make_tokenizer  # noqa: E402

FAMILIES = ["qwen3_qk_norm", "gemma3_local_global"]
STEPS = 10


def make_family_model(out, name):
    cls, config = TINY[name]
    config = config.__class__.from_dict({**config.to_dict(), "vocab_size": 400, "eos_token_id": 0, "pad_token_id": 0,
                                         "bos_token_id": None})
    torch.manual_seed(0)
    path = os.path.join(out, name)
    cls(config).save_pretrained(path, safe_serialization=True)
    make_tokenizer(path)
    return cls, path


def check_family(ftcore, out, name):
    cls, model = make_family_model(out, name)
    data = tt.make_data(out)
    recipe = tt.write_recipe(out, name, model, data, train=dict(max_steps=STEPS, micro_batch_size=4,
                                                                gradient_accumulation_steps=1),
                             optimizer=dict(lr=1e-2))
    with open(recipe, "a") as f:
        f.write('\n[adapter]\nname = "lora"\nr = 8\nalpha = 16.0\ndropout = 0.0\ntarget_modules = ["all-linear"]\n')
    tt.run_ftcore(ftcore, recipe)
    run_dir = os.path.join(out, "runs", name)
    losses = tt.train_losses(run_dir)
    print(f"[ measure ] {name}: {len(losses)} LoRA steps, losses {', '.join(f'{x:.4f}' for x in losses)}")
    assert len(losses) == STEPS, f"{name}: expected {STEPS} logged losses, got {len(losses)}"
    assert all(math.isfinite(x) for x in losses), f"{name}: non-finite loss"
    first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    assert last < first, f"{name}: the loss did not fall (first three {first:.4f}, last three {last:.4f})"

    from peft import PeftModel
    adapters = [os.path.join(r, "") for r, _, files in os.walk(run_dir) if "adapter_config.json" in files]
    assert adapters, f"{name}: no adapter_config.json under {run_dir}"
    base = cls.from_pretrained(model, dtype=torch.float32).eval()
    ids = torch.randint(3, 400, (1, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        before = base(input_ids=ids).logits
        tuned = PeftModel.from_pretrained(base, sorted(adapters)[-1]).eval()
        after = tuned(input_ids=ids).logits
        with open(os.path.join(sorted(adapters)[-1], "adapter_config.json")) as f:
            targets = set(json.load(f)["target_modules"])
    moved = (after - before).abs().max().item()
    print(f"[ measure ] {name}: ftcore's trained adapter in PEFT (targets {sorted(targets)}) moves logits by {moved:.4f}")
    assert moved > 1e-3, f"{name}: the trained adapter does not change PEFT's logits"


def main(argv):
    if len(argv) != 1:
        sys.exit(__doc__)
    torch.set_num_threads(int(os.environ.get("FTCORE_NUM_THREADS", "2")))
    with tempfile.TemporaryDirectory() as out:
        for name in FAMILIES:
            check_family(argv[0], out, name)
    print("family training: OK")


if __name__ == "__main__":
    main(sys.argv[1:])
