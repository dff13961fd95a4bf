"""Reference side of safetensors_test: the `safetensors` package writes a file
for ftcore to read, or reads ftcore's file and checks every value.

usage: safetensors_reference.py write PATH | check PATH
"""
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file


def expected():
    return {
        "f32": torch.arange(24, dtype=torch.float32).reshape(2, 3, 4) / 8,
        "bf16": (torch.arange(10, dtype=torch.float32) - 5).to(torch.bfloat16),
        "i64": torch.tensor([-1, 0, 7], dtype=torch.int64),
        "empty": torch.empty(0, 4),
    }


def main():
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "write":
        save_file(expected(), path, metadata={"format": "pt"})
        return
    got = load_file(path)
    want = expected()
    want["f16.transposed"] = torch.arange(6, dtype=torch.float32).reshape(2, 3).t().to(torch.float16)
    want["scalar"] = torch.tensor(42, dtype=torch.int64)
    assert set(got) == set(want), f"names differ: {sorted(got)} vs {sorted(want)}"
    for name, tensor in want.items():
        assert got[name].dtype == tensor.dtype, f"{name}: dtype {got[name].dtype} != {tensor.dtype}"
        assert got[name].shape == tensor.shape, f"{name}: shape {got[name].shape} != {tensor.shape}"
        assert torch.equal(got[name], tensor), f"{name}: values differ"
    with safe_open(path, "pt") as f:
        assert f.metadata() == {"format": "pt"}, f.metadata()


if __name__ == "__main__":
    main()
