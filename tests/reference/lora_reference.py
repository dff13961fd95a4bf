"""HF PEFT's side of lora_reference_test (tests/reference/lora_reference_test.cpp).

Everything the C++ test compares against is computed here by peft 0.21 and
transformers on tiny random Llamas (fixed seeds); nothing is copied from
ftcore's own output.

  peft OUT [CASE...]   OUT/model_tied, OUT/model_untied, OUT/model_bias: tiny LlamaForCausalLM
                       (tied / untied embeddings; untied with attention biases), and a tiny
                       Qwen3, Gemma 3 and Phi-3 (model_families.py), saved with save_pretrained;
                       OUT/inputs.safetensors: input_ids, attention_mask,
                       position_ids (padding skipped) and labels (-100 on padding).
                       For each case (all by default), OUT/<case>/:
                         case.json       the model folder, its dtype and the equivalent ftcore options
                         initial.safetensors  the adapter right after get_peft_model with
                                         torch.manual_seed(INIT_SEED) (PEFT's initialisation)
                         targets.json    the modules PEFT wrapped with LoRA / modules_to_save
                         adapter/        save_pretrained after A, B set to random non-zero values,
                                         DoRA magnitudes and modules_to_save copies perturbed
                         reference.safetensors  initial_logits (eval mode, right after get_peft_model),
                                         logits (fp32, train mode, torch seeded with
                                         FORWARD_SEED so LoRA dropout draws alike) and
                                         "grad.<ftcore parameter name>" for every trainable
                                         tensor after a cross-entropy loss on labels
  load OUT [CASE...]   loads OUT/<case>/ftcore_adapter (written by the C++ test) with
                       PeftModel.from_pretrained on the case's model and writes
                       OUT/<case>/peft_of_ftcore.safetensors (logits, and merged_logits
                       after merge_and_unload) and OUT/<case>/targets_of_ftcore.json.
"""
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import warnings  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from peft import LoraConfig, PeftModel, get_peft_model, get_peft_model_state_dict  # noqa: E402
from peft.tuners.lora import LoraLayer  # noqa: E402
from peft.utils import ModulesToSaveWrapper  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM  # noqa: E402

from model_families import TINY as FAMILY_MODELS  # noqa: E402

warnings.filterwarnings("ignore")

COMMON = dict(vocab_size=96, hidden_size=64, intermediate_size=160, num_hidden_layers=3, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5, initializer_range=0.1,
              pad_token_id=0, bos_token_id=1, eos_token_id=2)
# name -> LlamaConfig kwargs beyond COMMON
MODELS = {"model_tied": dict(tie_word_embeddings=True), "model_untied": dict(tie_word_embeddings=False),
          "model_bias": dict(tie_word_embeddings=False, attention_bias=True)}
# Other families (model_families.py): q/k norms, Gemma's norms and caps, Phi-3's fused projections.
FAMILY_CASE_MODELS = ["qwen3_qk_norm", "gemma3_local_global", "phi3_longrope"]
BF16_CASES = {"all_linear_bf16", "dora_bf16"}  # the model is loaded in bf16 on both sides
INIT_SEED = 4321  # the C++ test seeds torch the same way before apply()
FORWARD_SEED = 777  # ... and before the train-mode forward (dropout draws)
T = 20

