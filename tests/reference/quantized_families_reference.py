"""transformers' + bitsandbytes' side of quantized_families_test
(tests/reference/quantized_families_test.cpp): QLoRA bases on the families of
issue #17 (Qwen3, Gemma 3, Phi-3 with fused qkv_proj / gate_up_proj, Mixtral
with fused 3-D experts). Everything written here is computed by transformers,
bitsandbytes (0.50, CPU backend) and gptq_layout; nothing is ftcore's output.

  bnb NAME nf4|fp4 OUT
      OUT/model: the family's tiny random model (model_families.py /
      moe_reference.py; dense MLP width 192, see BLOCK_WHOLE), fp32 safetensors. transformers loads it with
      BitsAndBytesConfig(load_in_4bit, that quant type, double quant, fp32
      compute), which quantizes every Linear bnb converts (nn.Linear except
      the output embedding; Mixtral's router and 3-D expert tensors are not
      nn.Linear and stay fp32). Writes
        OUT/bnb_modules.json        the Linear4bit module paths, in order;
        OUT/bnb_weights.safetensors their state-dict tensors (packed codes,
                                    absmax, quant_map, nested state, the
                                    packed quant_state JSON);
        OUT/reference.safetensors   input_ids, attention_mask, position_ids
                                    (model_reference.batch_inputs: unpadded,
                                    left- and right-padded rows) and the
                                    bnb model's fp32 logits.
  gptq-model NAME OUT
      OUT/model: the tiny model with a 400-token BPE tokenizer trained here
      (family_training.make_family_model), OUT/calibration.txt (alpaca texts).
  gptq-reference NAME OUT
      Reads OUT/gptq (ftcore quantize --quantizer gptq of OUT/model); writes
        OUT/gptq_modules.json  {"linear": transformers' nn.Linear paths but
                               lm_head (what GPTQ tooling quantizes: the Linear
                               layers of the decoder blocks), "packed": the
                               paths holding a qweight};
        OUT/reference.safetensors  the batch and the logits of the dense
                               transformers model holding every packed layer
                               unpacked by gptq_layout (the AutoGPTQ layout).
"""
import json
import os
import sys
import warnings

from model_reference import batch_inputs, logits_of  # sets the offline environment first
from model_families import TINY as DENSE_TINY
from moe_reference import TINY as MOE_TINY

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

import gptq_layout  # noqa: E402

warnings.filterwarnings("ignore")
TINY = {**DENSE_TINY, **MOE_TINY}
# bnb 0.50's CPU dequantize_4bit (the path of its Linear4bit) takes the wrong absmax when a
# weight row does not hold whole 64-blocks (bnb4bit_reference.py's with_dtype): the MLP width
# of the dense families (160, down_proj's in_features) is raised to a multiple of 64 so that
# transformers + bnb computes the values its own stored state means.
BLOCK_WHOLE = {"intermediate_size": 192}


def block_whole_config(name):
    cls, config = TINY[name]
    if name in MOE_TINY:  # the experts (the only non-64 width) are not quantized
        return cls, config
    return cls, config.__class__.from_dict({**config.to_dict(), **BLOCK_WHOLE})


def bnb_config(quant_type):
    from transformers import BitsAndBytesConfig
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=quant_type, bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=torch.float32)


def save_batch_and_logits(model, vocab, out):
    ids, mask, positions = batch_inputs(vocab, 7)
    logits = logits_of(model, ids, mask, positions)
    save_file({"input_ids": ids, "attention_mask": mask, "position_ids": positions, "logits": logits.contiguous()},
              os.path.join(out, "reference.safetensors"))


def bnb_model(path, quant_type=None):
    """transformers' 4-bit bitsandbytes model of the folder: quantized at load with quant_type
    (double quant, fp32 compute), or a folder already holding a bnb quantization_config."""
    from transformers import AutoModelForCausalLM
    extra = {"quantization_config": bnb_config(quant_type)} if quant_type else {}
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, device_map="cpu", **extra).eval()
    for m in model.modules():
        if type(m).__name__ == "Linear4bit":
            # bnb's CPU inference shortcut (avx512_bf16 CPUs, eval, no grad) repacks the weight with
            # absmax rounded to bf16 (other numbers than the stored state) and fails when in_features
            # is not a multiple of the block (Phi-3's down_proj, 160). Off, bnb takes the path QLoRA
            # training takes: dequantize_4bit of the stored state, then an fp32 matmul.
            m.support_avx512bf16_for_cpu = False
    return model


def write_bnb(name, quant_type, out):
    cls, config = block_whole_config(name)
    torch.manual_seed(1234)
    path = os.path.join(out, "model")
    cls(config).save_pretrained(path, safe_serialization=True)
    model = bnb_model(path, quant_type)
    modules = [n for n, m in model.named_modules() if type(m).__name__ == "Linear4bit"]
    state = model.state_dict()
    weights = {k: v.contiguous() for k, v in state.items() if any(k.startswith(m + ".weight") for m in modules)}
    save_file(weights, os.path.join(out, "bnb_weights.safetensors"))
    with open(os.path.join(out, "bnb_modules.json"), "w") as f:
        json.dump(modules, f)
    save_batch_and_logits(model, config.vocab_size, out)


def write_gptq_model(name, out):
    import tiny_training as tt
    from family_training import make_family_model
    _, path = make_family_model(out, name)
    os.replace(path, os.path.join(out, "model"))
    with open(tt.make_data(out)) as f:
        rows = [json.loads(line) for line in f]
    with open(os.path.join(out, "calibration.txt"), "w") as f:
        f.write("".join(f"{r['instruction']} {r['output']}\n" for r in rows))


def write_gptq_reference(name, out):
    cls, _ = TINY[name]
    model = cls.from_pretrained(os.path.join(out, "model"), dtype=torch.float32).eval()
    linear = [n for n, m in model.named_modules() if type(m) is torch.nn.Linear and n != "lm_head"]
    packed = load_file(os.path.join(out, "gptq", "model.safetensors"))
    with open(os.path.join(out, "gptq", "config.json")) as f:
        bits = json.load(f)["quantization_config"]["bits"]
    stored = [k[:-len(".qweight")] for k in packed if k.endswith(".qweight")]
    state = model.state_dict()
    for layer in stored:
        codes, zeros, scales, g_idx, _ = gptq_layout.unpack_layer(packed, layer, bits)
        state[layer + ".weight"] = gptq_layout.dequant(codes, scales, zeros, g_idx)
    model.load_state_dict(state)
    with open(os.path.join(out, "gptq_modules.json"), "w") as f:
        json.dump({"linear": linear, "packed": [n for n in linear if n in stored] + sorted(set(stored) - set(linear))}, f)
    save_batch_and_logits(model, model.config.vocab_size, out)


def main(argv):
    torch.set_num_threads(int(os.environ.get("FTCORE_NUM_THREADS", "2")))
    if len(argv) == 4 and argv[0] == "bnb" and argv[1] in TINY and argv[2] in ("nf4", "fp4"):
        write_bnb(argv[1], argv[2], argv[3])
    elif len(argv) == 3 and argv[0] == "gptq-model" and argv[1] in TINY:
        write_gptq_model(argv[1], argv[2])
    elif len(argv) == 3 and argv[0] == "gptq-reference" and argv[1] in TINY:
        write_gptq_reference(argv[1], argv[2])
    else:
        sys.exit(__doc__ + "\nusage: bnb NAME nf4|fp4 OUT | gptq-model NAME OUT | gptq-reference NAME OUT; NAME in "
                 + ", ".join(TINY))


if __name__ == "__main__":
    main(sys.argv[1:])
