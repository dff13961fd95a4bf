"""transformers' and PEFT's side of moe_model_test (tests/unit/moe_model_test.cpp).

Tiny random mixture-of-experts models (fixed seeds), always computed with
transformers' own classes (MixtralForCausalLM, Qwen3MoeForCausalLM) and peft;
nothing here is taken from ftcore's output. The Qwen3-MoE configs mix sparse
and dense layers (mlp_only_layers, decoder_sparse_step), one renormalising
the top-K probabilities and one not (norm_topk_prob false, sliding window).

  tiny NAME OUT   OUT/model: save_pretrained (safetensors; transformers 5 writes the
                  per-expert layout, block_sparse_moe.experts.E.w1 ...);
                  OUT/reference.safetensors: input_ids, attention_mask, position_ids
                  (an unpadded, a left- and a right-padded row), labels (-100 on padding),
                  fp32 logits, aux_loss (outputs.aux_loss with the attention mask),
                  router_experts [layers, B*T, K] (the indices each layer's router
                  returned, recorded by a forward hook), sparse_layers [layers] (bool:
                  the layer's mlp is the sparse block), generated [3, 12] and
                  prompts [3, 6] (greedy generate with the KV cache,
                  ending at EOS 2; -1 pads a row that ended early), and for LoRA
                  (PEFT's all-linear, which on transformers 5's MoE models adds
                  target_parameters: the routers' gate.weight and the experts'
                  gate_up_proj (rank 2r) and down_proj): "init.<name>" of every
                  LoRA tensor as get_peft_model draws it after torch.manual_seed(LORA_SEED),
                  lora_loss (outputs.loss = cross-entropy + router_aux_loss_coef x
                  aux_loss) and "grad.<name>" of every LoRA tensor after its backward.
                  merged_logits (that adapter's merge_and_unload, fp32 logits of the batch),
                  packed_ids [1, 20] (sequences of PACKED_LENGTHS, then padding) and
                  packed_alone [1, 18, V] (each sequence's logits run alone).
                  OUT/adapter: that adapter (PEFT save_pretrained), A and B random.
                  OUT/all_linear.json: what PEFT's target_modules="all-linear" adapts:
                  "modules" (Linear modules, lora.Linear) and "parameters" (the
                  router / experts through target_parameters).
                  Full fine-tuning: "full_grad.<name>" of every parameter (fused
                  expert names) after the same loss's backward with "full_labels"
                  (no prediction made at a padding position), no adapter.
  fused NAME OUT  the same model saved with transformers 5's fused expert names
                  (mlp.experts.gate_up_proj / down_proj) to OUT/fused_model.
  load DIR MODEL  loads the PEFT adapter in DIR (ftcore's) on MODEL and prints the
                  max |logit difference| against DIR/ftcore_logits.safetensors'
                  "logits" (ftcore with its adapter), then merge_and_unload()'s
                  against its "merged" (ftcore's merge), on the reference batch.
"""
import json
import os
import sys
import warnings

# model_reference sets the offline environment before importing transformers.
from model_reference import batch_inputs as padded_batch  # noqa: E402

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import (AutoModelForCausalLM, MixtralConfig, MixtralForCausalLM, Qwen3MoeConfig,  # noqa: E402
                          Qwen3MoeForCausalLM)

warnings.filterwarnings("ignore")

COMMON = dict(vocab_size=96, hidden_size=64, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5, initializer_range=0.1,
              pad_token_id=0, bos_token_id=1, eos_token_id=2, output_router_logits=True, router_aux_loss_coef=0.05)

TINY = {
    "mixtral": (MixtralForCausalLM, MixtralConfig(**COMMON, num_local_experts=4, num_experts_per_tok=2)),
    "mixtral_window_top1": (MixtralForCausalLM, MixtralConfig(**COMMON, num_local_experts=5, num_experts_per_tok=1,
                                                              sliding_window=6)),
    # Layer 2 dense (mlp_only_layers), head_dim other than hidden / heads, top-K renormalised, q/k/v/o biases.
    "qwen3_moe_mixed": (Qwen3MoeForCausalLM, Qwen3MoeConfig(
        **dict(COMMON, num_hidden_layers=4), head_dim=32, attention_bias=True, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=40, norm_topk_prob=True, mlp_only_layers=[2])),
    # Layers 1 and 3 sparse (decoder_sparse_step 2), the top-K probabilities as they are, every layer sliding.
    "qwen3_moe_step2_window": (Qwen3MoeForCausalLM, Qwen3MoeConfig(
        **dict(COMMON, num_hidden_layers=4), num_experts=6, num_experts_per_tok=3, moe_intermediate_size=24,
        norm_topk_prob=False, decoder_sparse_step=2, use_sliding_window=True, sliding_window=6)),
}
LORA_RANK, LORA_ALPHA, LORA_SEED = 4, 8, 4321
PACKED_LENGTHS, PACKED_WIDTH = [5, 9, 4], 20