# name -> (model, PEFT LoraConfig kwargs, the same adapter as ftcore options)
CASES = {
    "qv_defaults": ("model_tied", dict(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]), {}),
    "all_linear_rslora": ("model_untied", dict(r=4, lora_alpha=8, target_modules="all-linear", use_rslora=True),
                          dict(r=4, alpha=8.0, target_modules=["all-linear"], use_rslora=True)),
    "all_linear_gaussian_tied": ("model_tied", dict(r=8, lora_alpha=16, target_modules="all-linear",
                                                    init_lora_weights="gaussian"),
                                 dict(target_modules=["all-linear"], init="gaussian")),
    "layers_and_exclude": ("model_tied", dict(r=6, lora_alpha=12, target_modules=["q_proj", "k_proj", "down_proj"],
                                              layers_to_transform=[0, 2],
                                              exclude_modules=["model.layers.2.self_attn.k_proj"]),
                           dict(r=6, alpha=12.0, target_modules=["q_proj", "k_proj", "down_proj"],
                                layers_to_transform=[0, 2], exclude_modules=["model.layers.2.self_attn.k_proj"])),
    # A full path skips the layer filter; a short name does not.
    "exact_path_and_layer": ("model_untied", dict(r=4, lora_alpha=4, target_modules=["model.layers.0.mlp.up_proj",
                                                                                     "o_proj"],
                                                  layers_to_transform=[1]),
                             dict(r=4, alpha=4.0, target_modules=["model.layers.0.mlp.up_proj", "o_proj"],
                                  layers_to_transform=[1])),
    "regex": ("model_tied", dict(r=4, lora_alpha=16,
                                 target_modules=r"model\.layers\.[02]\.(self_attn\.(q|o)|mlp\.gate)_proj"),
              dict(r=4, target_regex=r"model\.layers\.[02]\.(self_attn\.(q|o)|mlp\.gate)_proj")),
    "save_lm_head_untied": ("model_untied", dict(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                                                 modules_to_save=["lm_head"]),
                            dict(modules_to_save=["lm_head"])),
    "save_lm_head_tied": ("model_tied", dict(r=4, lora_alpha=8, target_modules="all-linear",
                                             modules_to_save=["lm_head"]),
                          dict(r=4, alpha=8.0, target_modules=["all-linear"], modules_to_save=["lm_head"])),
    "save_embed_tied": ("model_tied", dict(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], use_rslora=True,
                                           modules_to_save=["embed_tokens"]),
                        dict(use_rslora=True, modules_to_save=["embed_tokens"])),
    # A bf16 base: A and B stay fp32 (PEFT's autocast_adapter_dtype), A's init rounded to bf16 first.
    "all_linear_bf16": ("model_untied", dict(r=8, lora_alpha=16, target_modules="all-linear"),
                        dict(target_modules=["all-linear"])),
    "save_both_untied": ("model_untied", dict(r=2, lora_alpha=3, target_modules=["v_proj", "down_proj"],
                                              modules_to_save=["embed_tokens", "lm_head"]),
                         dict(r=2, alpha=3.0, target_modules=["v_proj", "down_proj"],
                              modules_to_save=["embed_tokens", "lm_head"])),
    # DoRA: the magnitude vector, its detached norm, its merge.
    "dora_qv": ("model_tied", dict(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], use_dora=True),
                dict(use_dora=True)),
    "dora_all_linear_rslora": ("model_untied", dict(r=4, lora_alpha=8, target_modules="all-linear", use_rslora=True,
                                                    use_dora=True),
                               dict(r=4, alpha=8.0, target_modules=["all-linear"], use_rslora=True, use_dora=True)),
    # Biased slots: the base output minus the bias is DoRA's x W^T.
    "dora_bias": ("model_bias", dict(r=4, lora_alpha=8, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                                     use_dora=True, modules_to_save=["lm_head"]),
                  dict(r=4, alpha=8.0, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], use_dora=True,
                       modules_to_save=["lm_head"])),
    # Dropout in training: DoRA recomputes x W^T on the dropped x.
    "dora_dropout": ("model_bias", dict(r=8, lora_alpha=16, target_modules=["q_proj", "o_proj", "down_proj"],
                                        lora_dropout=0.25, use_dora=True),
                     dict(target_modules=["q_proj", "o_proj", "down_proj"], dropout=0.25, use_dora=True)),
    "dora_bf16": ("model_untied", dict(r=8, lora_alpha=16, target_modules="all-linear", use_dora=True),
                  dict(target_modules=["all-linear"], use_dora=True)),
    # all-linear on the other families: PEFT's choice of modules, one adapter per fused projection.
    "qwen3_all_linear": ("qwen3_qk_norm", dict(r=4, lora_alpha=8, target_modules="all-linear"),
                         dict(r=4, alpha=8.0, target_modules=["all-linear"])),
    "gemma3_all_linear": ("gemma3_local_global", dict(r=4, lora_alpha=8, target_modules="all-linear"),
                          dict(r=4, alpha=8.0, target_modules=["all-linear"])),
    "phi3_fused_all_linear": ("phi3_longrope", dict(r=4, lora_alpha=8, target_modules="all-linear"),
                              dict(r=4, alpha=8.0, target_modules=["all-linear"])),
    "phi3_fused_named": ("phi3_longrope", dict(r=8, lora_alpha=16, target_modules=["qkv_proj", "gate_up_proj"]),
                         dict(target_modules=["qkv_proj", "gate_up_proj"])),
}


def make_models(out):
    for name, extra in MODELS.items():
        torch.manual_seed(1234)
        model = LlamaForCausalLM(LlamaConfig(**COMMON, **extra))
        with torch.no_grad():  # transformers zeroes Linear biases; DoRA must subtract real ones
            for pname, p in model.named_parameters():
                if pname.endswith(".bias"):
                    p.normal_(0.0, 0.1)
        model.save_pretrained(os.path.join(out, name), safe_serialization=True)
    for name in FAMILY_CASE_MODELS:
        cls, config = FAMILY_MODELS[name]
        torch.manual_seed(1234)
        cls(config).save_pretrained(os.path.join(out, name), safe_serialization=True)
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(3, COMMON["vocab_size"], (3, T), generator=g)
    mask = torch.ones(3, T, dtype=torch.long)
    mask[1, :7] = 0   # left padding
    mask[2, -5:] = 0  # right padding
    ids = ids.masked_fill(mask == 0, 0)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    labels = torch.randint(0, COMMON["vocab_size"], (3, T), generator=g).masked_fill(mask == 0, -100)
    save_file({"input_ids": ids, "attention_mask": mask, "position_ids": positions, "labels": labels},
              os.path.join(out, "inputs.safetensors"))


