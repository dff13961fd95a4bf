"""quantizer/nf4 and quantizer/fp4 against bitsandbytes (0.50, CPU backend).

Everything ftcore computes here is compared with bitsandbytes.functional on
the same inputs, through the quantize_tensors tool:

1. quantize: for nf4/fp4, double quant on/off and block sizes 32..4096, on
   awkward shapes (1000x37, 3x5, 4097, 33x130, 256x1024) in fp32, bf16 and
   fp16, plus crafted tensors (values on the code midpoints and one ulp
   around them, an all-zero block, a zero partial block, subnormal values):
   the whole state dict ours writes (packed codes, absmax, quant_map,
   nested_absmax, nested_quant_map, the packed JSON quant_state) must EQUAL,
   tensor by tensor and byte for byte, weight + QuantState.as_dict(packed=True)
   of bitsandbytes.functional.quantize_4bit. Tolerance: none (the rounding
   steps are IEEE fp32 operations done in bitsandbytes' order).
2. files both ways, every ISA (FTCORE_CPU_ISA=generic|avx2|avx512):
   bitsandbytes' state dicts are loaded by ours (from_tensors) and
   dequantized to fp32, bf16 and fp16: EQUAL bit for bit to
   dequantize_4bit. Ours, loaded by QuantState.from_dict, dequantized by
   bitsandbytes: EQUAL to bitsandbytes' own result. quant_storage bf16/fp32
   files equal bitsandbytes' quant_storage output the same way.
3. malformed files (missing, mis-sized or mistyped tensors, bad JSON,
   wrong code book) are refused with the tensor's name in the message.
4. matmul / matmul_grad_input (tiled, several tiles) vs the exact product
   (float64) of the same compute-dtype operands, dequant_bnb(W) in compute
   dtype: |ours - exact| <= rel * |exact| + 2 * K * 2^-24 * (|x| @ |W|^T),
   K the reduction length; rel = 2^-8 when the result is rounded to bf16
   (half an ulp, 2^-9, plus slack for the fp32 accumulator), 0 for fp32.
   That is the textbook bound of a K-term fp32 dot product, so any tiling or
   summation order passes and a wrong tile (a swapped row, a missing block)
   fails by orders of magnitude. torch's own matmul is checked against the
   same bound, so the bound is not vacuous.
5. bytes per parameter with double quant (blocksize 64) on 1024x4096:
   (packed + state) / numel, equal to the same count from bitsandbytes'
   tensors, and <= 0.52.

usage: bnb4bit_reference.py QUANTIZE_TENSORS_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile

import torch
import bitsandbytes.functional as F
from safetensors.torch import load_file, save_file

TOOL = sys.argv[1]
ISAS = ["generic", "avx2", "avx512"]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
STORAGE = {"uint8": torch.uint8, "bf16": torch.bfloat16, "fp32": torch.float32}
torch.set_num_threads(int(os.environ.get("FTCORE_NUM_THREADS", "2")))
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(args, isa=None, expect_ok=True):
    env = dict(os.environ)
    if isa:
        env["FTCORE_CPU_ISA"] = isa
    r = subprocess.run([TOOL] + args, env=env, capture_output=True, text=True)
    if expect_ok and r.returncode != 0:
        raise RuntimeError(f"quantize_tensors {' '.join(args)} failed: {r.stderr}")
    return r


def sets(qt, dq, bs, storage="uint8"):
    return ["--quantizer", qt, "--set", f"double_quant={'true' if dq else 'false'}", "--set", f"blocksize={bs}",
            "--set", f'quant_storage="{storage}"']


def crafted(qt):
    """Values exactly on bitsandbytes' fp32 midpoints and one ulp either side, absmax 1 and 3.7."""
    code = F.get_4bit_type(qt, device="cpu")
    s = torch.sort(code).values
    mids = (s[:-1] + s[1:]) / 2
    vals = torch.cat([mids, torch.nextafter(mids, torch.tensor(2.0)), torch.nextafter(mids, torch.tensor(-2.0)),
                      torch.tensor([0.0, -0.0, 1e-30, -1e-30])])
    body = torch.cat([torch.tensor([1.0]), vals])
    return {
        f"mid_{qt}": torch.cat([body, body * 3.7]),
        f"zeros_{qt}": torch.cat([torch.zeros(64), torch.randn(64), torch.zeros(13)]),
        f"tiny_{qt}": torch.randn(200) * 1e-40,
    }


