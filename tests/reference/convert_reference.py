"""`ftcore convert` against transformers' own GGUF loader.

1. A tiny random Llama (GQA, tied embeddings, Q8_0/Q4_0/Q4_1/F16/F32 tensors,
   a byte-level BPE vocabulary with special tokens) is written with the `gguf`
   package; ftcore converts it to an HF folder; transformers loads that folder
   AND the GGUF itself (`gguf_file=`, which dequantizes with gguf.quants and
   un-permutes q/k its own way). Every weight must be bit-identical, the
   configs must agree, and the two tokenizers must give the same ids on a
   mixed corpus.
2. The same for a tiny model of every other architecture ftcore converts
   (qwen2, qwen3, qwen3moe, gemma2, gemma3, phi3), written with that
   architecture's tensors and metadata: weights bit-identical, config fields
   (and rope parameters) equal, the tokenizers equal. Gemma 2/3 and Phi-3
   carry a SentencePiece vocabulary ("llama"), as their real GGUF files do,
   and so does a second, Llama-2-style llama: trained at test time with HF
   tokenizers (BPE, byte fallback, Metaspace) and laid out as llama.cpp
   writes one (scores, <0xNN> byte tokens, control, user-defined and unused
   tokens; Gemma's whitespace tokens as spaces and scores that do not follow
   its merge order). Their tokenizers are compared on the corpus of
   tests/unit/make_tokenizer_corpus.py (scripts, emoji, whitespace runs,
   special-token look-alikes): ids with and without special tokens and
   decoding, ours (loaded from the folder) against transformers' own load of
   the GGUF, and of the same tokenizer class.
   For the architectures in RUN_AFTER_CONVERT (qwen3moe), ftcore also loads
   the folder it wrote and runs it: `ftcore generate` greedy on two prompts
   prints what transformers' generate prints from the same folder.
3. Files ftcore must refuse (an architecture it does not convert, a Mixtral-
   style llama with experts, a tokenizer model it does not know, a
   SentencePiece vocabulary without scores, a token type out of range) exit
   non-zero naming the file and the problem.
4. When the default model's GGUF is present (setup fetched it), the first
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "unit"))
from make_tokenizer_corpus import build_corpus  # noqa: E402
from sentencepiece_gguf import write_sentencepiece_tokenizer  # noqa: E402

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


def tokenizer_vocabulary():
    byte_tokens = list(bytes_to_unicode().values())
    merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ w", "r e", "a n"]
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokens = special + byte_tokens + [m.replace(" ", "") for m in merges]
    types = [3] * len(special) + [1] * (len(tokens) - len(special))
    return tokens, types, merges


# The tiny model of each architecture: sizes, and which optional parts it has.
# head_dim / expert sizes are chosen where transformers' GGUF loader leaves
# them to the config class's defaults (Qwen3's head_dim 128, Qwen3-MoE's
# moe_intermediate_size 768, Gemma's query_pre_attn_scalar 256).
TINY = {
    "llama": dict(heads=4, kv_heads=2, head_dim=16, pre="smollm", rope=10000.0),
    "qwen2": dict(heads=4, kv_heads=2, head_dim=16, pre="qwen2", rope=1e6, qkv_bias=True, untied=True),
    "qwen3": dict(heads=2, kv_heads=1, head_dim=128, pre="qwen2", rope=1e6, qk_norm=True, key_length=True),
    "qwen3moe": dict(heads=2, kv_heads=1, head_dim=32, pre="qwen2", rope=1e6, qk_norm=True, key_length=True,
                     experts=4, experts_used=2, expert_ffn=768, untied=True),
    "gemma2": dict(heads=2, kv_heads=1, head_dim=256, rope=10000.0, gemma=True, key_length=True,
                   softcapping=(50.0, 30.0), sliding_window=64, sentencepiece=dict(pad="<pad>")),
    "gemma3": dict(heads=2, kv_heads=1, head_dim=256, rope=1e6, gemma=True, key_length=True, qk_norm=True,
                   sliding_window=64, sentencepiece=dict(pad="<pad>", add_bos=True, add_eos=False)),
    "phi3": dict(heads=4, kv_heads=2, head_dim=16, rope=10000.0, fused=True, untied=True,
                 sentencepiece=dict(pad="<|im_end|>", add_bos=False, add_eos=True)),
}
# A Llama-2-style llama: SentencePiece, no pad, add_bos_token absent (llama.cpp's default: add BOS).
LLAMA_SENTENCEPIECE = dict(TINY["llama"], pre=None, sentencepiece=dict())


def write_tokenizer(w, spec, samples, spoil=None):
    """The byte-level BPE vocabulary, or the SentencePiece one the spec asks
    for; `spoil` breaks it the way a refused file does. Returns its size."""
    sp = spec.get("sentencepiece")
    if sp is None:
        tokens, types, merges = tokenizer_vocabulary()
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(spec["pre"])
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(merges)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_unk_token_id(0)
        w.add_pad_token_id(2)
        return len(tokens)
    return write_sentencepiece_tokenizer(w, samples, spoil=spoil, **sp)


def write_tiny_gguf(path, arch="llama", mixtral_experts=False, spec=None, samples=(), spoil=None):
    spec = spec or TINY[arch]
    rng = np.random.default_rng(3)
    hidden, ffn, layers = 64, 128, 2
    heads, kv_heads, head_dim = spec["heads"], spec["kv_heads"], spec["head_dim"]
    w = GGUFWriter(path, arch=arch)
    w.add_context_length(256)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_layer_norm_rms_eps(1e-6 if spec.get("gemma") else 1e-5)
    w.add_rope_freq_base(spec["rope"])
    w.add_rope_dimension_count(head_dim)
    if spec.get("key_length"):
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    if spec.get("sliding_window"):
        w.add_sliding_window(spec["sliding_window"])
    if spec.get("softcapping"):
        w.add_attn_logit_softcapping(spec["softcapping"][0])
        w.add_final_logit_softcapping(spec["softcapping"][1])
    if spec.get("experts"):
        w.add_expert_count(spec["experts"])
        w.add_expert_used_count(spec["experts_used"])
        w.add_expert_feed_forward_length(spec["expert_ffn"])
    if mixtral_experts:
        w.add_expert_count(4)
        w.add_expert_used_count(2)
    vocab = write_tokenizer(w, spec, samples, spoil)
    w.add_vocab_size(vocab)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}")

    def add(name, shape, qtype, offset=0.0):
        data = (rng.standard_normal(shape) * 0.2 + offset).astype(np.float32)
        if qtype == T.F32:
            w.add_tensor(name, data)
        elif qtype == T.F16:
            w.add_tensor(name, data.astype(np.float16))
        else:
            raw = quantize(data, qtype)
            w.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=qtype)

    norm = 1.0 if spec.get("gemma") else 0.0  # Gemma's GGUF norms hold 1 + w: around 1
    add("token_embd.weight", (vocab, hidden), T.Q8_0)
    q, kv = heads * head_dim, kv_heads * head_dim
    for i in range(layers):
        add(f"blk.{i}.attn_norm.weight", (hidden,), T.F32, norm)
        if spec.get("fused"):
            add(f"blk.{i}.attn_qkv.weight", (q + 2 * kv, hidden), T.Q8_0)
        else:
            add(f"blk.{i}.attn_q.weight", (q, hidden), T.Q4_0)
            add(f"blk.{i}.attn_k.weight", (kv, hidden), T.Q4_1)
            add(f"blk.{i}.attn_v.weight", (kv, hidden), T.Q8_0)
        if spec.get("qkv_bias"):
            add(f"blk.{i}.attn_q.bias", (q,), T.F32)
            add(f"blk.{i}.attn_k.bias", (kv,), T.F32)
            add(f"blk.{i}.attn_v.bias", (kv,), T.F32)
        if spec.get("qk_norm"):
            add(f"blk.{i}.attn_q_norm.weight", (head_dim,), T.F32, norm)
            add(f"blk.{i}.attn_k_norm.weight", (head_dim,), T.F32, norm)
        add(f"blk.{i}.attn_output.weight", (hidden, q), T.F16)
        add(f"blk.{i}.ffn_norm.weight", (hidden,), T.F32, norm)
        if spec.get("gemma"):
            add(f"blk.{i}.post_attention_norm.weight", (hidden,), T.F32, norm)
            add(f"blk.{i}.post_ffw_norm.weight", (hidden,), T.F32, norm)
        if spec.get("experts"):
            e, f = spec["experts"], spec["expert_ffn"]
            add(f"blk.{i}.ffn_gate_inp.weight", (e, hidden), T.F32)
            add(f"blk.{i}.ffn_gate_exps.weight", (e, f, hidden), T.Q8_0)
            add(f"blk.{i}.ffn_up_exps.weight", (e, f, hidden), T.Q4_0)
            add(f"blk.{i}.ffn_down_exps.weight", (e, hidden, f), T.Q8_0)
        elif mixtral_experts:
            add(f"blk.{i}.ffn_gate_inp.weight", (4, hidden), T.F32)
            add(f"blk.{i}.ffn_gate_exps.weight", (4, ffn, hidden), T.Q8_0)
            add(f"blk.{i}.ffn_up_exps.weight", (4, ffn, hidden), T.Q8_0)
            add(f"blk.{i}.ffn_down_exps.weight", (4, hidden, ffn), T.Q8_0)
        elif spec.get("fused"):
            add(f"blk.{i}.ffn_up.weight", (2 * ffn, hidden), T.Q4_1)
            add(f"blk.{i}.ffn_down.weight", (hidden, ffn), T.Q8_0)
        else:
            add(f"blk.{i}.ffn_gate.weight", (ffn, hidden), T.Q4_1)
            add(f"blk.{i}.ffn_up.weight", (ffn, hidden), T.Q4_0)
            add(f"blk.{i}.ffn_down.weight", (hidden, ffn), T.Q8_0)
    add("output_norm.weight", (hidden,), T.F32, norm)
    if spec.get("untied"):
        add("output.weight", (vocab, hidden), T.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


COMMON_KEYS = ["model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
               "num_key_value_heads", "rms_norm_eps", "vocab_size", "tie_word_embeddings", "max_position_embeddings",
               "head_dim", "rope_parameters"]
EXTRA_KEYS = {
    "qwen3moe": ["num_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob", "decoder_sparse_step",
                 "mlp_only_layers"],
    "gemma2": ["sliding_window", "query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping",
               "hidden_activation", "layer_types"],
    "gemma3": ["sliding_window", "query_pre_attn_scalar", "hidden_activation", "layer_types"],
    "phi3": ["partial_rotary_factor", "sliding_window"],
}
RUN_AFTER_CONVERT = {"qwen3moe"}
PROMPTS = ["The capital of France is", "hello world"]
NEW_TOKENS = 8


def expect_ftcore_runs(ftcore, out_dir, model, tok, label):
    """ftcore loads the folder it converted; its greedy text equals transformers' from that folder."""
    for prompt in PROMPTS:
        ids = tok(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=NEW_TOKENS,
                                 pad_token_id=model.generation_config.pad_token_id)
        # A random model emits byte tokens that may end inside a UTF-8 character: decode shows that
        # incomplete tail as U+FFFD, ftcore's streamed detokenizer holds it back (nothing follows).
        expected = tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True).rstrip("\ufffd")
        r = subprocess.run([ftcore, "generate", "--model", out_dir, "--dtype", "fp32", "--prompt", prompt,
                            "--max-new-tokens", str(NEW_TOKENS)], capture_output=True, text=True)
        got = r.stdout[:-1] if r.stdout.endswith("\n") else r.stdout  # the command ends with a newline
        assert r.returncode == 0, f"{label}: ftcore generate failed on the converted folder: {r.stderr}"
        assert got == expected and got, f"{label}: ftcore generated {got!r}, transformers {expected!r} for {prompt!r}"
    print(f"{label}: ftcore loads the converted folder; greedy text on {len(PROMPTS)} prompts equals transformers'")


