"""Quantized bases end to end (QLoRA on NF4, LoRA on GPTQ, `ftcore quantize`,
`ftcore merge` on quantized bases) against transformers + bitsandbytes + PEFT.

On a tiny Llama (tiny_training.py) with the default model's tokenizer:

1. QLoRA training: `ftcore run` with [quantizer] nf4 (double quant, fp32
   compute) vs a reference loop (trainer_reference.reference_losses: PEFT +
   AdamW on the same dumped micro-batches) on the dense model holding
   bitsandbytes' NF4 dequantized weights: every step's loss within 1e-4
   relative, the final adapter within 1e-4 (both sides multiply the same
   values in fp32; only summation order differs, ~1e-7 measured). Also vs
   transformers' BitsAndBytesConfig(nf4) model + PEFT: losses within 1e-4.
2. `ftcore quantize --quantizer nf4`: transformers + bitsandbytes load the
   folder, and every Linear4bit dequantizes (bnb's dequantize_4bit) to
   exactly what bnb's own quantize_4bit -> dequantize_4bit gives for the
   original weight (bit for bit).
3. A folder quantized and saved by transformers + bitsandbytes loads in
   `ftcore merge`: merged weights equal bnb's dequantization (+ scaling B A
   on adapted slots) within 2e-6 (fp32 rounding of the merge), the merge
   reports its logit difference and KL, and `--requantize` writes a folder
   transformers loads again.
4. GPTQ: `ftcore quantize --quantizer gptq` from calibration text; its
   packed tensors unpacked by gptq_layout (written from the AutoGPTQ
   layout) give a model closer to fp32 than round-to-nearest at the same
   bits and group size: lower KL on the tiny random-weight model, lower
   held-out perplexity on the default model (when set up).
5. LoRA on that GPTQ folder (loaded as a pre-quantized base) vs PEFT on the
   dense model holding the unpacked weights, same batches: losses within 1e-4.
6. ReLoRA on an NF4 base restarts (dequantize, merge, re-quantize) and
   finishes; ReLoRA on a GPTQ base and a quantized base without an adapter
   are refused with exit 2 and a sentence saying why.

Usage: quantized_model_reference.py FTCORE_BINARY
"""
import json
import math
import os
import sys
import tempfile

import tiny_training as tt

import torch  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from transformers import AutoModelForCausalLM, BitsAndBytesConfig, LlamaForCausalLM  # noqa: E402

import gptq_layout  # noqa: E402
from trainer_reference import compare, reference_losses  # noqa: E402

TOLERANCE = 1e-4
NF4 = {"name": "nf4", "blocksize": 64, "double_quant": True, "compute_dtype": "fp32"}


def bnb_config():
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=torch.float32)


