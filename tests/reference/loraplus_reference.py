"""HF PEFT's side of loraplus_reference_test (tests/reference/loraplus_reference_test.cpp).

PEFT 0.21's create_loraplus_optimizer(model, torch.optim.AdamW, lr=LR, loraplus_lr_ratio=..., ...)
on the tiny random Llamas of lora_reference.py, one case per LoRA+ configuration.

  peft OUT   OUT/model_*, OUT/inputs.safetensors (lora_reference.make_models) and, per case,
             OUT/<case>.json: {"model", "options" (the same adapter as ftcore's adapter/lora_plus
             options), "optimizer" (ftcore's adamw options), "lr", "factor", "groups": one per
             PEFT group, in PEFT's order: {"name" (PEFT's key: groupA, embedding, groupB,
             groupB_no_decay), "params" (ftcore's parameter names), "lr", "weight_decay",
             "scheduled_lr" (after a LambdaLR whose factor is FACTOR)}}.
Prints the case names as a JSON list.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lora_reference import load_base, make_models, saved_name  # noqa: E402  (sets the HF env first)

import torch  # noqa: E402
from peft import LoraConfig, get_peft_model  # noqa: E402
from peft.optimizers import create_loraplus_optimizer  # noqa: E402

LR = 2e-4
FACTOR = 0.37  # a scheduler factor: every group's lr follows it
GROUP_KEYS = ["groupA", "embedding", "groupB", "groupB_no_decay"]  # create_loraplus_optimizer's order

# name -> (model, LoraConfig kwargs, create_loraplus_optimizer kwargs beyond lr,
#          ftcore adapter/lora_plus options, ftcore adamw weight_decay)
CASES = {
    # The optimizer's weight_decay is passed to AdamW but every LoRA+ group sets its own (0 by default).
    "qv_ratio16": ("model_tied", dict(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]),
                   dict(loraplus_lr_ratio=16.0, weight_decay=0.1),
                   dict(loraplus_lr_ratio=16.0), 0.1),
    # DoRA's magnitudes are 1-D: groupB, with loraplus_weight_decay.
    "dora_rslora_all_linear": ("model_untied", dict(r=4, lora_alpha=8, target_modules="all-linear", use_rslora=True,
                                                    use_dora=True),
                               dict(loraplus_lr_ratio=8.0, loraplus_weight_decay=0.05, weight_decay=0.01),
                               dict(r=4, alpha=8.0, target_modules=["all-linear"], use_rslora=True, use_dora=True,
                                    loraplus_lr_ratio=8.0, loraplus_weight_decay=0.05), 0.01),
    # Modules trained in full: o_proj's weight (groupA) and bias (groupB_no_decay), the RMSNorm weights
    # (1-D, not nn.LayerNorm: groupB), embed_tokens (groupA); no LoRA embedding, so no embedding group.
    "modules_bias": ("model_bias", dict(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                        modules_to_save=["o_proj", "norm", "embed_tokens"]),
                     dict(loraplus_lr_ratio=4.0, loraplus_weight_decay=0.02, loraplus_lr_embedding=3e-6),
                     dict(r=4, alpha=8.0, target_modules=["q_proj", "v_proj"],
                          modules_to_save=["o_proj", "norm", "embed_tokens"], loraplus_lr_ratio=4.0,
                          loraplus_weight_decay=0.02, loraplus_lr_embedding=3e-6), 0.01),
}


def write_case(out, case):
    model_name, lora_kwargs, plus_kwargs, options, weight_decay = CASES[case]
    model = get_peft_model(load_base(out, model_name, case), LoraConfig(task_type="CAUSAL_LM", **lora_kwargs))
    names = {id(p): saved_name(n).removeprefix("base_model.model.") for n, p in model.named_parameters()}
    optimizer = create_loraplus_optimizer(model, torch.optim.AdamW, lr=LR, **plus_kwargs)
    initial = [dict(g) for g in optimizer.param_groups]
    torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: FACTOR)
    groups = []
    for key, g, scheduled in zip(GROUP_KEYS, initial, optimizer.param_groups):
        groups.append({"name": key, "params": [names[id(p)] for p in g["params"]], "lr": g["lr"],
                       "weight_decay": g["weight_decay"], "scheduled_lr": scheduled["lr"]})
    with open(os.path.join(out, case + ".json"), "w") as f:
        json.dump({"model": model_name, "options": options, "optimizer": {"lr": LR, "weight_decay": weight_decay},
                   "lr": LR, "factor": FACTOR, "groups": groups}, f, indent=1)


def main(argv):
    torch.set_num_threads(int(os.environ.get("FTCORE_NUM_THREADS", "2")))
    if len(argv) != 2 or argv[0] != "peft":
        sys.exit(__doc__ + "\nusage: loraplus_reference.py peft OUT")
    make_models(argv[1])
    for case in CASES:
        write_case(argv[1], case)
    print(json.dumps(list(CASES)))


if __name__ == "__main__":
    main(sys.argv[1:])
