"""The AutoGPTQ/GPTQModel v1 checkpoint layout and round-to-nearest, written
from its documentation for the tests (not from any GPTQ package):

  qweight int32 [in * bits / 32, out]: codes packed along the input
          dimension, lowest bits first (3-bit: 32 values fill 3 words);
  qzeros  int32 [groups, out * bits / 32]: zero point - 1, packed the same
          way along the output dimension;
  scales  fp16 [groups, out]; g_idx int32 [in]: each input column's group;
  W[o, i] = scales[g_idx[i], o] * (q[o, i] - zero[g_idx[i], o]).

Used by gptq_reference.py (the quantizer plugin) and
quantized_model_reference.py (GPTQ bases end to end).
"""
import torch


def minmax(x, bits, sym):
    """AutoGPTQ's quantizer parameters per row of x [rows, k]."""
    maxq = 2 ** bits - 1
    xmin = x.min(1).values.clamp(max=0)
    xmax = x.max(1).values.clamp(min=0)
    if sym:
        xmax = torch.maximum(xmin.abs(), xmax)
        xmin = torch.where(xmin < 0, -xmax, xmin)
    both = (xmin == 0) & (xmax == 0)
    xmin = torch.where(both, -torch.ones_like(xmin), xmin)
    xmax = torch.where(both, torch.ones_like(xmax), xmax)
    scale = (xmax - xmin) / maxq
    zero = torch.full_like(scale, (maxq + 1) // 2) if sym else torch.round(-xmin / scale)
    return scale, zero


def rtn(w, bits, gs, sym):
    w = w.double()
    gs = w.shape[1] if gs == -1 else gs
    parts = []
    for c in range(0, w.shape[1], gs):
        s, z = minmax(w[:, c:c + gs], bits, sym)
        s16 = s.half().double()
        q = torch.clamp(torch.round(w[:, c:c + gs] / s[:, None]) + z[:, None], 0, 2 ** bits - 1)
        parts.append(s16[:, None] * (q - z[:, None]))
    return torch.cat(parts, 1)


def dequant(codes, scales16, zeros, g_idx):
    """W[o, i] = scales[g_idx[i], o] * (q[o, i] - zero[g_idx[i], o]), in float32 (exact)."""
    s = scales16.float()[g_idx].t()
    z = zeros.float()[g_idx].t()
    return s * (codes.float() - z)



def to_i32(v):
    v = v & 0xFFFFFFFF
    return torch.where(v >= 2 ** 31, v - 2 ** 32, v).to(torch.int32)


def pack_autogptq(values, bits):
    """values [rows, cols] (int64) -> int32 [rows*bits/32, cols], packed along rows."""
    rows, cols = values.shape
    v = values.long()
    out = torch.zeros(rows * bits // 32, cols, dtype=torch.int64)
    if bits in (2, 4, 8):
        per = 32 // bits
        for r in range(rows):
            out[r // per] |= v[r] << (bits * (r % per))
    else:  # 3-bit: every 32 values fill 3 words; values 10 and 21 straddle
        for base in range(0, rows, 32):
            wrd = base // 32 * 3
            for j in range(10):
                out[wrd] |= v[base + j] << (3 * j)
            out[wrd] |= (v[base + 10] << 30) & 0xFFFFFFFF
            out[wrd + 1] |= (v[base + 10] >> 2) & 1
            for j in range(10):
                out[wrd + 1] |= v[base + 11 + j] << (3 * j + 1)
            out[wrd + 1] |= (v[base + 21] << 31) & 0xFFFFFFFF
            out[wrd + 2] |= (v[base + 21] >> 1) & 3
            for j in range(10):
                out[wrd + 2] |= v[base + 22 + j] << (3 * j + 2)
    return to_i32(out)


def unpack_autogptq(packed, bits, rows):
    p = packed.long() & 0xFFFFFFFF
    mask = 2 ** bits - 1
    out = torch.zeros(rows, packed.shape[1], dtype=torch.int64)
    if bits in (2, 4, 8):
        per = 32 // bits
        for r in range(rows):
            out[r] = (p[r // per] >> (bits * (r % per))) & mask
    else:
        for base in range(0, rows, 32):
            wrd = base // 32 * 3
            for j in range(10):
                out[base + j] = (p[wrd] >> (3 * j)) & 7
            out[base + 10] = ((p[wrd] >> 30) & 3) | ((p[wrd + 1] & 1) << 2)
            for j in range(10):
                out[base + 11 + j] = (p[wrd + 1] >> (3 * j + 1)) & 7
            out[base + 21] = ((p[wrd + 1] >> 31) & 1) | ((p[wrd + 2] & 3) << 1)
            for j in range(10):
                out[base + 22 + j] = (p[wrd + 2] >> (3 * j + 2)) & 7
    return out


def unpack_layer(t, name, bits):
    n_in = t[f"{name}.g_idx"].numel()
    n_out = t[f"{name}.scales"].shape[1]
    codes = unpack_autogptq(t[f"{name}.qweight"], bits, n_in).t()
    stored = unpack_autogptq(t[f"{name}.qzeros"].t(), bits, n_out).t()
    # v1 stores zero - 1; a zero of 0 wraps to 2^bits - 1 (see plugins/quantizers/gptq/README.md).
    zeros = (stored + 1) % (2 ** bits)
    return codes, zeros, t[f"{name}.scales"], t[f"{name}.g_idx"].long(), stored
