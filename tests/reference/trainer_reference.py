"""`ftcore run` vs a reference loop written with transformers + PEFT + torch.

The same tiny model, the same starting adapter (written by PEFT), the same
micro-batches (ftcore dumps each step's batches with
FTCORE_DEBUG_DUMP_BATCHES; the sampler and data preparation have their own
tests), the same AdamW and cosine schedule: the reference loop normalises
the summed cross-entropy by the accumulated batch's target tokens
(transformers' num_items_in_batch), clips with clip_grad_norm_, steps
torch.optim.AdamW (weight decay on >= 2-D tensors only) and LambdaLR from
get_cosine_schedule_with_warmup. 20 steps of LoRA and of full fine-tuning:
every step's loss within 1e-4 relative; the final LoRA weights within 1e-4.

Usage: trainer_reference.py FTCORE_BINARY
"""
import glob
import os
import sys
import tempfile

import tiny_training as tt

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from transformers import LlamaForCausalLM, get_cosine_schedule_with_warmup  # noqa: E402

STEPS, LR, WD, WARMUP = 20, 1e-3, 0.01, 3
TOLERANCE = 1e-4


def reference_losses(model, dumps):
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    decay = [p for _, p in trainable if p.dim() >= 2]
    no_decay = [p for _, p in trainable if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": WD}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    opt = torch.optim.AdamW(groups, lr=LR, betas=(0.9, 0.999), eps=1e-8)
    schedule = get_cosine_schedule_with_warmup(opt, WARMUP, STEPS)
    losses = []
    for step in range(1, STEPS + 1):
        files = sorted(glob.glob(os.path.join(dumps, f"step-{step}-micro-*.safetensors")))
        assert files, f"no dumped batches for step {step}"
        batches = [load_file(f) for f in files]
        targets = sum(int((b["labels"][:, 1:] != -100).sum()) for b in batches)
        total = 0.0
        for b in batches:
            mask = (b["sequence_ids"] >= 0).long()
            logits = model(input_ids=b["input_ids"], attention_mask=mask, position_ids=b["position_ids"]).logits
            loss = F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.size(-1)), b["labels"][:, 1:].reshape(-1),
                                   ignore_index=-100, reduction="sum")
            (loss / targets).backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_([p for _, p in trainable], 1.0)
        opt.step()
        schedule.step()
        opt.zero_grad(set_to_none=True)
        losses.append(total / targets)
    return losses


def compare(label, ours, ref):
    assert len(ours) == STEPS, f"{label}: ftcore logged {len(ours)} steps, expected {STEPS}"
    worst = max(abs(a - b) / abs(b) for a, b in zip(ours, ref))
    for i, (a, b) in enumerate(zip(ours, ref)):
        if abs(a - b) / abs(b) > TOLERANCE:
            raise SystemExit(f"{label}: step {i + 1} loss {a!r} vs reference {b!r} (relative {abs(a - b) / abs(b):.2e})")
    print(f"{label}: {STEPS} steps, losses {ours[0]:.4f} -> {ours[-1]:.4f}, worst relative difference {worst:.2e}")


def main():
    ftcore = sys.argv[1]
    tt.require_default_tokenizer()
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as out:
        model_path = tt.make_model(out)
        data = tt.make_data(out)
        adapter = tt.make_adapter(out, model_path)

        # LoRA.
        dumps = os.path.join(out, "dumps_lora")
        os.makedirs(dumps)
        recipe = tt.write_recipe(out, "lora", model_path, data, adapter_dir=adapter)
        tt.run_ftcore(ftcore, recipe, env={"FTCORE_DEBUG_DUMP_BATCHES": dumps})
        ours = tt.train_losses(os.path.join(out, "runs", "lora"))
        from peft import PeftModel
        base = LlamaForCausalLM.from_pretrained(model_path, torch_dtype=torch.float32)
        peft_model = PeftModel.from_pretrained(base, adapter, is_trainable=True)
        ref = reference_losses(peft_model, dumps)
        compare("lora", ours, ref)
        final = load_file(os.path.join(out, "runs", "lora", "adapter_model.safetensors"))
        ref_state = {k: v for k, v in peft_model.state_dict().items() if "lora_" in k}
        worst = 0.0
        for name, value in final.items():
            key = name.replace(".lora_A.weight", ".lora_A.default.weight").replace(".lora_B.weight", ".lora_B.default.weight")
            r = ref_state[key]
            worst = max(worst, float((value - r).abs().max() / r.abs().max()))
        assert worst < TOLERANCE, f"final LoRA weights differ from the reference by {worst:.2e} (relative to max)"
        print(f"lora: final adapter ({len(final)} tensors) within {worst:.2e} of the reference")

        # Full fine-tune.
        dumps = os.path.join(out, "dumps_full")
        os.makedirs(dumps)
        recipe = tt.write_recipe(out, "full", model_path, data, optimizer={"lr": LR})
        tt.run_ftcore(ftcore, recipe, env={"FTCORE_DEBUG_DUMP_BATCHES": dumps})
        ours = tt.train_losses(os.path.join(out, "runs", "full"))
        model = LlamaForCausalLM.from_pretrained(model_path, torch_dtype=torch.float32)
        compare("full fine-tune", ours, reference_losses(model, dumps))


if __name__ == "__main__":
    main()
