"""Reference side of tokenizer_test: HF `tokenizers` (and transformers for
chat templates) on the corpus of make_tokenizer_corpus.py.

Trains small BPE tokenizers at test time, one per family ftcore supports:
  gpt2        ByteLevel (prefix space, GPT-2 regex), legacy "a b" merges,
              a single_word / lstrip / rstrip added token
  llama3      Split (Llama 3's regex) + ByteLevel, ignore_merges, BOS template
  qwen2       NFC + Split (Qwen2's regex) + ByteLevel, chatml specials,
              a normalized non-special added token
  llama2      Prepend + Replace normalizers (legacy Llama-2), byte_fallback,
              fuse_unk, Replace/ByteFallback/Fuse/Strip decoders, BOS template
  metaspace   Metaspace (prepend "first", split), byte_fallback, an
              lstrip/rstrip special token, Metaspace decoder
  unk         Digits + Metaspace ("always"), Replace normalizer, unk fused,
              end_of_word_suffix, Roberta post-processor
  splits      Split with every behavior (and invert), continuing_subword_prefix
plus four GGUF files holding a SentencePiece vocabulary (sentencepiece_gguf.py)
for a llama (with merges derived from scores, and with merges listed), a
gemma3 and a phi3, whose reference is transformers' own GGUF
tokenizer load (ftcore reads them through its GGUF -> tokenizer.json
conversion); and writes, for each (and for the default model's tokenizer
when its folder is given), what HF gives on every sample: ids without and with special
tokens, decode with and without skipping special tokens, and the decoding of
random id sequences. Chat renders come from apply_chat_template (those of
Qwen3, SmolLM3, Gemma and Phi from chat_template_reference.py).

usage: tokenizer_reference.py OUT_DIR [--default-model DIR]
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tokenizer_corpus import build_corpus  # noqa: E402
from chat_template_reference import chat_family_cases  # noqa: E402
from sentencepiece_gguf import write_sentencepiece_tokenizer  # noqa: E402

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers  # noqa: E402
from tokenizers import processors, trainers  # noqa: E402

LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# Chat templates as their models publish them (tokenizer_config.json).
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>'"
          " + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
QWEN2_CHATML = ("{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
                "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
                "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
                "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
LLAMA2_CHAT = ("{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
               "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
               "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
               "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
               "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
               "{% if loop.index0 == 0 and system_message != false %}"
               "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
               "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
               "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
               "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}")
LLAMA3_CHAT = ("{% set loop_messages = messages %}{% for message in loop_messages %}"
               "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
               "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
               "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
               "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")

BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]


def train(tok, samples, vocab_size, special_tokens=(), **trainer_args):
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(special_tokens), show_progress=False,
                                  **trainer_args)
    tok.train_from_iterator(samples, trainer)
    return json.loads(tok.to_str())


def with_byte_tokens(spec):
    """Puts <0x00>..<0xFF> into the model's vocabulary (not the added tokens), as Llama-2's has them."""
    vocab = spec["model"]["vocab"]
    for t in BYTE_TOKENS:
        if t not in vocab:
            vocab[t] = len(vocab)
    return spec


def finish(spec, added=()):
    tok = Tokenizer.from_str(json.dumps(spec))
    for token in added:
        tok.add_tokens([token]) if not token.special else tok.add_special_tokens([token])
    return tok


def build_gpt2(samples):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    spec = train(tok, samples, 2500, ["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    spec["model"]["merges"] = [" ".join(m) for m in spec["model"]["merges"]]  # the legacy "a b" form
    return finish(spec, [AddedToken("<tool>", single_word=True, lstrip=True, rstrip=True, normalized=False)]), {
        "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "chat_template": CHATML}


def build_llama3(samples):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_SPLIT), "isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    spec = train(tok, samples, 3000, specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    spec["model"]["ignore_merges"] = True
    spec["post_processor"] = json.loads(processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", 0)]),
    ]).__getstate__())
    return finish(spec), {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "chat_template": LLAMA3_CHAT}


def build_qwen2(samples):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2_SPLIT), "isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    spec = train(tok, samples, 2500, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                 initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    return finish(spec, [AddedToken("<think>", normalized=True), AddedToken("</think>", normalized=True)]), {
        "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "chat_template": QWEN2_CHATML}


def build_llama2(samples):
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    spec = train(tok, samples, 3000, ["<unk>", "<s>", "</s>"], limit_alphabet=120)
    spec = with_byte_tokens(spec)
    spec["model"].update(unk_token="<unk>", fuse_unk=True, byte_fallback=True)
    spec["post_processor"] = json.loads(processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", 1)]).__getstate__())
    return finish(spec, [AddedToken("[MASK]", normalized=True)]), {
        "bos_token": "<s>", "eos_token": "</s>", "chat_template": LLAMA2_CHAT}


def build_metaspace(samples):
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    tok.decoder = decoders.Sequence([decoders.ByteFallback(),
                                     decoders.Metaspace(replacement="▁", prepend_scheme="first"), decoders.Fuse()])
    spec = train(tok, samples, 2500, ["<unk>", "<s>", "</s>"], limit_alphabet=100)
    spec = with_byte_tokens(spec)
    spec["model"].update(unk_token="<unk>", byte_fallback=True)
    user = AddedToken("<|user|>", special=True, lstrip=True, rstrip=True, normalized=False)
    return finish(spec, [user, AddedToken("<s>", special=True, normalized=False)]), {
        "bos_token": "<s>", "eos_token": "</s>"}


def build_unk(samples):
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.Replace("''", '"')
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=False),
                                                 pre_tokenizers.Metaspace(prepend_scheme="always", split=True)])
    tok.decoder = decoders.Sequence([decoders.Replace("</w>", ""), decoders.Metaspace(prepend_scheme="always"),
                                     decoders.Fuse()])
    spec = train(tok, samples, 2000, ["<unk>", "<s>", "</s>"], limit_alphabet=60, end_of_word_suffix="</w>")
    spec["model"].update(unk_token="<unk>", fuse_unk=True)
    spec["post_processor"] = json.loads(processors.RobertaProcessing(("</s>", 2), ("<s>", 1)).__getstate__())
    return finish(spec), {"bos_token": "<s>", "eos_token": "</s>"}


def build_splits(samples):
    tok = Tokenizer(models.BPE(continuing_subword_prefix="##"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\s+"), "removed"),
        pre_tokenizers.Split("-", "merged_with_previous"),
        pre_tokenizers.Split(Regex(r"[.,;:]"), "merged_with_next"),
        pre_tokenizers.Split(Regex(r"\p{Lu}"), "contiguous"),
        pre_tokenizers.Split(Regex(r"[0-9]+|x*"), "isolated", invert=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    spec = train(tok, samples, 2000, ["[UNK]"], continuing_subword_prefix="##",
                 initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    spec["model"]["continuing_subword_prefix"] = "##"
    return finish(spec), {}


BUILDERS = {"gpt2": build_gpt2, "llama3": build_llama3, "qwen2": build_qwen2, "llama2": build_llama2,
            "metaspace": build_metaspace, "unk": build_unk, "splits": build_splits}


# GGUF SentencePiece vocabularies: name -> architecture, and the pad token, add_bos/add_eos flags, merges listed.
GGUF_SENTENCEPIECE = {"llama": ("llama", {}), "gemma3": ("gemma3", {"pad": "<pad>"}),
                      "phi3": ("phi3", {"pad": "<|im_end|>", "add_bos": False, "add_eos": True}),
                      "llama-merges": ("llama", {"merges": True})}


def gguf_sentencepiece_tokenizer(folder, name, training):
    """The GGUF at folder/tokenizer.gguf, and the tokenizer transformers builds from it."""
    import numpy as np
    from gguf import GGUFWriter
    from transformers import AutoTokenizer
    arch, options = GGUF_SENTENCEPIECE[name]
    w = GGUFWriter(os.path.join(folder, "tokenizer.gguf"), arch=arch)
    w.add_block_count(1)
    write_sentencepiece_tokenizer(w, training, **options)
    w.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return AutoTokenizer.from_pretrained(folder, gguf_file="tokenizer.gguf").backend_tokenizer


def expectations(tok, samples, rng):
    out = {"ids": [], "ids_special": [], "decoded": [], "decoded_skip": [], "random_ids": [], "random_decoded": [],
           "random_decoded_skip": []}
    for s in samples:
        ids = tok.encode(s, add_special_tokens=False).ids
        out["ids"].append(ids)
        out["ids_special"].append(tok.encode(s, add_special_tokens=True).ids)
        out["decoded"].append(tok.decode(ids, skip_special_tokens=False))
        out["decoded_skip"].append(tok.decode(ids, skip_special_tokens=True))
    size = tok.get_vocab_size(with_added_tokens=True)
    for _ in range(300):
        ids = [rng.randrange(size + 2) for _ in range(rng.randint(1, 12))]  # +2: ids HF does not know
        out["random_ids"].append(ids)
        out["random_decoded"].append(tok.decode(ids, skip_special_tokens=False))
        out["random_decoded_skip"].append(tok.decode(ids, skip_special_tokens=True))
    out["vocab_size"] = size
    out["specials"] = sorted(t.content for t in tok.get_added_tokens_decoder().values() if t.special)
    return out


CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "2+2?"},
     {"role": "assistant", "content": " 4 "}],
    [{"role": "user", "content": "  Write a haiku.\n"}, {"role": "assistant", "content": "Leaves fall\nslowly.\n"},
     {"role": "user", "content": "Another, in French é"}, {"role": "assistant", "content": "Feuilles\u3000qui tombent"}],
    [{"role": "system", "content": ""}, {"role": "user", "content": "Empty system?"}],
]


def chat_cases(out_dir, folders):
    from transformers import PreTrainedTokenizerFast
    cases = []
    plans = [("gpt2", CHATML, "chatml"), ("qwen2", QWEN2_CHATML, "chatml"), ("llama2", LLAMA2_CHAT, "llama-2"),
             ("llama3", LLAMA3_CHAT, "llama-3")]
    if "default" in folders:
        default_config = json.load(open(os.path.join(folders["default"], "tokenizer_config.json")))
        plans.append(("default", default_config["chat_template"], "chatml"))
    for name, template, kind in plans:
        config = json.load(open(os.path.join(folders[name], "tokenizer_config.json")))
        hf = PreTrainedTokenizerFast(tokenizer_file=os.path.join(folders[name], "tokenizer.json"),
                                     bos_token=config.get("bos_token"), eos_token=config.get("eos_token"))
        for messages in CONVERSATIONS:
            for generation_prompt in (False, True):
                text = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt,
                                              chat_template=template)
                cases.append({"tokenizer": name, "template": template, "kind": kind, "messages": messages,
                              "add_generation_prompt": generation_prompt, "expected": text})
    return cases


def main():
    out_dir = sys.argv[1]
    default_model = sys.argv[sys.argv.index("--default-model") + 1] if "--default-model" in sys.argv else None
    samples, sources = build_corpus()
    training = [s for s in samples if s]  # the trainers skip nothing, but empty lines teach nothing
    rng = random.Random(7)
    manifest = {"tokenizers": [], "corpus": {"samples": len(samples),
                                             "lines": sum(s.count("\n") + 1 for s in samples), "sources": sources}}
    with open(os.path.join(out_dir, "corpus.json"), "w", encoding="utf-8") as f:
        json.dump({"samples": samples}, f, ensure_ascii=False)
    folders = {}
    for name, build in BUILDERS.items():
        folder = os.path.join(out_dir, name)
        os.makedirs(folder, exist_ok=True)
        tok, config = build(training)
        tok.save(os.path.join(folder, "tokenizer.json"))
        with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f, ensure_ascii=False)
        folders[name] = folder
    if default_model and os.path.exists(os.path.join(default_model, "tokenizer.json")):
        folders["default"] = default_model
    for name, folder in folders.items():
        tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        with open(os.path.join(out_dir, name + ".expected.json"), "w", encoding="utf-8") as f:
            json.dump(expectations(tok, samples, rng), f, ensure_ascii=False)
        manifest["tokenizers"].append(name)
    for gguf_name in GGUF_SENTENCEPIECE:
        name = "gguf-" + gguf_name
        folder = os.path.join(out_dir, name)
        os.makedirs(folder, exist_ok=True)
        tok = gguf_sentencepiece_tokenizer(folder, gguf_name, training)
        with open(os.path.join(out_dir, name + ".expected.json"), "w", encoding="utf-8") as f:
            json.dump(expectations(tok, samples, rng), f, ensure_ascii=False)
        manifest["tokenizers"].append(name)
    with open(os.path.join(out_dir, "chat.json"), "w", encoding="utf-8") as f:
        json.dump(chat_cases(out_dir, folders), f, ensure_ascii=False)
    with open(os.path.join(out_dir, "chat_families.json"), "w", encoding="utf-8") as f:
        json.dump(chat_family_cases(out_dir, training), f, ensure_ascii=False)
    with open(os.path.join(out_dir, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, ensure_ascii=False)
    print(json.dumps(manifest["corpus"]))


if __name__ == "__main__":
    main()