def with_sections(recipe, **sections):
    """Appends TOML tables ({"quantizer": {...}}) to a recipe written by tiny_training."""
    with open(recipe, "a") as f:
        for name, keys in sections.items():
            f.write(f"\n[{name}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items()))
    return recipe


def run(cmd, expect=0):
    return tt.run_ftcore_command(cmd[0], *cmd[1:], expect=expect)


def final_adapter_difference(run_dir, peft_model):
    final = load_file(os.path.join(run_dir, "adapter_model.safetensors"))
    ref = {k: v for k, v in peft_model.state_dict().items() if "lora_" in k}
    worst = 0.0
    for name, value in final.items():
        r = ref[name.replace(".lora_A.weight", ".lora_A.default.weight").replace(".lora_B.weight", ".lora_B.default.weight")]
        worst = max(worst, float((value - r).abs().max() / r.abs().max()))
    return worst


def bnb_dequantized(module):
    import bitsandbytes.functional as F
    return F.dequantize_4bit(module.weight.data, module.weight.quant_state).float()


def bnb_dequantized_dense(model_path):
    """The dense model with every Linear but lm_head replaced by bnb's NF4
    quantize -> dequantize (double quant, block 64): the values a QLoRA base
    computes with."""
    import bitsandbytes.functional as F
    dense = LlamaForCausalLM.from_pretrained(model_path, torch_dtype=torch.float32)
    state = dense.state_dict()
    for name, module in dense.named_modules():
        if isinstance(module, torch.nn.Linear) and name != "lm_head":
            packed, quant_state = F.quantize_4bit(module.weight.data, blocksize=64, quant_type="nf4",
                                                  compress_statistics=True)
            state[name + ".weight"] = F.dequantize_4bit(packed, quant_state)
    dense.load_state_dict(state)
    return dense


def check_qlora_training(ftcore, out, model_path, data, adapter):
    """Against PEFT on bitsandbytes' dequantized weights (exact: same values,
    fp32 products, tolerance 1e-4 as trainer_reference), and against
    transformers' own bitsandbytes model + PEFT (Linear4bit layers, bnb's CPU
    autograd path), whose losses drift from the exact loop by up to 3e-5
    relative over 20 steps (measured; the cause inside the bnb/PEFT path was
    not identified), hence 1e-4 on losses there and no adapter check."""
    from peft import PeftModel
    dumps = os.path.join(out, "dumps_qlora")
    os.makedirs(dumps)
    recipe = with_sections(tt.write_recipe(out, "qlora", model_path, data, adapter_dir=adapter), quantizer=NF4)
    tt.run_ftcore(ftcore, recipe, env={"FTCORE_DEBUG_DUMP_BATCHES": dumps})
    ours = tt.train_losses(os.path.join(out, "runs", "qlora"))
    exact = PeftModel.from_pretrained(bnb_dequantized_dense(model_path), adapter, is_trainable=True)
    compare("qlora nf4 vs PEFT on bnb-dequantized weights", ours, reference_losses(exact, dumps))
    worst = final_adapter_difference(os.path.join(out, "runs", "qlora"), exact)
    assert worst < TOLERANCE, f"qlora: final adapter differs from the reference by {worst:.2e}"
    print(f"qlora: final adapter within {worst:.2e} of the reference")
    base = AutoModelForCausalLM.from_pretrained(model_path, quantization_config=bnb_config(), device_map="cpu")
    peft_model = PeftModel.from_pretrained(base, adapter, is_trainable=True)
    compare("qlora nf4 vs transformers + bitsandbytes Linear4bit + PEFT", ours, reference_losses(peft_model, dumps))


def check_quantize_nf4(ftcore, out, model_path):
    import bitsandbytes.functional as F
    qdir = os.path.join(out, "nf4")
    print(run([ftcore, "quantize", "--model", model_path, "--quantizer", "nf4", "--set", 'compute_dtype = "fp32"',
               "--out", qdir]).strip().splitlines()[-3])
    theirs = AutoModelForCausalLM.from_pretrained(qdir, device_map="cpu")
    dense = LlamaForCausalLM.from_pretrained(model_path, torch_dtype=torch.float32)
    dense_modules = dict(dense.named_modules())
    checked = 0
    for name, module in theirs.named_modules():
        if type(module).__name__ != "Linear4bit":
            continue
        packed, state = F.quantize_4bit(dense_modules[name].weight.data, blocksize=64, quant_type="nf4",
                                        compress_statistics=True)
        expected = F.dequantize_4bit(packed, state)
        assert torch.equal(bnb_dequantized(module), expected.float()), f"{name}: dequantized weights differ from bnb's"
        checked += 1
    assert checked == 14, f"expected 14 quantized Linear layers in transformers' model, found {checked}"
    print(f"ftcore quantize nf4: transformers + bitsandbytes load {checked} Linear4bit layers equal to bnb's quantization")
    return qdir


def check_merge_bnb_folder(ftcore, out, model_path, adapter):
    bnb_dir = os.path.join(out, "bnb_saved")
    theirs = AutoModelForCausalLM.from_pretrained(model_path, quantization_config=bnb_config(), device_map="cpu")
    theirs.save_pretrained(bnb_dir)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if os.path.exists(os.path.join(model_path, name)):
            with open(os.path.join(model_path, name), "rb") as src, open(os.path.join(bnb_dir, name), "wb") as dst:
                dst.write(src.read())
    merged_dir = os.path.join(out, "merged")
    log = run([ftcore, "merge", "--model", bnb_dir, "--adapter", adapter, "--out", merged_dir, "--dtype", "fp32"])
    assert "base dequantized" in log and "mean KL" in log, f"merge did not report its error:\n{log}"
    merged = load_file(os.path.join(merged_dir, "model.safetensors"))
    adapter_weights = load_file(os.path.join(adapter, "adapter_model.safetensors"))
    with open(os.path.join(adapter, "adapter_config.json")) as f:
        config = json.load(f)
    scaling = config["lora_alpha"] / config["r"]
    worst = 0.0
    for name, module in theirs.named_modules():
        if type(module).__name__ != "Linear4bit":
            continue
        expected = bnb_dequantized(module)
        a = adapter_weights.get(f"base_model.model.{name}.lora_A.weight")
        if a is not None:
            expected = expected + scaling * (adapter_weights[f"base_model.model.{name}.lora_B.weight"] @ a)
        worst = max(worst, float((merged[name + ".weight"] - expected).abs().max()))
    assert worst < 2e-6, f"merge on a bitsandbytes folder: weights differ from bnb's dequantization by {worst:.2e}"
    with open(os.path.join(merged_dir, "config.json")) as f:
        assert "quantization_config" not in json.load(f), "a dense merge must not keep quantization_config"
    print(f"merge on a bitsandbytes-saved nf4 folder: weights within {worst:.2e} of bnb dequantize + B A; "
          f"{[l for l in log.splitlines() if 'KL' in l][0]}")
    requantized = os.path.join(out, "merged_nf4")
    log = run([ftcore, "merge", "--model", bnb_dir, "--adapter", adapter, "--out", requantized, "--requantize"])
    again = AutoModelForCausalLM.from_pretrained(requantized, device_map="cpu")
    logits = again(torch.tensor([[1, 5, 9, 200]])).logits
    assert torch.isfinite(logits).all()
    print(f"merge --requantize: transformers loads the re-quantized folder; "
          f"{[l for l in log.splitlines() if 're-quantized' in l][0]}")


def gptq_dense_state(gptq_dir, model_path):
    """The dense model's state with every GPTQ Linear unpacked (gptq_layout)."""
    packed = load_file(os.path.join(gptq_dir, "model.safetensors"))
    state = LlamaForCausalLM.from_pretrained(model_path, torch_dtype=torch.float32).state_dict()
    with open(os.path.join(gptq_dir, "config.json")) as f:
        bits = json.load(f)["quantization_config"]["bits"]
    for name in [k[:-len(".qweight")] for k in packed if k.endswith(".qweight")]:
        codes, zeros, scales, g_idx, _ = gptq_layout.unpack_layer(packed, name, bits)
        state[name + ".weight"] = gptq_layout.dequant(codes, scales, zeros, g_idx)
    return state


def perplexity_and_kl(model, reference, rows):
    """Held-out perplexity of `model`, and its mean per-token KL(reference || model)."""
    total, kl, count = 0.0, 0.0, 0
    with torch.no_grad():
        for ids in rows:
            logits = model(input_ids=ids).logits[0, :-1].double()
            ref = reference(input_ids=ids).logits[0, :-1].double().log_softmax(-1)
            total += float(torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="sum"))
            kl += float((ref.exp() * (ref - logits.log_softmax(-1))).sum())
            count += ids.size(1) - 1
    return math.exp(total / count), kl / count