def bits(t):
    """Bytes of t with -0.0 made +0.0 (adding +0.0 does that and nothing else): bitsandbytes'
    native CPU (and CUDA) FP4 decode gives -0.0 for code 0b1000, its pure-torch path and
    get_4bit_type +0.0; ours gives +0.0. Every other bit must match."""
    return (t + 0.0).view(torch.uint8)


def make_inputs(seed):
    g = torch.Generator().manual_seed(seed)
    t = {}
    for shape in [(1000, 37), (3, 5), (4097,), (33, 130), (256, 1024)]:
        for dn, dt in DTYPES.items():
            name = "w_" + "x".join(map(str, shape)) + "_" + dn
            t[name] = (torch.randn(shape, generator=g) * torch.rand(shape, generator=g) ** 3).to(dt)
    for qt in ("nf4", "fp4"):
        t.update(crafted(qt))
    return t


def bnb_state_dict(name, w, qt, dq, bs, storage=torch.uint8):
    packed, st = F.quantize_4bit(w, blocksize=bs, compress_statistics=dq, quant_type=qt, quant_storage=storage)
    sd = {name + ".weight": packed}
    sd.update({name + ".weight." + k: v for k, v in st.as_dict(packed=True).items()})
    return sd, packed, st


def with_dtype(st, dtype):
    """The state with another output dtype and its shape flattened: bitsandbytes' native CPU
    dequantize_4bit picks the wrong absmax when a row does not hold whole blocks (e.g. 64x48 or
    8x96 with blocksize 64; its own quantize_4bit, default backend and CUDA kernels use blocks of
    the flattened weight), so the reference runs that same kernel on the flattened layout."""
    c = F.QuantState(absmax=st.absmax, shape=torch.Size([st.shape.numel()]), code=st.code, blocksize=st.blocksize, quant_type=st.quant_type,
                     dtype=dtype, offset=st.offset, state2=st.state2)
    return c


