"""`ftcore convert` against transformers' own GGUF loader.

1. A tiny random Llama (GQA, tied embeddings, Q8_0/Q4_0/Q4_1/F16/F32 tensors,
   a byte-level BPE vocabulary with special tokens) is written with the `gguf`
   package; ftcore converts it to an HF folder; transformers loads that folder
   AND the GGUF itself (`gguf_file=`, which dequantizes with gguf.quants and
   un-permutes q/k its own way). Every weight must be bit-identical, the
   configs must agree, and the two tokenizers must give the same ids on a
   mixed corpus.
2. When the default model's GGUF is present (setup fetched it), the same
   comparison runs on it; otherwise the script says it skipped that part.

usage: convert_reference.py FTCORE_BINARY [DEFAULT_MODEL_GGUF]
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from gguf import GGMLQuantizationType as T
from gguf import GGUFWriter
from gguf.quants import quantize
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

CORPUS = [
    "The capital of France is Paris.",
    "hello  world\n\ttabs and   spaces",
    "numbers 1234567 and 3.14159",
    "ünïcödé 日本語 🙂",
    "<|im_start|>user\nhi<|im_end|>",
    "",
]


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def write_tiny_gguf(path):
    rng = np.random.default_rng(3)
    byte_tokens = list(bytes_to_unicode().values())
    merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ w", "r e", "a n"]
    merged = [m.replace(" ", "") for m in merges]
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokens = special + byte_tokens + merged
    types = [3] * len(special) + [1] * (len(tokens) - len(special))
    vocab, hidden, heads, kv_heads, ffn, layers = len(tokens), 64, 4, 2, 128, 2
    w = GGUFWriter(path, arch="llama")
    w.add_context_length(256)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(hidden // heads)
    w.add_vocab_size(vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_pad_token_id(2)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}")

    def add(name, shape, qtype):
        data = (rng.standard_normal(shape) * 0.2).astype(np.float32)
        if qtype == T.F32:
            w.add_tensor(name, data)
        elif qtype == T.F16:
            w.add_tensor(name, data.astype(np.float16))
        else:
            raw = quantize(data, qtype)
            w.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=qtype)

    add("token_embd.weight", (vocab, hidden), T.Q8_0)
    kv = hidden // heads * kv_heads
    for i in range(layers):
        add(f"blk.{i}.attn_norm.weight", (hidden,), T.F32)
        add(f"blk.{i}.attn_q.weight", (hidden, hidden), T.Q4_0)
        add(f"blk.{i}.attn_k.weight", (kv, hidden), T.Q4_1)
        add(f"blk.{i}.attn_v.weight", (kv, hidden), T.Q8_0)
        add(f"blk.{i}.attn_output.weight", (hidden, hidden), T.F16)
        add(f"blk.{i}.ffn_norm.weight", (hidden,), T.F32)
        add(f"blk.{i}.ffn_gate.weight", (ffn, hidden), T.Q4_1)
        add(f"blk.{i}.ffn_up.weight", (ffn, hidden), T.Q4_0)
        add(f"blk.{i}.ffn_down.weight", (hidden, ffn), T.Q8_0)
    add("output_norm.weight", (hidden,), T.F32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def compare(ftcore, gguf_path, out_dir, label):
    subprocess.run([ftcore, "convert", gguf_path, out_dir], check=True)
    folder, name = os.path.dirname(gguf_path), os.path.basename(gguf_path)
    ref = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    ours = AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32)
    ref_sd, our_sd = ref.state_dict(), ours.state_dict()
    assert set(ref_sd) == set(our_sd), f"{label}: parameter names differ: {set(ref_sd) ^ set(our_sd)}"
    bad = [k for k in ref_sd if not torch.equal(ref_sd[k], our_sd[k])]
    assert not bad, f"{label}: {len(bad)} tensors differ from transformers' GGUF loading, e.g. {bad[:3]}"
    ref_cfg = AutoConfig.from_pretrained(folder, gguf_file=name)
    our_cfg = AutoConfig.from_pretrained(out_dir)
    for key in ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "rms_norm_eps", "vocab_size", "tie_word_embeddings", "max_position_embeddings"]:
        assert getattr(ref_cfg, key) == getattr(our_cfg, key), f"{label}: config {key}: {getattr(ref_cfg, key)} vs {getattr(our_cfg, key)}"
    assert abs(ref_cfg.rope_parameters["rope_theta"] - our_cfg.rope_parameters["rope_theta"]) < 1e-6 * ref_cfg.rope_parameters["rope_theta"]
    ref_tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    our_tok = AutoTokenizer.from_pretrained(out_dir)
    for text in CORPUS:
        a, b = our_tok(text).input_ids, ref_tok(text).input_ids
        assert a == b, f"{label}: token ids differ on {text!r}: {a} vs {b}"
        assert our_tok.decode(a) == text, f"{label}: decode does not round-trip {text!r}"
    print(f"{label}: {len(our_sd)} tensors bit-identical to transformers' GGUF loading; config and "
          f"tokenizer ({len(CORPUS)} texts) agree")


def main():
    ftcore = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        tiny = os.path.join(tmp, "tiny.gguf")
        write_tiny_gguf(tiny)
        compare(ftcore, tiny, os.path.join(tmp, "tiny-hf"), "tiny llama")
        default = sys.argv[2] if len(sys.argv) > 2 else ""
        if default and os.path.exists(default):
            compare(ftcore, default, os.path.join(tmp, "default-hf"), "default model")
        else:
            print(f"SKIPPED the default-model comparison: {default or '(no path)'} is not present "
                  f"(third_party/setup_defaults.sh fetches it)")


if __name__ == "__main__":
    main()