def check_gptq(ftcore, out, model_path, texts, held_out, group_size, samples, sequence_len, label, metric):
    """GPTQ vs round-to-nearest (4-bit, same groups, symmetric): `metric` is
    "perplexity" (a trained model) or "kl" (the tiny random-weight model,
    whose perplexity sits near the vocabulary size and says nothing; KL to
    the fp32 model is what GPTQ's per-layer error minimisation reduces)."""
    text_file = os.path.join(out, f"calibration_{label}.txt")
    with open(text_file, "w") as f:
        f.write("\n".join(texts) + "\n")
    gptq_dir = os.path.join(out, f"gptq_{label.replace(' ', '_')}")
    log = run([ftcore, "quantize", "--model", model_path, "--quantizer", "gptq", "--set", f"group_size = {group_size}",
               "--calibration-data", text_file, "--samples", str(samples), "--sequence-len", str(sequence_len),
               "--out", gptq_dir, "--dtype", "fp32"])
    dense = LlamaForCausalLM.from_pretrained(model_path, torch_dtype=torch.float32).eval()
    state = dense.state_dict()
    gptq = LlamaForCausalLM.from_pretrained(model_path, torch_dtype=torch.float32).eval()
    gptq.load_state_dict(gptq_dense_state(gptq_dir, model_path))
    rtn = LlamaForCausalLM.from_pretrained(model_path, torch_dtype=torch.float32).eval()
    rtn_state = rtn.state_dict()
    for name, module in dense.named_modules():
        if isinstance(module, torch.nn.Linear) and name != "lm_head":
            rtn_state[name + ".weight"] = gptq_layout.rtn(state[name + ".weight"], 4, group_size, True).float()
    rtn.load_state_dict(rtn_state)
    fp32_ppl, _ = perplexity_and_kl(dense, dense, held_out)
    gptq_ppl, gptq_kl = perplexity_and_kl(gptq, dense, held_out)
    rtn_ppl, rtn_kl = perplexity_and_kl(rtn, dense, held_out)
    print(f"gptq ({label}, 4-bit, group {group_size}, {samples}x{sequence_len} calibration tokens): held-out "
          f"perplexity fp32 {fp32_ppl:.3f}, GPTQ {gptq_ppl:.3f}, RTN {rtn_ppl:.3f}; KL to fp32 GPTQ {gptq_kl:.5f}, "
          f"RTN {rtn_kl:.5f}; {[l for l in log.splitlines() if 'quantized' in l][0]}")
    if metric == "perplexity":
        assert gptq_ppl < rtn_ppl, f"{label}: GPTQ perplexity {gptq_ppl:.4f} is not below RTN's {rtn_ppl:.4f}"
    else:
        assert gptq_kl < rtn_kl, f"{label}: GPTQ KL {gptq_kl:.5f} is not below RTN's {rtn_kl:.5f}"
    return gptq_dir