def test_quantize_and_files(tmp):
    inputs = make_inputs(0)
    in_path = os.path.join(tmp, "in.safetensors")
    save_file(inputs, in_path)
    configs = [(qt, dq, bs) for qt in ("nf4", "fp4") for dq in (False, True) for bs in (32, 64)]
    configs += [("nf4", True, 128), ("fp4", False, 128), ("nf4", True, 256), ("fp4", False, 512), ("nf4", False, 1024),
                ("fp4", True, 2048), ("nf4", True, 4096), ("fp4", False, 4096)]
    for qt, dq, bs in configs:
        tag = f"{qt} dq={dq} bs={bs}"
        out = os.path.join(tmp, "ours.safetensors")
        run(sets(qt, dq, bs) + ["--mode", "quantize", "--inputs", in_path, "--out", out])
        ours = load_file(out)
        theirs = {}
        states = {}
        for name, w in inputs.items():
            sd, packed, st = bnb_state_dict(name, w, qt, dq, bs)
            theirs.update(sd)
            states[name] = (packed, st)
        check(sorted(ours) == sorted(theirs), f"{tag}: tensor names differ: {set(ours) ^ set(theirs)}")
        diff = [k for k in theirs if k in ours and not (ours[k].dtype == theirs[k].dtype and
                                                        ours[k].shape == theirs[k].shape and
                                                        torch.equal(ours[k].view(torch.uint8), theirs[k].view(torch.uint8)))]
        check(not diff, f"{tag}: tensors differ from bitsandbytes: {diff[:5]}")
        # ours -> bitsandbytes: QuantState.from_dict + dequantize_4bit equals bnb on its own state.
        for name, (packed, st) in states.items():
            qs = {k[len(name) + 8:]: v for k, v in ours.items() if k.startswith(name + ".weight.")}
            mine = F.QuantState.from_dict(qs, device=torch.device("cpu"))
            mine.shape = torch.Size([mine.shape.numel()])
            a = F.dequantize_4bit(ours[name + ".weight"], mine)
            b = F.dequantize_4bit(packed, with_dtype(st, st.dtype))
            check(torch.equal(bits(a), bits(b)), f"{tag}: {name} via from_dict differs")
        # bitsandbytes -> ours, every ISA, three output dtypes.
        bnb_path = os.path.join(tmp, "bnb.safetensors")
        save_file({k: v.contiguous() for k, v in theirs.items()}, bnb_path)
        isas = ISAS if bs in (32, 64) else ["avx512"]
        for isa in isas:
            for dn, dt in DTYPES.items():
                dq_out = os.path.join(tmp, "dq.safetensors")
                run(sets(qt, dq, bs) + ["--mode", "dequantize", "--dtype", dn, "--inputs", bnb_path, "--out", dq_out],
                    isa=isa)
                got = load_file(dq_out)
                bad = []
                for name, (packed, st) in states.items():
                    ref = F.dequantize_4bit(packed, with_dtype(st, dt)).reshape(-1)
                    if not (got[name].dtype == dt and got[name].shape == st.shape and
                            torch.equal(bits(got[name].reshape(-1)), bits(ref))):
                        bad.append(name)
                check(not bad, f"{tag} {isa} -> {dn}: dequantization differs: {bad[:5]}")
        print(f"ok {tag}: {len(inputs)} tensors equal bitsandbytes (codes, absmax, nested, JSON, dequant x {isas})")


def test_quant_storage(tmp):
    g = torch.Generator().manual_seed(1)
    inputs = {"a": torch.randn(64, 48, generator=g), "b": torch.randn(40, 10, generator=g).bfloat16()}
    in_path = os.path.join(tmp, "st_in.safetensors")
    save_file(inputs, in_path)
    for storage in ("bf16", "fp32"):
        out = os.path.join(tmp, "st.safetensors")
        run(sets("nf4", True, 64, storage) + ["--mode", "quantize", "--inputs", in_path, "--out", out])
        ours = load_file(out)
        for name, w in inputs.items():
            sd, packed, st = bnb_state_dict(name, w, "nf4", True, 64, STORAGE[storage])
            same = all(k in ours and ours[k].dtype == v.dtype and ours[k].shape == v.shape and
                       torch.equal(ours[k].view(torch.uint8), v.view(torch.uint8)) for k, v in sd.items())
            check(same, f"quant_storage={storage}: {name} differs from bitsandbytes")
        dq_out = os.path.join(tmp, "st_dq.safetensors")
        run(sets("nf4", True, 64, storage) + ["--mode", "dequantize", "--inputs", out, "--out", dq_out])
        got = load_file(dq_out)
        for name, w in inputs.items():
            _, packed, st = bnb_state_dict(name, w, "nf4", True, 64, STORAGE[storage])
            ref = F.dequantize_4bit(packed, with_dtype(st, st.dtype)).reshape(st.shape)
            check(torch.equal(got[name], ref), f"quant_storage={storage}: {name} dequant")
    print("ok quant_storage bf16/fp32: files and dequantization equal bitsandbytes")


