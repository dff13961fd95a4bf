"""Reference side of gguf_test: the `gguf` package (llama.cpp's own Python
library) writes a GGUF file with metadata of every value type and tensors in
every format ftcore reads, quantized by gguf.quants; it also writes, to a
safetensors file, what gguf.quants.dequantize makes of each tensor.

usage: gguf_reference.py OUT.gguf EXPECTED.safetensors
"""
import sys

import numpy as np
import torch
from gguf import GGMLQuantizationType as T
from gguf import GGUFWriter
from gguf.quants import dequantize, quantize
from safetensors.torch import save_file


def main():
    out, expected_path = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(7)
    w = GGUFWriter(out, arch="llama")
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -123)
    w.add_uint64("test.u64", 2**40 + 3)
    w.add_int8("test.i8", -5)
    w.add_float32("test.f32", 0.25)
    w.add_float64("test.f64", -1.5e-7)
    w.add_bool("test.bool", True)
    w.add_string("test.str", "héllo <|im_start|>")
    w.add_array("test.strs", ["a", "bb", "", "ü"])
    w.add_array("test.ints", [1, -2, 3])
    w.add_array("test.floats", [0.5, 1.5])
    expected = {}
    shapes = {"t.f32": (3, 5), "t.f16": (4, 6), "t.bf16": (2, 8), "t.q8_0": (6, 64), "t.q4_0": (5, 96),
              "t.q4_1": (7, 32), "t.q4_1_3d": (2, 3, 64)}
    types = {"t.f32": T.F32, "t.f16": T.F16, "t.bf16": T.BF16, "t.q8_0": T.Q8_0, "t.q4_0": T.Q4_0,
             "t.q4_1": T.Q4_1, "t.q4_1_3d": T.Q4_1}
    for name, shape in shapes.items():
        data = rng.standard_normal(shape).astype(np.float32) * 3
        qtype = types[name]
        if qtype == T.F32:
            w.add_tensor(name, data)
            expected[name] = torch.from_numpy(data.copy())
            continue
        raw = quantize(data, qtype)
        w.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=qtype)
        expected[name] = torch.from_numpy(np.ascontiguousarray(dequantize(raw, qtype)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    save_file({k: v.contiguous() for k, v in expected.items()}, expected_path)


if __name__ == "__main__":
    main()
