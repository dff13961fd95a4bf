"""optimizer/blockwise8 against bitsandbytes 0.50 (its CPU backend).

Checks, all bit for bit (torch.equal on the raw values):
  * dynamic maps: blockwise8's signed and unsigned maps equal
    bitsandbytes.functional.create_dynamic_map(signed=True/False) (max_exponent_bits=7, total_bits=8).
  * quantize: codes and absmax equal torch.ops.bitsandbytes.quantize_blockwise with that map, for
    block sizes 64, 256, 1024, 4096, on sizes that are and are not multiples of the block (1, 255, 257,
    4096*3+17, 100003), normal data, data spanning 1e-8..1e2, an all-zero block, values placed exactly
    on map entries and on the midpoints between neighbouring entries (the rounding ties), and
    non-negative data with the unsigned map (exp_avg_sq-like).
  * dequantize: ours equals torch.ops.bitsandbytes.dequantize_blockwise of the same codes and absmax.
Exactness is expected because the arithmetic is the same: bitsandbytes' CPU kernel rounds through a
65536-point table built from the map's midpoints, and so does blockwise8.

usage: blockwise8_reference.py BLOCKWISE8_TOOL
"""
import os
import subprocess
import sys
import tempfile

import torch
import bitsandbytes  # noqa: F401  (registers torch.ops.bitsandbytes)
import bitsandbytes.functional as F
from safetensors.torch import load_file, save_file

BLOCKSIZES = (64, 256, 1024, 4096)


def inputs(code, signed):
    g = torch.Generator().manual_seed(7 if signed else 8)
    t = {}
    for n in (1, 255, 257, 4096 * 3 + 17, 100003):
        x = torch.randn(n, generator=g)
        t[f"randn_{n}"] = x if signed else x * x
    wide = torch.exp(torch.empty(20000).uniform_(-18.0, 4.6, generator=g))
    t["wide"] = wide * torch.sign(torch.randn(20000, generator=g)) if signed else wide
    z = torch.randn(9000, generator=g)
    z[256:1024] = 0.0  # zero blocks at every block size up to 256 (and partial at larger)
    t["zeros"] = z if signed else z.abs()
    # Values on map entries and on midpoints (ties), scaled by a block absmax of exactly 1.
    mids = 0.5 * (code[:-1] + code[1:])
    on = torch.cat([code, mids, torch.tensor([1.0, -1.0 if signed else 1.0])])
    t["ties"] = on[torch.randperm(on.numel(), generator=g)].repeat(8).contiguous()
    return t


def main():
    tool = sys.argv[1]
    failures = []
    maps = {True: F.create_dynamic_map(signed=True), False: F.create_dynamic_map(signed=False)}
    with tempfile.TemporaryDirectory() as tmp:
        checked = 0
        for signed in (True, False):
            code = maps[signed]
            tensors = inputs(code, signed)
            src = os.path.join(tmp, "in.safetensors")
            save_file(tensors, src)
            for bs in BLOCKSIZES:
                out = os.path.join(tmp, "out.safetensors")
                r = subprocess.run([tool, "--blocksize", str(bs), "--map", "signed" if signed else "unsigned", src, out],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    sys.exit(f"blockwise8_tool failed: {r.stderr}")
                ours = load_file(out)
                for s in (True, False):
                    got = ours["map.signed" if s else "map.unsigned"]
                    if not torch.equal(got.view(torch.int32), maps[s].view(torch.int32)):
                        failures.append(f"dynamic map signed={s}: {int((got != maps[s]).sum())} entries differ")
                for name, x in tensors.items():
                    codes, absmax = torch.ops.bitsandbytes.quantize_blockwise(x, code.clone(), bs)
                    deq = torch.ops.bitsandbytes.dequantize_blockwise(codes, absmax, code.clone(), bs, torch.float32)
                    tag = f"signed={signed} blocksize={bs} {name}"
                    if not torch.equal(ours[f"{name}.absmax"], absmax):
                        failures.append(f"{tag}: absmax differs")
                    diff = int((ours[f"{name}.codes"] != codes).sum())
                    if diff:
                        failures.append(f"{tag}: {diff}/{codes.numel()} codes differ")
                    if not torch.equal(ours[f"{name}.dequant"], deq):
                        failures.append(f"{tag}: dequantized values differ")
                    checked += 1
        print(f"dynamic maps bit-equal to create_dynamic_map; {checked} (tensor, map, blocksize) cases of "
              f"quantize/dequantize compared with bitsandbytes")
    if failures:
        print("\n".join(failures[:40]))
        sys.exit(1)
    print("codes, absmax and dequantized values bit-identical to bitsandbytes")


if __name__ == "__main__":
    main()