def test_malformed(tmp):
    w = torch.randn(70, 30)
    sd, _, _ = bnb_state_dict("m", w, "nf4", True, 64)
    qs = "m.weight.quant_state.bitsandbytes__nf4"
    meta = json.loads(bytes(sd[qs].tolist()))

    def js(**kw):
        d = dict(meta)
        d.update(kw)
        return torch.tensor(list(json.dumps(d).encode()), dtype=torch.uint8)

    cases = {
        "missing absmax": ({k: v for k, v in sd.items() if k != "m.weight.absmax"}, "m.weight.absmax"),
        "short absmax": (dict(sd, **{"m.weight.absmax": sd["m.weight.absmax"][:-1]}), "m.weight.absmax"),
        "fp32 absmax with nested": (dict(sd, **{"m.weight.absmax": sd["m.weight.absmax"].float()}), "m.weight.absmax"),
        "bad json": (dict(sd, **{qs: torch.tensor(list(b"{not json"), dtype=torch.uint8)}), qs),
        "shape mismatch": (dict(sd, **{qs: js(shape=[70, 31])}), "m.weight"),
        "blocksize 48": (dict(sd, **{qs: js(blocksize=48)}), qs),
        "dtype int8": (dict(sd, **{qs: js(dtype="int8")}), qs),
        "quant_type fp4": (dict(sd, **{qs: js(quant_type="fp4")}), qs),
        "quant_map altered": (dict(sd, **{"m.weight.quant_map": sd["m.weight.quant_map"] * 2}), "m.weight.quant_map"),
        "nested_quant_map short": (dict(sd, **{"m.weight.nested_quant_map": sd["m.weight.nested_quant_map"][:255]}),
                                   "m.weight.nested_quant_map"),
        "packed short": (dict(sd, **{"m.weight": sd["m.weight"][:-1]}), "m.weight"),
    }
    for what, (d, name) in cases.items():
        p = os.path.join(tmp, "bad.safetensors")
        save_file({k: v.contiguous() for k, v in d.items()}, p)
        r = run(["--quantizer", "nf4", "--mode", "dequantize", "--inputs", p, "--out", os.path.join(tmp, "x")],
                expect_ok=False)
        check(r.returncode == 1 and name in r.stderr, f"malformed '{what}': rc {r.returncode}, stderr {r.stderr!r}")
    print(f"ok malformed: {len(cases)} corrupted files refused naming the tensor")


def test_matmul(tmp):
    g = torch.Generator().manual_seed(2)
    shapes = {"p": (96, 200), "q": (1100, 1024), "r": (2100, 600), "s": (7, 33)}
    weights = {n: torch.randn(s, generator=g) * 0.05 for n, s in shapes.items()}
    for cd, cdt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        for xd in (torch.float32, torch.bfloat16):
            qt, dq = ("nf4", True) if cd == "bf16" else ("fp4", False)
            sd, states, xs = {}, {}, {}
            for n, w in weights.items():
                d, packed, st = bnb_state_dict(n, w, qt, dq, 64)
                sd.update(d)
                states[n] = (packed, st)
                xs["x." + n] = torch.randn(2, 9, w.shape[1], generator=g).to(xd)
                xs["g." + n] = torch.randn(2, 9, w.shape[0], generator=g).to(xd)
            qp, xp, op = (os.path.join(tmp, f) for f in ("mq.safetensors", "mx.safetensors", "mo.safetensors"))
            save_file({k: v.contiguous() for k, v in sd.items()}, qp)
            save_file(xs, xp)
            for isa in ISAS:
                run(["--quantizer", qt, "--set", f'compute_dtype="{cd}"', "--mode", "matmul", "--inputs", qp,
                     "--xs", xp, "--out", op], isa=isa)
                got = load_file(op)
                worst = 0.0
                for n in weights:
                    packed, st = states[n]
                    W = F.dequantize_4bit(packed, with_dtype(st, cdt)).reshape(st.shape)
                    for kind, a, Wm, K in (("y", xs["x." + n], W.t(), W.shape[1]), ("gx", xs["g." + n], W, W.shape[0])):
                        a_c = a.to(cdt)
                        exact = a_c.double() @ Wm.double()
                        absprod = a_c.double().abs() @ Wm.double().abs()
                        rel = 2.0 ** -8 if (cdt == torch.bfloat16 or xd == torch.bfloat16) else 0.0
                        bound = rel * exact.abs() + 2 * K * 2.0 ** -24 * absprod + 1e-30
                        ours = got[f"{kind}.{n}"]
                        torch_res = (a_c @ Wm).to(xd)
                        check(ours.dtype == xd and ours.shape == exact.shape, f"{kind}.{n}: dtype/shape")
                        err = ((ours.double() - exact).abs() / bound).max().item()
                        terr = ((torch_res.double() - exact).abs() / bound).max().item()
                        worst = max(worst, err)
                        check(err <= 1.0, f"matmul {cd} x={xd} {isa} {kind}.{n}: error/bound {err:.3f}")
                        check(terr <= 1.0, f"torch itself exceeds the bound ({terr:.3f}) for {kind}.{n}")
            print(f"ok matmul compute={cd} x={xd}: max error/bound {worst:.3f} (fwd and grad_input, {ISAS})")


