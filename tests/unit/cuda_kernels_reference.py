"""bitsandbytes' results for cuda_kernels_test (tests/unit/cuda_kernels_test.cpp).

Writes, into the folder given as argv[1], raw little-endian buffers (<name>.bin)
and manifest.json describing them:
  - 8-bit blockwise Adam and Lion (bitsandbytes' optimizer_update_8bit_blockwise
    on its CPU backend): three steps from zero state on fp32/bf16/fp16 params of
    an odd size; the inputs of step 3 (param, grad, codes, absmax, maps as they
    are then; bnb's CPU quantizer sets map[0] to -1) and its outputs.
  - NF4/FP4 codes of bnb's quantize_4bit (blocksize 64, odd numel) and bnb's
    dequantize_4bit in fp32/bf16/fp16; the nested (double-quantized) absmax and
    bnb's dequantize_blockwise(...) + offset.
Hyperparameters are fp32-representable so the double scalars bnb forms from
them are the ones the launchers form from the fp32 arguments.
"""
import json
import os
import sys

import numpy as np
import torch

import bitsandbytes.functional as F  # registers the CPU kernels

out_dir = sys.argv[1]
os.makedirs(out_dir, exist_ok=True)
manifest = {"adam": [], "lion": [], "dequant4": [], "dequant8": []}
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def save(name, t):
    t = t.detach().contiguous().cpu()
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.view(torch.int16)
    t.numpy().tofile(os.path.join(out_dir, name + ".bin"))
    return name


def f32(x):
    return float(np.float32(x))


def optimizer_case(rule, dtype_name, numel, seed):
    gen = torch.Generator().manual_seed(seed)
    dtype = DTYPES[dtype_name]
    blocks = -(-numel // 256)
    hp = {"beta1": f32(0.9), "beta2": f32(0.999 if rule == "adam" else 0.99), "eps": f32(1e-8),
          "lr": f32(1e-3 if rule == "adam" else 1e-4), "weight_decay": f32(0.01), "gnorm_scale": f32(0.75)}
    p = torch.randn(numel, generator=gen).to(dtype)
    qmap1 = F.create_dynamic_map(signed=True).float()
    qmap2 = F.create_dynamic_map(signed=False).float() if rule == "adam" else None
    s1 = torch.zeros(numel, dtype=torch.uint8)
    s2 = torch.zeros(numel, dtype=torch.uint8) if rule == "adam" else None
    a1 = torch.zeros(blocks)
    a2 = torch.zeros(blocks) if rule == "adam" else None
    prefix = f"{rule}_{dtype_name}_"
    case = {"dtype": dtype_name, "numel": numel, "step": 3, **hp}
    for step in (1, 2, 3):
        # Per-block scales vary over three orders of magnitude, as real gradients do.
        scale = torch.logspace(-3, 0, blocks)[torch.randperm(blocks, generator=gen)].repeat_interleave(256)[:numel]
        g = (torch.randn(numel, generator=gen) * scale).to(dtype)
        if step == 3:
            for name, t in (("param_in", p), ("grad", g), ("state1_in", s1), ("absmax1_in", a1), ("qmap1", qmap1)):
                case[name] = save(prefix + name, t)
            if rule == "adam":
                for name, t in (("state2_in", s2), ("absmax2_in", a2), ("qmap2", qmap2)):
                    case[name] = save(prefix + name, t)
        torch.ops.bitsandbytes.optimizer_update_8bit_blockwise(
            rule, g, p, s1, s2, hp["beta1"], hp["beta2"], 0.0, 0.0, hp["eps"], step, hp["lr"], qmap1, qmap2,
            a1, a2, hp["weight_decay"], hp["gnorm_scale"], False)
    case["bias_correction1"] = 1.0 - hp["beta1"] ** 3
    case["bias_correction2"] = 1.0 - hp["beta2"] ** 3
    for name, t in (("param_out", p), ("state1_out", s1), ("absmax1_out", a1)):
        case[name] = save(prefix + name, t)
    if rule == "adam":
        for name, t in (("state2_out", s2), ("absmax2_out", a2)):
            case[name] = save(prefix + name, t)
    manifest[rule].append(case)


for i, dtype_name in enumerate(DTYPES):
    optimizer_case("adam", dtype_name, 256 * 5 + 77, 10 + i)
    optimizer_case("lion", dtype_name, 256 * 5 + 77, 20 + i)

gen = torch.Generator().manual_seed(7)
for quant_type in ("nf4", "fp4"):
    numel, blocksize = 64 * 23 + 13, 64
    x = torch.randn(numel, generator=gen) * torch.logspace(-2, 1, numel)[torch.randperm(numel, generator=gen)]
    packed, state = F.quantize_4bit(x, blocksize=blocksize, quant_type=quant_type)
    case = {"quant_type": quant_type, "numel": numel, "blocksize": blocksize,
            "packed": save(f"q4_{quant_type}_packed", packed), "absmax": save(f"q4_{quant_type}_absmax", state.absmax),
            "code16": save(f"q4_{quant_type}_code16", F.get_4bit_type(quant_type, device="cpu").float()), "out": {}}
    for dtype_name, dtype in DTYPES.items():
        out = torch.ops.bitsandbytes.dequantize_4bit(packed, state.absmax, blocksize, quant_type, x.shape, dtype)
        case["out"][dtype_name] = save(f"q4_{quant_type}_out_{dtype_name}", out)
    manifest["dequant4"].append(case)

# Double quantization: 64 * 515 values -> 515 absmax -> 3 nested blocks of 256 (the last partial).
x = torch.randn(64 * 515, generator=gen) * torch.logspace(-2, 1, 64 * 515)[torch.randperm(64 * 515, generator=gen)]
_, state = F.quantize_4bit(x, blocksize=64, quant_type="nf4", compress_statistics=True)
nested = F.dequantize_blockwise(state.absmax, state.state2) + state.offset
manifest["dequant8"].append({
    "numel": state.absmax.numel(), "blocksize": state.state2.blocksize, "offset": float(state.offset),
    "codes": save("q8_codes", state.absmax), "absmax": save("q8_absmax", state.state2.absmax),
    "code256": save("q8_code256", state.state2.code.float()), "out": save("q8_out", nested.float())})

with open(os.path.join(out_dir, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=1)
print("ok")