def check_lora_on_gptq(ftcore, out, gptq_dir, model_path, data, adapter):
    from peft import PeftModel
    dumps = os.path.join(out, "dumps_gptq")
    os.makedirs(dumps)
    recipe = tt.write_recipe(out, "lora_gptq", gptq_dir, data, adapter_dir=adapter)
    tt.run_ftcore(ftcore, recipe, env={"FTCORE_DEBUG_DUMP_BATCHES": dumps})
    ours = tt.train_losses(os.path.join(out, "runs", "lora_gptq"))
    base = LlamaForCausalLM.from_pretrained(model_path, torch_dtype=torch.float32)
    base.load_state_dict(gptq_dense_state(gptq_dir, model_path))
    peft_model = PeftModel.from_pretrained(base, adapter, is_trainable=True)
    compare("lora on a gptq base vs PEFT on the unpacked weights", ours, reference_losses(peft_model, dumps))


def check_relora_and_refusals(ftcore, out, model_path, gptq_dir, data):
    relora = {"name": "relora", "r": 4, "alpha": 8.0, "target_modules": tt.TARGETS, "relora_steps": 5,
              "relora_warmup_steps": 1, "relora_anneal_steps": 1}
    recipe = tt.write_recipe(out, "relora_nf4", model_path, data, train={"max_steps": 12})
    with_sections(recipe, quantizer=NF4, adapter=relora)
    p = tt.run_ftcore(ftcore, recipe)
    restarts = [line for line in (p.stdout + p.stderr).splitlines() if "restart" in line.lower()]
    assert len(restarts) >= 2, f"ReLoRA on nf4: expected 2 restarts in the log:\n{p.stdout}{p.stderr}"
    losses = tt.train_losses(os.path.join(out, "runs", "relora_nf4"))
    assert len(losses) == 12 and all(math.isfinite(x) for x in losses), losses
    print(f"relora on nf4: {len(restarts)} restarts (dequantize, merge, re-quantize), losses {losses[0]:.3f} -> {losses[-1]:.3f}")

    recipe = with_sections(tt.write_recipe(out, "relora_gptq", gptq_dir, data), adapter=relora)
    p = tt.run_ftcore(ftcore, recipe, check=False)
    assert p.returncode == 2 and "calibration" in p.stderr + p.stdout, f"relora on gptq: {p.returncode}\n{p.stderr}"
    recipe = with_sections(tt.write_recipe(out, "frozen", model_path, data), quantizer=NF4)
    p = tt.run_ftcore(ftcore, recipe, check=False)
    assert p.returncode == 2 and "[adapter]" in p.stderr + p.stdout, f"quantizer without adapter: {p.returncode}\n{p.stderr}"
    print("refused with exit 2: relora on a gptq base; a [quantizer] without an [adapter]")


def held_out_rows(tokenizer_dir, texts, length):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))
    stream = [i for t in texts for i in tok.encode(t).ids]
    return [torch.tensor([stream[s:s + length]]) for s in range(0, len(stream) - length, length)]


def main():
    ftcore = sys.argv[1]
    tt.require_default_tokenizer()
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as out:
        model_path = tt.make_model(out)
        data = tt.make_data(out)
        adapter = tt.make_adapter(out, model_path)
        check_qlora_training(ftcore, out, model_path, data, adapter)
        check_quantize_nf4(ftcore, out, model_path)
        check_merge_bnb_folder(ftcore, out, model_path, adapter)

        with open(data) as f:
            rows = [json.loads(line) for line in f]
        texts = [f"{r['instruction']} {r['output']}" for r in rows]
        held = held_out_rows(model_path, [f"{r['output']} {r['instruction']}" for r in rows[::3]], 32)
        gptq_dir = check_gptq(ftcore, out, model_path, texts, held, 32, 32, 48, "tiny", "kl")
        check_lora_on_gptq(ftcore, out, gptq_dir, model_path, data, adapter)
        check_relora_and_refusals(ftcore, out, model_path, gptq_dir, data)

        if os.path.exists(os.path.join(tt.DEFAULT_MODEL, "model.safetensors")):
            quiz = os.path.join(tt.ROOT, "third_party", "data", "quiz", "train.jsonl")
            with open(quiz) as f:
                quiz_rows = [json.loads(line) for line in f]
            quiz_texts = [f"{r['instruction']} {r['output']}" for r in quiz_rows]
            held = held_out_rows(tt.DEFAULT_MODEL, quiz_texts[-200:], 128)[:8]
            check_gptq(ftcore, out, tt.DEFAULT_MODEL, quiz_texts[:-200], held, 128, 32, 256, "default model", "perplexity")
        else:
            print("default model not set up: its GPTQ perplexity check is skipped")


if __name__ == "__main__":
    main()