def batch_inputs(vocab, seed):
    """model_reference's padded batch (unpadded, left- and right-padded rows) plus labels, -100 on padding."""
    ids, mask, positions = padded_batch(vocab, seed)
    g = torch.Generator().manual_seed(seed + 1)
    labels = torch.randint(3, vocab, ids.shape, generator=g).masked_fill(mask == 0, -100)
    return ids, mask, positions, labels


def make_model(name):
    cls, config = TINY[name]
    torch.manual_seed(1234)
    return cls(config).eval()


def record_router_choices(model):
    """Each sparse layer's router indices [B*T, K], as the router module returned them (dense layers have none)."""
    chosen = []
    hooks = [layer.mlp.gate.register_forward_hook(lambda m, i, out: chosen.append(out[2].detach()))
             for layer in model.model.layers if hasattr(layer.mlp, "gate")]
    return chosen, hooks


def write_generation(model, vocab, reference):
    g = torch.Generator().manual_seed(5)
    prompts = torch.randint(3, vocab, (3, 6), generator=g)
    generated = []
    for row in prompts:
        ids = row.unsqueeze(0)
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=12,
                                 pad_token_id=0, use_cache=True)
        new = out[0, ids.shape[1]:]
        generated.append(torch.cat([new, torch.full((12 - new.numel(),), -1, dtype=new.dtype)]))
    reference["prompts"] = prompts
    reference["generated"] = torch.stack(generated)


def write_packed(model, vocab, reference):
    """Three sequences in one row for ftcore's packed forward; transformers runs each alone."""
    g = torch.Generator().manual_seed(11)
    ids = torch.randint(3, vocab, (1, PACKED_WIDTH), generator=g)
    alone, start = [], 0
    with torch.no_grad():
        for n in PACKED_LENGTHS:
            alone.append(model(input_ids=ids[:, start:start + n]).logits.float())
            start += n
    reference["packed_ids"] = ids
    reference["packed_alone"] = torch.cat(alone, dim=1)


def write_all_linear(name, out):
    """What PEFT's all-linear adapts on this model: Linear modules, and parameters (router, experts)."""
    from peft import LoraConfig, get_peft_model
    from peft.tuners.lora import Linear as LoraLinear
    peft_model = get_peft_model(make_model(name), LoraConfig(r=LORA_RANK, target_modules="all-linear"))
    modules, parameters = [], []
    for n, m in peft_model.named_modules():
        if not hasattr(m, "lora_A") or not m.lora_A:
            continue
        (modules if isinstance(m, LoraLinear) else parameters).append(n.removeprefix("base_model.model."))
    with open(os.path.join(out, "all_linear.json"), "w") as f:
        json.dump({"modules": modules, "parameters": parameters}, f)


def write_full_gradients(model, inputs, reference):
    """Every parameter's gradient with full_labels: labels without the predictions made at a padding
    position (the left-padded row's first real token). The pad embedding is zero, so RMSNorm's backward
    at those positions scales by 1/sqrt(eps) per layer and the result says nothing about the experts."""
    ids, mask, positions, labels = inputs
    labels = labels.clone()
    labels[:, 1:] = labels[:, 1:].masked_fill(mask[:, :-1] == 0, -100)
    reference["full_labels"] = labels
    model.train()
    model(input_ids=ids, attention_mask=mask, position_ids=positions, labels=labels,
          output_router_logits=True).loss.backward()
    for n, p in model.named_parameters():
        reference["full_grad." + n] = p.grad.detach().clone()
    model.zero_grad(set_to_none=True)
    model.eval()