def compare_tokenizers(folder, name, out_dir, label, texts, same_class):
    ref = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    ours = AutoTokenizer.from_pretrained(out_dir)
    if same_class:  # (a byte-level folder names GPT2Tokenizer, whatever class transformers gives the GGUF)
        assert type(ours) is type(ref), \
            f"{label}: the folder loads as {type(ours).__name__}, the GGUF as {type(ref).__name__}"
    for text in texts:
        for special in (True, False):
            a = ours(text, add_special_tokens=special).input_ids
            b = ref(text, add_special_tokens=special).input_ids
            assert a == b, f"{label}: token ids differ on {text!r} (special tokens {special}): {a} vs {b}"
            for skip in (False, True):
                da, db = ours.decode(a, skip_special_tokens=skip), ref.decode(b, skip_special_tokens=skip)
                assert da == db, f"{label}: decoding {a} differs (skip special {skip}): {da!r} vs {db!r}"
    return f"the tokenizer ({type(ours).__name__}, {len(texts)} texts)"


def compare(ftcore, gguf_path, out_dir, label, arch="llama", texts=CORPUS, byte_level=True):
    subprocess.run([ftcore, "convert", gguf_path, out_dir], check=True)
    folder, name = os.path.dirname(gguf_path), os.path.basename(gguf_path)
    ref = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    ours = AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32)
    assert type(ref) is type(ours), f"{label}: transformers made {type(ref).__name__} from the GGUF, {type(ours).__name__} from ours"
    ref_sd, our_sd = ref.state_dict(), ours.state_dict()
    assert set(ref_sd) == set(our_sd), f"{label}: parameter names differ: {set(ref_sd) ^ set(our_sd)}"
    bad = [k for k in ref_sd if not torch.equal(ref_sd[k], our_sd[k])]
    assert not bad, f"{label}: {len(bad)} tensors differ from transformers' GGUF loading, e.g. {bad[:3]}"
    ref_cfg = AutoConfig.from_pretrained(folder, gguf_file=name)
    our_cfg = AutoConfig.from_pretrained(out_dir)
    keys = COMMON_KEYS + EXTRA_KEYS.get(arch, [])
    for key in keys:
        assert getattr(ref_cfg, key, None) == getattr(our_cfg, key, None), \
            f"{label}: config {key}: {getattr(ref_cfg, key, None)} vs {getattr(our_cfg, key, None)}"
    checked = f"{len(keys)} config fields and " + compare_tokenizers(folder, name, out_dir, label, texts,
                                                                     same_class=not byte_level)
    if byte_level:  # byte-level BPE gives every text back exactly
        our_tok = AutoTokenizer.from_pretrained(out_dir)
        for text in texts:
            assert our_tok.decode(our_tok(text, add_special_tokens=False).input_ids) == text, \
                f"{label}: decode does not round-trip {text!r}"
    if arch in RUN_AFTER_CONVERT:
        expect_ftcore_runs(ftcore, out_dir, ours.eval(), AutoTokenizer.from_pretrained(out_dir), label)
    print(f"{label}: {type(ours).__name__}, {len(our_sd)} tensors bit-identical to transformers' GGUF loading; "
          f"{checked} agree")