def load_base(out, name, case):
    dtype = torch.bfloat16 if case in BF16_CASES else torch.float32
    return AutoModelForCausalLM.from_pretrained(os.path.join(out, name), dtype=dtype)


def saved_name(param_name):
    """PEFT's parameter name -> ftcore's: the adapter name dropped (what get_peft_model_state_dict writes,
    except that it also drops the magnitude's ".weight")."""
    for part in ("lora_A", "lora_B", "lora_magnitude_vector"):
        param_name = param_name.replace(f".{part}.default.", f".{part}.")
    return param_name.replace(".modules_to_save.default.", ".")


def wrapped_modules(peft_model):
    root = peft_model.base_model.model
    lora = [n for n, m in root.named_modules() if isinstance(m, LoraLayer)]
    saved = [n for n, m in root.named_modules() if isinstance(m, ModulesToSaveWrapper)]
    return {"lora": lora, "modules_to_save": saved}


def logits_of(model, inputs):
    return model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"],
                 position_ids=inputs["position_ids"]).logits.float()


def cross_entropy(logits, labels):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)


def write_case(out, case, inputs):
    model_name, peft_kwargs, ftcore_options = CASES[case]
    folder = os.path.join(out, case)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "case.json"), "w") as f:
        json.dump({"model": model_name, "dtype": "bf16" if case in BF16_CASES else "fp32",
                   "options": ftcore_options}, f, indent=1)

    base = load_base(out, model_name, case)
    torch.manual_seed(INIT_SEED)
    model = get_peft_model(base, LoraConfig(task_type="CAUSAL_LM", **peft_kwargs))
    initial = {k: v.detach().clone().contiguous() for k, v in get_peft_model_state_dict(model).items()}
    save_file(initial, os.path.join(folder, "initial.safetensors"))
    model.eval()
    with torch.no_grad():
        initial_logits = logits_of(model, inputs)
    with open(os.path.join(folder, "targets.json"), "w") as f:
        json.dump(wrapped_modules(model), f, indent=1)

    g = torch.Generator().manual_seed(99)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not p.requires_grad:
                continue
            noise = torch.randn(p.shape, generator=g)
            if ".lora_magnitude_vector." in name:
                p.mul_(1 + 0.2 * noise)
            elif ".lora_" in name:
                p.copy_(noise * 0.1)
            else:
                p.add_(noise * 0.02)
    model.save_pretrained(os.path.join(folder, "adapter"))

    model.train()  # what training runs; LoRA dropout draws from the seeded generator
    torch.manual_seed(FORWARD_SEED)
    logits = logits_of(model, inputs)
    cross_entropy(logits, inputs["labels"]).backward()
    reference = {"logits": logits.detach().contiguous(), "initial_logits": initial_logits.contiguous()}
    for name, p in model.named_parameters():
        if p.requires_grad:
            reference["grad." + saved_name(name).removeprefix("base_model.model.")] = p.grad.detach().contiguous()
    save_file(reference, os.path.join(folder, "reference.safetensors"))


def load_case(out, case, inputs):
    folder = os.path.join(out, case)
    with open(os.path.join(folder, "case.json")) as f:
        model_name = json.load(f)["model"]
    model = PeftModel.from_pretrained(load_base(out, model_name, case), os.path.join(folder, "ftcore_adapter")).eval()
    with open(os.path.join(folder, "targets_of_ftcore.json"), "w") as f:
        json.dump(wrapped_modules(model), f, indent=1)
    with torch.no_grad():
        logits = logits_of(model, inputs)
        merged = model.merge_and_unload()
        merged_logits = logits_of(merged, inputs)
    save_file({"logits": logits.contiguous(), "merged_logits": merged_logits.contiguous()},
              os.path.join(folder, "peft_of_ftcore.safetensors"))


def main(argv):
    torch.set_num_threads(int(os.environ.get("FTCORE_NUM_THREADS", "2")))
    if len(argv) < 2 or argv[0] not in ("peft", "load"):
        sys.exit(__doc__ + "\nusage: lora_reference.py peft|load OUT [CASE...]; cases: " + ", ".join(CASES))
    mode, out, cases = argv[0], argv[1], argv[2:] or list(CASES)
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        sys.exit("unknown case(s): " + ", ".join(unknown))
    if mode == "peft":
        make_models(out)
    inputs = load_file(os.path.join(out, "inputs.safetensors"))
    for case in cases:
        (write_case if mode == "peft" else load_case)(out, case, inputs)
    print(json.dumps(cases))


if __name__ == "__main__":
    main(sys.argv[1:])
