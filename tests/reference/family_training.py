"""`ftcore run` of 10 LoRA steps (all-linear) on a tiny Qwen3 and a tiny Gemma 3,
and (`qlora`) of 10 QLoRA steps on an nf4 base of a tiny Qwen3, Gemma 3 and Mixtral.

Each model is the family's tiny config of model_families.py / moe_reference.py
(vocabulary widened to a BPE tokenizer trained here, tests/unit/data_reference.py's),
made by transformers and saved with that tokenizer; the data is
tiny_training.py's alpaca rows. Checks that the run exits 0, logs 10 finite
losses whose last three average below the first three, and that the adapter
it saves loads in PEFT onto the transformers model and changes its logits.

QLoRA ([quantizer] nf4, double quant, fp32 compute): the adapter loads in
PEFT onto transformers' BitsAndBytesConfig(nf4) model of the same checkpoint,
and `ftcore merge` of it into that model saved by transformers (a bnb 4-bit
folder) gives a dense folder whose transformers logits equal PEFT's on the
4-bit model within 1e-5 (fp32: both compute bnb's dequantized W plus
scaling x B A, in another order); `ftcore merge --requantize` writes a
folder whose every Linear4bit dequantizes exactly as bnb's own
quantize_4bit of the dense merged weight.

Usage: family_training.py FTCORE_BINARY [qlora]
"""
import json
import math
import os
import sys
import tempfile

import tiny_training as tt
from model_families import TINY as DENSE_TINY
from moe_reference import TINY as MOE_TINY

import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "unit"))
from data_reference import make_tokenizer  # noqa: E402

TINY = {**DENSE_TINY, **MOE_TINY}
FAMILIES = ["qwen3_qk_norm", "gemma3_local_global"]
QLORA_FAMILIES = ["qwen3_qk_norm", "gemma3_local_global", "mixtral"]
STEPS = 10
NF4 = '\n[quantizer]\nname = "nf4"\ndouble_quant = true\ncompute_dtype = "fp32"\n'
MERGE_TOLERANCE = 1e-5


def make_family_model(out, name, **overrides):
    cls, config = TINY[name]
    config = config.__class__.from_dict({**config.to_dict(), "vocab_size": 400, "eos_token_id": 0, "pad_token_id": 0,
                                         "bos_token_id": None, **overrides})
    torch.manual_seed(0)
    path = os.path.join(out, name)
    cls(config).save_pretrained(path, safe_serialization=True)
    make_tokenizer(path)
    return cls, path


def check_family(ftcore, out, name, quantized=False):
    from quantized_families_reference import BLOCK_WHOLE
    # QLoRA compares with transformers + bnb, whose CPU path needs whole blocks per row.
    cls, model = make_family_model(out, name, **(BLOCK_WHOLE if quantized and name in DENSE_TINY else {}))
    data = tt.make_data(out)
    recipe = tt.write_recipe(out, name, model, data, train=dict(max_steps=STEPS, micro_batch_size=4,
                                                                gradient_accumulation_steps=1),
                             optimizer=dict(lr=1e-2))
    with open(recipe, "a") as f:
        f.write('\n[adapter]\nname = "lora"\nr = 8\nalpha = 16.0\ndropout = 0.0\ntarget_modules = ["all-linear"]\n')
        if quantized:
            f.write(NF4)
    tt.run_ftcore(ftcore, recipe)
    run_dir = os.path.join(out, "runs", name)
    losses = tt.train_losses(run_dir)
    print(f"[ measure ] {name}: {len(losses)} LoRA steps, losses {', '.join(f'{x:.4f}' for x in losses)}")
    assert len(losses) == STEPS, f"{name}: expected {STEPS} logged losses, got {len(losses)}"
    assert all(math.isfinite(x) for x in losses), f"{name}: non-finite loss"
    first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    assert last < first, f"{name}: the loss did not fall (first three {first:.4f}, last three {last:.4f})"

    if quantized:
        return check_qlora_adapter(ftcore, out, name, model, run_dir)
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


def check_qlora_adapter(ftcore, out, name, model, run_dir):
    """The final adapter on transformers' nf4 model (PEFT) vs `ftcore merge` of it into that model's saved folder."""
    import bitsandbytes.functional as F
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM
    from quantized_families_reference import bnb_model
    base = bnb_model(model, "nf4")
    bnb_dir = os.path.join(out, name + "_bnb")
    base.save_pretrained(bnb_dir)
    ids = torch.randint(3, 400, (2, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        before = base(input_ids=ids).logits
        tuned = PeftModel.from_pretrained(base, run_dir).eval()
        after = tuned(input_ids=ids).logits
    moved = (after - before).abs().max().item()
    merged_dir = os.path.join(out, name + "_merged")
    log = tt.run_ftcore_command(ftcore, "merge", "--model", bnb_dir, "--adapter", run_dir, "--out", merged_dir,
                                "--dtype", "fp32")
    assert "base dequantized" in log, f"{name}: the merge did not load the 4-bit base:\n{log}"
    with torch.no_grad():
        merged = AutoModelForCausalLM.from_pretrained(merged_dir, dtype=torch.float32).eval()(input_ids=ids).logits
    diff = (merged - after).abs().max().item()
    print(f"[ measure ] {name}: ftcore's QLoRA adapter in PEFT on transformers' nf4 model moves logits by "
          f"{moved:.4f}; ftcore merge into the nf4 base vs PEFT on it: max |logit diff| {diff:.2e}")
    assert moved > 1e-3, f"{name}: the trained adapter does not change PEFT's logits"
    assert diff < MERGE_TOLERANCE, f"{name}: merged logits differ from PEFT on the nf4 model by {diff:.2e}"

    requantized = os.path.join(out, name + "_merged_nf4")
    tt.run_ftcore_command(ftcore, "merge", "--model", bnb_dir, "--adapter", run_dir, "--out", requantized,
                          "--dtype", "fp32", "--requantize")
    dense = load_file(os.path.join(merged_dir, "model.safetensors"))
    again = bnb_model(requantized)
    checked = 0
    for module_name, module in again.named_modules():
        if type(module).__name__ != "Linear4bit":
            continue
        packed, state = F.quantize_4bit(dense[module_name + ".weight"], blocksize=64, quant_type="nf4",
                                        compress_statistics=True)
        expected = F.dequantize_4bit(packed, state)
        got = F.dequantize_4bit(module.weight.data, module.weight.quant_state)
        assert torch.equal(got, expected), f"{name}: re-quantized {module_name} differs from bnb's quantization"
        checked += 1
    assert checked > 0, f"{name}: transformers finds no Linear4bit in the re-quantized merge"
    print(f"[ measure ] {name}: merge --requantize: {checked} Linear4bit layers equal bnb's quantize_4bit of the merge")


def main(argv):
    if len(argv) not in (1, 2) or (len(argv) == 2 and argv[1] != "qlora"):
        sys.exit(__doc__)
    torch.set_num_threads(int(os.environ.get("FTCORE_NUM_THREADS", "2")))
    quantized = len(argv) == 2
    with tempfile.TemporaryDirectory() as out:
        for name in QLORA_FAMILIES if quantized else FAMILIES:
            check_family(argv[0], out, name, quantized)
    print("family training" + (" (qlora nf4)" if quantized else "") + ": OK")


if __name__ == "__main__":
    main(sys.argv[1:])