def expect_refused(ftcore, gguf_path, out_dir, label, needle):
    r = subprocess.run([ftcore, "convert", gguf_path, out_dir], capture_output=True, text=True)
    assert r.returncode != 0, f"{label}: ftcore convert accepted it"
    assert needle in r.stderr, f"{label}: the error does not say {needle!r}: {r.stderr}"
    assert not os.path.exists(out_dir), f"{label}: a refused conversion left {out_dir}"
    print(f"{label}: refused ({r.stderr.strip().splitlines()[-1]})")


def write_olmo2(path):
    w = GGUFWriter(path, arch="olmo2")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ftcore = sys.argv[1]
    samples, _ = build_corpus()
    texts = CORPUS + samples
    with tempfile.TemporaryDirectory() as tmp:
        cases = [(f"tiny {arch}", arch, TINY[arch]) for arch in TINY]
        cases.append(("tiny llama (SentencePiece)", "llama", LLAMA_SENTENCEPIECE))
        for label, arch, spec in cases:
            tiny = os.path.join(tmp, label.replace(" ", "-").replace("(", "").replace(")", "") + ".gguf")
            write_tiny_gguf(tiny, arch, spec=spec, samples=samples)
            sentencepiece = "sentencepiece" in spec
            compare(ftcore, tiny, tiny[:-len(".gguf")] + "-hf", label, arch,
                    texts=texts if sentencepiece else CORPUS, byte_level=not sentencepiece)
        mixtral = os.path.join(tmp, "mixtral.gguf")
        write_tiny_gguf(mixtral, "llama", mixtral_experts=True)
        expect_refused(ftcore, mixtral, os.path.join(tmp, "mixtral-hf"), "llama with experts", "mixture-of-experts")
        olmo2 = os.path.join(tmp, "olmo2.gguf")
        write_olmo2(olmo2)
        expect_refused(ftcore, olmo2, os.path.join(tmp, "olmo2-hf"), "olmo2",
                       "architecture 'olmo2' is not supported by ftcore convert (llama, qwen2, qwen3")
        for spoil, needle in [("tokenizer model", "tokenizer.ggml.model 'bert' is not supported"),
                              ("scores", "tokenizer.ggml.scores is missing"),
                              ("token type", "tokenizer.ggml.token_type[300] is 9, not a llama.cpp token type")]:
            bad = os.path.join(tmp, spoil.replace(" ", "-") + ".gguf")
            write_tiny_gguf(bad, "phi3", samples=samples, spoil=spoil)
            expect_refused(ftcore, bad, os.path.join(tmp, "bad-hf"), f"phi3 with a bad {spoil}", f"{bad}: {needle}")
        default = sys.argv[2] if len(sys.argv) > 2 else ""
        if default and os.path.exists(default):
            compare(ftcore, default, os.path.join(tmp, "default-hf"), "default model")
        else:
            print(f"SKIPPED the default-model comparison: {default or '(no path)'} is not present "
                  f"(third_party/setup_defaults.sh fetches it)")

if __name__ == "__main__":
    main()