def test_bytes_per_param(tmp):
    w = torch.randn(1024, 4096)
    p = os.path.join(tmp, "big.safetensors")
    save_file({"w": w}, p)
    out = os.path.join(tmp, "big_q.safetensors")
    run(sets("nf4", True, 64) + ["--mode", "quantize", "--inputs", p, "--out", out])
    from safetensors import safe_open
    with safe_open(out, "pt") as f:
        meta = f.metadata()
    ours = int(meta["bytes.w"]) / int(meta["numel.w"])
    packed, st = F.quantize_4bit(w, blocksize=64, compress_statistics=True, quant_type="nf4")
    theirs = (packed.numel() + st.absmax.numel() + 4 * st.code.numel() + 4 * st.state2.absmax.numel() +
              4 * st.state2.code.numel() + 4) / w.numel()
    check(abs(ours - theirs) < 1e-12, f"bytes/param {ours} vs bitsandbytes' tensors {theirs}")
    check(ours <= 0.52, f"bytes/param {ours} > 0.52")
    print(f"ok bytes/param with double quant, blocksize 64: {ours:.5f} (bitsandbytes' tensors: {theirs:.5f})")


def test_large_outputs(tmp):
    """Outputs of 8 MiB or more take the kernel's non-temporal-store path:
    a 2048x2056 weight and an odd 1x4194305 one (partial last block),
    dequantized to fp32 and bf16 on every ISA, bit for bit as bitsandbytes."""
    g = torch.Generator().manual_seed(7)
    for qt, dq, bs in (("nf4", True, 64), ("fp4", False, 256)):
        sd, refs = {}, {}
        for i, shape in enumerate([(2048, 2056), (1, 4194305)]):
            w = (torch.randn(shape, generator=g) * torch.rand(shape, generator=g) ** 3).bfloat16()
            part, packed, st = bnb_state_dict(f"big{i}", w, qt, dq, bs)
            sd.update(part)
            refs[f"big{i}"] = (packed, st)
        src = os.path.join(tmp, "large.safetensors")
        save_file({k: v.contiguous() for k, v in sd.items()}, src)
        for isa in ISAS:
            for dn in ("float32", "bfloat16"):
                out = os.path.join(tmp, "large_out.safetensors")
                run(sets(qt, dq, bs) + ["--mode", "dequantize", "--dtype", dn, "--inputs", src, "--out", out], isa=isa)
                got = load_file(out)
                for name, (packed, st) in refs.items():
                    ref = F.dequantize_4bit(packed, with_dtype(st, DTYPES[dn])).reshape(-1)
                    check(torch.equal(bits(got[name].reshape(-1)), bits(ref)),
                          f"large output {name} {qt} dq={dq} bs={bs} {isa} {dn}: differs from bitsandbytes")
    print("ok outputs >= 8 MiB (non-temporal stores): nf4/fp4, every ISA, fp32/bf16, equal to bitsandbytes")


with tempfile.TemporaryDirectory() as tmp:
    test_large_outputs(tmp)
    test_bytes_per_param(tmp)
    test_malformed(tmp)
    test_quant_storage(tmp)
    test_matmul(tmp)
    test_quantize_and_files(tmp)

if failures:
    print(f"{len(failures)} failures")
    sys.exit(1)
print("all bnb4bit reference checks passed")
