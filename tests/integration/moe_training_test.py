"""`ftcore run` on a tiny MixtralForCausalLM and a tiny Qwen3MoeForCausalLM (a
dense layer between sparse ones, norm_topk_prob false): 10 LoRA steps (all-linear) with the
router's load-balancing loss in the objective (output_router_logits in
config.json). Checks that the loss falls, that every step logs
router_aux_loss, and that step 1's value equals transformers' aux_loss on
the same micro-batch (dumped by FTCORE_DEBUG_DUMP_BATCHES; at step 1 the
adapter's B is zero, so the model is the base transformers loads).

usage: moe_training_test.py FTCORE_BINARY
"""
import glob
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "reference"))
import tiny_training as tt  # noqa: E402

import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from transformers import (AutoModelForCausalLM, MixtralConfig, MixtralForCausalLM, Qwen3MoeConfig,  # noqa: E402
                          Qwen3MoeForCausalLM)

AUX_TOLERANCE = 1e-6
SHARED = dict(vocab_size=49152, hidden_size=64, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
              max_position_embeddings=256, rms_norm_eps=1e-5, initializer_range=0.05, tie_word_embeddings=True,
              bos_token_id=1, eos_token_id=2, pad_token_id=2, output_router_logits=True, router_aux_loss_coef=0.02)
FAMILIES = {
    "mixtral": lambda: MixtralForCausalLM(MixtralConfig(**SHARED, num_hidden_layers=2, num_local_experts=4,
                                                        num_experts_per_tok=2)),
    "qwen3_moe": lambda: Qwen3MoeForCausalLM(Qwen3MoeConfig(**SHARED, num_hidden_layers=3, mlp_only_layers=[1],
                                                            num_experts=4, num_experts_per_tok=2,
                                                            moe_intermediate_size=48, norm_topk_prob=False)),
}


def make_model(out, family):
    torch.manual_seed(0)
    path = os.path.join(out, "model")
    FAMILIES[family]().save_pretrained(path, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        src = os.path.join(tt.DEFAULT_MODEL, name)
        if os.path.exists(src):
            shutil.copy(src, path)
    return path


def transformers_aux_loss(model_path, batch_file):
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).eval()
    b = load_file(batch_file)
    mask = (b["sequence_ids"] >= 0).long()
    with torch.no_grad():
        out = model(input_ids=b["input_ids"].long(), attention_mask=mask, position_ids=b["position_ids"].long(),
                    output_router_logits=True)
    return out.aux_loss.item()


def train(ftcore, family):
    with tempfile.TemporaryDirectory() as out:
        model = make_model(out, family)
        data = tt.make_data(out)
        recipe = tt.write_recipe(out, "moe", model, data, train=dict(max_steps=10, gradient_accumulation_steps=1),
                                 optimizer=dict(lr=3e-3))
        with open(recipe, "a") as f:
            f.write('\n[adapter]\nname = "lora"\nr = 8\nalpha = 16.0\ntarget_modules = ["all-linear"]\n')
        dumps = os.path.join(out, "batches")
        os.makedirs(dumps)
        tt.run_ftcore(ftcore, recipe, env={"FTCORE_DEBUG_DUMP_BATCHES": dumps})
        run_dir = os.path.join(out, "runs", "moe")
        losses = tt.train_losses(run_dir)
        aux = tt.train_metric(run_dir, "router_aux_loss")
        print(f"[ measure ] {family}: losses {losses[0]:.4f} -> {losses[-1]:.4f}; router_aux_loss {aux[0]:.6f} -> {aux[-1]:.6f}")
        assert len(losses) == 10 and len(aux) == 10, (losses, aux)
        assert losses[-1] < losses[0] - 0.05, f"the loss did not fall: {losses}"
        first_batch = sorted(glob.glob(os.path.join(dumps, "step-1-micro-*.safetensors")))
        assert len(first_batch) == 1, first_batch
        reference = transformers_aux_loss(model, first_batch[0])
        print(f"[ measure ] {family}: step-1 aux loss {aux[0]:.8f} vs transformers {reference:.8f}: |diff| = "
              f"{abs(aux[0] - reference):.2e}")
        assert abs(aux[0] - reference) < AUX_TOLERANCE, (aux[0], reference)
        with open(os.path.join(run_dir, "adapter_config.json")) as f:
            targets = sorted(json.load(f)["target_modules"])
        assert targets == ["k_proj", "o_proj", "q_proj", "v_proj"], targets  # PEFT's all-linear Linear modules


def main(ftcore):
    tt.require_default_tokenizer()
    for family in FAMILIES:
        train(ftcore, family)
    print("moe training: OK")


if __name__ == "__main__":
    main(sys.argv[1])