def write_lora(model, out, inputs, reference):
    from peft import LoraConfig, get_peft_model
    ids, mask, positions, labels = inputs
    torch.manual_seed(LORA_SEED)
    peft_model = get_peft_model(model, LoraConfig(r=LORA_RANK, lora_alpha=LORA_ALPHA, target_modules="all-linear"))
    for n, p in peft_model.named_parameters():
        if p.requires_grad:
            reference["init." + n.removeprefix("base_model.model.").replace(".default.", ".")] = p.detach().clone()
    g = torch.Generator().manual_seed(99)
    with torch.no_grad():
        for n, p in peft_model.named_parameters():
            if p.requires_grad:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    peft_model.save_pretrained(os.path.join(out, "adapter"))
    peft_model.train()
    result = peft_model(input_ids=ids, attention_mask=mask, position_ids=positions, labels=labels,
                        output_router_logits=True)
    result.loss.backward()
    reference["lora_loss"] = result.loss.detach().reshape(1)
    for n, p in peft_model.named_parameters():
        if p.requires_grad:
            name = n.removeprefix("base_model.model.").replace(".default.", ".")
            reference["grad." + name] = p.grad.detach().contiguous()
    peft_model.eval()
    with torch.no_grad():
        merged = peft_model.merge_and_unload()
        reference["merged_logits"] = merged(input_ids=ids, attention_mask=mask, position_ids=positions).logits.float()


def write_tiny(name, out):
    model = make_model(name)
    model.save_pretrained(os.path.join(out, "model"), safe_serialization=True)
    ids, mask, positions, labels = batch_inputs(model.config.vocab_size, 7)
    chosen, hooks = record_router_choices(model)
    with torch.no_grad():
        result = model(input_ids=ids, attention_mask=mask, position_ids=positions, output_router_logits=True)
    for h in hooks:
        h.remove()
    reference = {"input_ids": ids, "attention_mask": mask, "position_ids": positions, "labels": labels,
                 "logits": result.logits.float().contiguous(), "aux_loss": result.aux_loss.float().reshape(1),
                 "router_experts": torch.stack(chosen),
                 "sparse_layers": torch.tensor([hasattr(layer.mlp, "gate") for layer in model.model.layers])}
    write_generation(model, model.config.vocab_size, reference)
    write_packed(model, model.config.vocab_size, reference)
    write_all_linear(name, out)
    write_full_gradients(model, (ids, mask, positions, labels), reference)
    write_lora(model, out, (ids, mask, positions, labels), reference)
    save_file({k: v.contiguous() for k, v in reference.items()}, os.path.join(out, "reference.safetensors"))


def write_fused(name, out):
    """The model's own state_dict (transformers 5's in-memory, fused names) as a folder."""
    model = make_model(name)
    folder = os.path.join(out, "fused_model")
    os.makedirs(folder, exist_ok=True)
    model.config.architectures = [type(model).__name__]  # what save_pretrained would record
    model.config.save_pretrained(folder)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, os.path.join(folder, "model.safetensors"))


def load_adapter(adapter_dir, model_dir):
    """PEFT loads ftcore's adapter: its logits, and merge_and_unload()'s, against ftcore's own."""
    from peft import PeftModel
    from safetensors.torch import load_file
    ours = load_file(os.path.join(adapter_dir, "ftcore_logits.safetensors"))
    ids, mask, _, _ = batch_inputs(96, 7)
    base = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    peft_model = PeftModel.from_pretrained(base, adapter_dir).eval()
    keep = mask.bool().unsqueeze(-1)
    with torch.no_grad():
        with_adapter = peft_model(input_ids=ids, attention_mask=mask).logits
        merged = peft_model.merge_and_unload()(input_ids=ids, attention_mask=mask).logits
    tensors = load_file(os.path.join(adapter_dir, "adapter_model.safetensors"))
    print(json.dumps({"max_diff": ((with_adapter - ours["logits"]).abs() * keep).max().item(),
                      "merged_max_diff": ((merged - ours["merged"]).abs() * keep).max().item(),
                      "lora_modules": sum(k.endswith("lora_A.weight") for k in tensors)}))


def main(argv):
    torch.set_num_threads(int(os.environ.get("FTCORE_NUM_THREADS", "2")))
    if len(argv) == 3 and argv[0] == "tiny" and argv[1] in TINY:
        write_tiny(argv[1], argv[2])
    elif len(argv) == 3 and argv[0] == "fused" and argv[1] in TINY:
        write_fused(argv[1], argv[2])
    elif len(argv) == 3 and argv[0] == "load":
        load_adapter(argv[1], argv[2])
    else:
        sys.exit(__doc__ + "\nusage: moe_reference.py tiny|fused {%s} OUT | load ADAPTER_DIR MODEL_DIR" % ",".join(TINY))


if __name__ == "__main__":
    main(sys.argv[1:])
