"""quantizer/gptq against an independent float64 GPTQ, round-to-nearest, an
independent AutoGPTQ-layout packer/unpacker, and torch matmuls.

Inputs. Three Linear layers with correlated calibration activations:
  attn_q    [256, 256]  q_proj of layer 1 of a tiny random transformers Llama,
                        its real inputs on random token ids (16 x 64 tokens),
  mlp_down  [256, 512]  down_proj of the same layer (SiLU-gated, heavy-tailed),
  synthetic [128, 320]  mixed Gaussian features with 6 loud channels and 3 dead
                        ones (always 0: exercises H_ii = 0 -> W[:, i] = 0),
fed to the tool in 4 calibration batches per layer (the running-average H).

Reference GPTQ (ref_gptq below), float64 throughout, written from Algorithm 1
of Frantar et al. 2022 (https://arxiv.org/abs/2210.17323) with AutoGPTQ's
conventions (dead columns, act-order by descending diag(H), damp 1% of
mean diag(H), upper Cholesky factor of H^-1, lazy 128-column blocks, group
min-max parameters read from W at block granularity, sym zero (maxq+1)/2).
For each configuration (bits 2/3/4/8, group_size -1/32/128, desc_act, sym):
  * codes: the fraction of integer codes differing from the reference is at
    most 0.5% (measured: 0 for most layer/configs, at most about 0.2%;
    printed). Why not 0: ours accumulates H in fp32 (as
    AutoGPTQ) while the reference sums it in fp64, so w/s can land on the
    other side of a rounding boundary; one flipped code changes the error fed
    to the rest of the row and can flip a few more. g_idx must be identical.
  * layer output error E = ||X W^T - X Wq^T||_F over the calibration rows:
    |E_ours / E_ref - 1| <= 1% (measured at most 0.03%: the few flipped codes
    barely move E), and E_ours < E_rtn, round-to-nearest with the
    same bits, groups and min-max quantizer (no error feedback). Both Wq use
    fp16 scales, as stored.
Packing:
  * our qweight/qzeros/scales/g_idx unpacked by unpack_autogptq (written from
    the documented v1 layout: 32/bits values per int32 lowest bits first, the
    3-bit 32-values-in-3-words layout, qzeros holding zero - 1) give exactly
    the tool's dequantize() (fp32; bf16/fp16 outputs equal its rounding), and
    sym layers store zero (maxq+1)/2 everywhere.
  * the reference's result packed by pack_autogptq and loaded by the tool
    (from_tensors) dequantizes exactly to the Python dequantization, and its
    to_tensors writes the same tensors back bit for bit; the same holds with
    each ISA variant of the unpack kernel (FTCORE_CPU_ISA=generic|avx2).
Products (x [2, 8, in], g [2, 8, out]):
  * fp32: |ours - x @ Wdq^T (float64)| <= n * 2^-24 * (|x| @ |Wdq|^T), the
    worst-case bound of an fp32 sum of n products (n = in, resp. out); one
    wrong code would exceed it by orders of magnitude.
  * bf16 inputs: within one bf16 ulp (2^-8 relative) of the float64 product of
    the same bf16 inputs, plus that fp32 bound.
Errors: malformed checkpoint tensors and options fail with a message naming
the tensor/option.
The transformers GPTQ loading path needs optimum plus gptqmodel or auto-gptq;
they are not in the test venv, so it is reported as skipped, not tested.

usage: gptq_reference.py GPTQ_TOOL
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import load_file, save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gptq_layout import dequant, minmax, pack_autogptq, rtn, unpack_layer  # noqa: E402

TOOL = sys.argv[1]
torch.manual_seed(0)
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def llama_layers():
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=512, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128)
    model = LlamaForCausalLM(cfg).eval()
    layer = model.model.layers[1]
    seen = {"attn_q": [], "mlp_down": []}
    hooks = [layer.self_attn.q_proj.register_forward_pre_hook(lambda m, a: seen["attn_q"].append(a[0].reshape(-1, 256))),
             layer.mlp.down_proj.register_forward_pre_hook(lambda m, a: seen["mlp_down"].append(a[0].reshape(-1, 512)))]
    ids = torch.randint(0, 512, (16, 64))
    with torch.no_grad():
        for b in range(4):
            model(input_ids=ids[4 * b:4 * b + 4])
    for h in hooks:
        h.remove()
    return {"attn_q": (layer.self_attn.q_proj.weight.detach().clone(), seen["attn_q"]),
            "mlp_down": (layer.mlp.down_proj.weight.detach().clone(), seen["mlp_down"])}


def synthetic_layer():
    inp, out = 320, 128  # 320 = 2 x 128 + 64: a short last group, as hidden 576 has
    mix = torch.randn(inp, inp) / inp ** 0.5
    loud = torch.ones(inp)
    loud[torch.randperm(inp)[:6]] = 10.0
    batches = []
    for _ in range(4):
        x = (torch.randn(256, inp) @ mix) * loud
        x[:, [5, 77, 300]] = 0.0  # dead inputs
        batches.append(x)
    w = torch.distributions.StudentT(4.0).sample((out, inp)) * 0.02
    return {"synthetic": (w, batches)}


LAYERS = {**llama_layers(), **synthetic_layer()}


def ref_gptq(w, h, bits, gs, sym, desc_act, damp=0.01, block=128):
    """Returns codes [out, in], scales [groups, out], zeros [groups, out], g_idx [in]."""
    w = w.double().clone()
    h = h.double().clone()
    n_in = w.shape[1]
    maxq = 2 ** bits - 1
    if gs == -1:
        scale, zero = minmax(w, bits, sym)
        scales, zeros = [scale], [zero]
    else:
        scales, zeros = [], []
    dead = torch.diag(h) == 0
    h[dead, dead] = 1
    w[:, dead] = 0
    perm = torch.arange(n_in)
    if desc_act:
        perm = torch.sort(torch.diag(h), descending=True, stable=True).indices
        w, h = w[:, perm], h[perm][:, perm]
    h += damp * torch.diag(h).mean() * torch.eye(n_in, dtype=torch.float64)
    u = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(h)), upper=True)
    codes = torch.zeros_like(w)
    for i1 in range(0, n_in, block):
        i2 = min(i1 + block, n_in)
        w1 = w[:, i1:i2].clone()
        err1 = torch.zeros_like(w1)
        for i in range(i2 - i1):
            c = i1 + i
            if gs != -1 and c % gs == 0:
                scale, zero = minmax(w[:, c:c + gs], bits, sym)  # W, not W1: AutoGPTQ's group parameters
                scales.append(scale)
                zeros.append(zero)
            q = torch.clamp(torch.round(w1[:, i] / scale) + zero, 0, maxq)
            codes[:, c] = q
            e = (w1[:, i] - scale * (q - zero)) / u[c, c]
            w1[:, i:] -= e[:, None] * u[c, c:i2][None, :]
            err1[:, i] = e
        w[:, i2:] -= err1 @ u[i1:i2, i2:]
    inv = torch.argsort(perm)
    g_idx = (torch.arange(n_in) // (n_in if gs == -1 else gs))[inv]
    return codes[:, inv].long(), torch.stack(scales), torch.stack(zeros).long(), g_idx


def run_tool(args, env_extra=None, expect_ok=True):
    env = dict(os.environ, **(env_extra or {}))
    r = subprocess.run([TOOL] + args, capture_output=True, text=True, env=env)
    if expect_ok and r.returncode != 0:
        raise SystemExit(f"gptq_tool {' '.join(args)} failed:\n{r.stderr}")
    return r


def product_checks(tag, name, t, x, g, wdq):
    w64 = wdq.double()
    ref = x.double() @ w64.t()
    bound = x.shape[-1] * 2.0 ** -24 * (x.double().abs() @ w64.abs().t())
    check(bool(((t[f"matmul.{name}"].double() - ref).abs() <= bound).all()), f"{tag}: matmul fp32 within n*2^-24*|x||W|")
    xb = x.bfloat16()
    refb = xb.double() @ w64.t()
    boundb = 2.0 ** -8 * refb.abs() + x.shape[-1] * 2.0 ** -24 * (xb.double().abs() @ w64.abs().t())
    ok = t[f"matmul_bf16.{name}"].dtype == torch.bfloat16 and bool(((t[f"matmul_bf16.{name}"].double() - refb).abs() <= boundb).all())
    check(ok, f"{tag}: matmul bf16 within 1 bf16 ulp")
    refg = g.double() @ w64
    boundg = g.shape[-1] * 2.0 ** -24 * (g.double().abs() @ w64.abs())
    check(bool(((t[f"grad_input.{name}"].double() - refg).abs() <= boundg).all()), f"{tag}: matmul_grad_input fp32 within n*2^-24*|g||W|")
    gb = g.bfloat16()
    refgb = gb.double() @ w64
    boundgb = 2.0 ** -8 * refgb.abs() + g.shape[-1] * 2.0 ** -24 * (gb.double().abs() @ w64.abs())
    check(bool(((t[f"grad_input_bf16.{name}"].double() - refgb).abs() <= boundgb).all()), f"{tag}: matmul_grad_input bf16 within 1 bf16 ulp")


CONFIGS = [  # bits, group_size, desc_act, sym
    (4, 128, False, True), (4, 128, True, True), (4, 32, False, False), (4, -1, False, True),
    (4, 32, True, False), (8, 128, True, False), (8, -1, False, True), (3, 128, False, False),
    (3, 32, True, True), (2, 32, False, True), (2, 128, True, False),
]

tmp = tempfile.mkdtemp(prefix="gptq_ref_")
inputs = {}
xs, gs_ = {}, {}
for name, (w, batches) in LAYERS.items():
    inputs[f"weight.{name}"] = w.contiguous()
    for k, b in enumerate(batches):
        inputs[f"calib.{name}.{k}"] = b.contiguous()
    xs[name] = torch.randn(2, 8, w.shape[1])
    gs_[name] = torch.randn(2, 8, w.shape[0])
    inputs[f"x.{name}"] = xs[name]
    inputs[f"g.{name}"] = gs_[name]
in_path = os.path.join(tmp, "inputs.safetensors")
save_file(inputs, in_path)

worst_flip = 0.0
for bits, gsize, desc_act, sym in CONFIGS:
    cfg = f"bits={bits} group_size={gsize} desc_act={desc_act} sym={sym}"
    out_path = os.path.join(tmp, "out.safetensors")
    sets = ["--set", f"bits={bits}", "--set", f"group_size={gsize}", "--set", f"desc_act={str(desc_act).lower()}",
            "--set", f"sym={str(sym).lower()}"]
    r = run_tool(["quantize"] + sets + ["--inputs", in_path, "--out", out_path])
    t = load_file(out_path)
    packed_ref = {}
    for name, (w, batches) in LAYERS.items():
        tag = f"{name} [{cfg}]"
        x = torch.cat(batches).double()
        h = 2.0 * x.t() @ x / x.shape[0]
        codes_r, scales_r, zeros_r, gidx_r = ref_gptq(w, h, bits, gsize, sym, desc_act)
        codes, zeros, scales, gidx, stored = unpack_layer(t, name, bits)
        wdq = t[f"dequant.{name}"]
        # Packing: our tensors, unpacked independently, are our dequantize().
        check(t[f"{name}.qweight"].dtype == torch.int32 and t[f"{name}.qzeros"].dtype == torch.int32
              and t[f"{name}.scales"].dtype == torch.float16 and t[f"{name}.g_idx"].dtype == torch.int32
              and tuple(t[f"{name}.qweight"].shape) == (w.shape[1] * bits // 32, w.shape[0]),
              f"{tag}: v1 dtypes and shapes")
        mine = dequant(codes, scales, zeros, gidx)
        check(torch.equal(mine, wdq), f"{tag}: independent unpack == dequantize() (exact)")
        check(torch.equal(t[f"dequant_bf16.{name}"], wdq.bfloat16()) and torch.equal(t[f"dequant_f16.{name}"], wdq.half()),
              f"{tag}: bf16/fp16 dequantize == fp32 rounded")
        if sym:
            check(bool((stored == 2 ** (bits - 1) - 1).all()), f"{tag}: sym qzeros store (maxq+1)/2 - 1")
        # Against the reference GPTQ.
        flips = (codes != codes_r).double().mean().item()
        worst_flip = max(worst_flip, flips)
        check(torch.equal(gidx, gidx_r), f"{tag}: g_idx identical")
        check(flips <= 0.005, f"{tag}: codes differing from the float64 reference {flips:.4%} <= 0.5%")
        wq_r = dequant(codes_r, scales_r.half(), zeros_r, gidx_r).double()
        e_ours = torch.linalg.norm(x @ (w.double() - wdq.double()).t()).item()
        e_ref = torch.linalg.norm(x @ (w.double() - wq_r).t()).item()
        e_rtn = torch.linalg.norm(x @ (w.double() - rtn(w, bits, gsize, sym)).t()).item()
        check(abs(e_ours / e_ref - 1) <= 0.01,
              f"{tag}: output error {e_ours:.6g} vs reference {e_ref:.6g} ({e_ours / e_ref - 1:+.3%}) within 1%")
        check(e_ours < e_rtn, f"{tag}: output error {e_ours:.4g} < round-to-nearest {e_rtn:.4g} ({e_ours / e_rtn:.3f}x)")
        product_checks(tag, name, t, xs[name], gs_[name], wdq)
        # The reference's result in AutoGPTQ layout, packed in Python, for the load round trip.
        packed_ref[f"{name}.qweight"] = pack_autogptq(codes_r.t(), bits)
        packed_ref[f"{name}.qzeros"] = pack_autogptq(((zeros_r - 1) % (2 ** bits)).t(), bits).t().contiguous()
        packed_ref[f"{name}.scales"] = scales_r.half().contiguous()
        packed_ref[f"{name}.g_idx"] = gidx_r.to(torch.int32)
        packed_ref[f"x.{name}"] = xs[name]
        packed_ref[f"g.{name}"] = gs_[name]
        packed_ref[f"_dq.{name}"] = dequant(codes_r, scales_r.half(), zeros_r, gidx_r)
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            print("     timing", cfg, line)
    # Python-packed checkpoint -> from_tensors -> dequantize, for every ISA variant.
    pk_path = os.path.join(tmp, "packed.safetensors")
    save_file({k: v.contiguous() for k, v in packed_ref.items() if not k.startswith("_dq.")}, pk_path)
    for isa in ("generic", "avx2", "avx512"):
        lo_path = os.path.join(tmp, f"loaded_{isa}.safetensors")
        run_tool(["load", "--inputs", pk_path, "--out", lo_path], {"FTCORE_CPU_ISA": isa})
        lt = load_file(lo_path)
        for name in LAYERS:
            tag = f"{name} [{cfg}] loaded ({isa})"
            check(torch.equal(lt[f"dequant.{name}"], packed_ref[f"_dq.{name}"]), f"{tag}: dequantize == Python dequant (exact)")
            check(all(torch.equal(lt[f"rt.{name}.{s}"], packed_ref[f"{name}.{s}"]) for s in ("qweight", "qzeros", "scales", "g_idx")),
                  f"{tag}: to_tensors writes the loaded tensors back bit for bit")
            if isa == "generic":
                product_checks(tag, name, lt, xs[name], gs_[name], packed_ref[f"_dq.{name}"])
print(f"     largest fraction of codes differing from the reference: {worst_flip:.4%}")

good = load_file(os.path.join(tmp, "packed.safetensors"))  # last config: 2-bit, group 128


def bad_load(mutate, needle, what):
    t = {k: v for k, v in good.items() if k.startswith("synthetic.")}
    mutate(t)
    p = os.path.join(tmp, "bad.safetensors")
    save_file(t, p)
    r = run_tool(["load", "--inputs", p, "--out", os.path.join(tmp, "bad_out.safetensors")], expect_ok=False)
    check(r.returncode != 0 and needle in r.stderr, f"error: {what}: {r.stderr.strip()}")


bad_load(lambda t: t.__setitem__("synthetic.qweight", t["synthetic.qweight"].float()), "synthetic.qweight must be int32", "float qweight")
bad_load(lambda t: t.__setitem__("synthetic.qweight", t["synthetic.qweight"][:, :64].contiguous()), "synthetic.qweight has shape", "qweight columns")
bad_load(lambda t: t.__setitem__("synthetic.qweight", torch.zeros(60, 128, dtype=torch.int32)), "is not 2, 3, 4 or 8 bits", "qweight rows")
bad_load(lambda t: t.__setitem__("synthetic.qzeros", t["synthetic.qzeros"][:, :2].contiguous()), "synthetic.qzeros has shape", "qzeros shape")
bad_load(lambda t: t.__setitem__("synthetic.scales", t["synthetic.scales"].to(torch.int32)), "synthetic.scales must be float16", "int scales")
bad_load(lambda t: t.__setitem__("synthetic.g_idx", t["synthetic.g_idx"] + 5), "synthetic.g_idx has group indices", "g_idx range")
bad_load(lambda t: t.pop("synthetic.qzeros"), "missing tensor synthetic.qzeros", "missing qzeros")
r = run_tool(["quantize", "--set", "bits=5", "--inputs", in_path, "--out", os.path.join(tmp, "x.safetensors")], expect_ok=False)
check(r.returncode != 0 and "bits: got 5, supported 2, 3, 4, 8" in r.stderr, f"error: bits=5: {r.stderr.strip()}")
r = run_tool(["quantize", "--set", "group_size=0", "--inputs", in_path, "--out", os.path.join(tmp, "x.safetensors")], expect_ok=False)
check(r.returncode != 0 and "group_size: got 0" in r.stderr, f"error: group_size=0: {r.stderr.strip()}")
save_file({"weight.nocalib": torch.randn(32, 64)}, os.path.join(tmp, "nocalib.safetensors"))
r = run_tool(["quantize", "--inputs", os.path.join(tmp, "nocalib.safetensors"), "--out", os.path.join(tmp, "x.safetensors")], expect_ok=False)
check(r.returncode != 0 and "no calibration inputs were given for nocalib" in r.stderr, f"error: no calibration: {r.stderr.strip()}")

missing = [m for m in ("optimum", "gptqmodel", "auto_gptq") if importlib.util.find_spec(m) is None]
print(f"SKIP transformers GPTQ loading path: {', '.join(missing)} not installed in the venv "
      "(transformers' GptqHfQuantizer needs optimum and gptqmodel); the layout is checked by the independent unpacker")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("all checks passed")
