"""A SentencePiece vocabulary (tokenizer.ggml.model "llama") written into a
GGUF as llama.cpp writes one, for the tests of `ftcore convert`
(tests/reference/convert_reference.py) and of the tokenizer on GGUF files
(tokenizer_reference.py): specials first, the 256 byte tokens <0xNN>, the
pieces of a BPE with byte fallback and Metaspace trained at test time with
HF tokenizers, then user-defined, control and unused tokens. Pieces score
-rank (SentencePiece's BPE scores), except Gemma's, which score at random:
transformers ranks Gemma's merges by file order. Gemma's vocabulary also
holds whitespace tokens spelled with spaces, as its GGUF files do.
"""
import functools
import json

import numpy as np
from gguf import TokenType
from tokenizers import Tokenizer, models, pre_tokenizers, trainers


@functools.lru_cache(maxsize=1)
def trained_bpe(samples):
    """A BPE with byte fallback and Metaspace trained on the corpus: its pieces by rank, and its merges."""
    trained = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>"))
    trained.pre_tokenizer = pre_tokenizers.Metaspace()
    trained.train_from_iterator(samples, trainers.BpeTrainer(vocab_size=600, limit_alphabet=150, show_progress=False))
    pieces = [t for t, _ in sorted(trained.get_vocab().items(), key=lambda kv: kv[1])]
    merges = [" ".join(m) if isinstance(m, list) else m for m in json.loads(trained.to_str())["model"]["merges"]]
    return pieces, merges


def sentencepiece_vocabulary(arch, samples):
    """Tokens, scores and types (see the module docstring)."""
    learned, _ = trained_bpe(tuple(samples))
    gemma = arch.startswith("gemma")
    if gemma:
        head = [("<pad>", TokenType.CONTROL), ("<eos>", TokenType.CONTROL), ("<bos>", TokenType.CONTROL),
                ("<unk>", TokenType.UNKNOWN), ("<mask>", TokenType.USER_DEFINED),
                ("<start_of_turn>", TokenType.CONTROL), ("<end_of_turn>", TokenType.CONTROL)]
    else:
        head = [("<unk>", TokenType.UNKNOWN), ("<s>", TokenType.CONTROL), ("</s>", TokenType.CONTROL)]
    vocab = head + [(f"<0x{b:02X}>", TokenType.BYTE) for b in range(256)]
    vocab += [(t, TokenType.NORMAL) for t in learned]
    vocab += [("<think>", TokenType.USER_DEFINED), ("</think>", TokenType.USER_DEFINED),
              ("<|im_start|>", TokenType.CONTROL), ("<|im_end|>", TokenType.CONTROL), ("<unused0>", TokenType.UNUSED)]
    if gemma:  # whitespace tokens spelled with spaces; " \n" respells to "▁▁" as "  " does (the later id wins)
        vocab += [("  ", TokenType.NORMAL), ("    ", TokenType.NORMAL), ("\t\t", TokenType.NORMAL),
                  (" \n", TokenType.NORMAL)]
    rng = np.random.default_rng(7)
    scores = [float(rng.standard_normal()) if gemma else (-float(i) if ty == TokenType.NORMAL else 0.0)
              for i, (_, ty) in enumerate(vocab)]
    return [t for t, _ in vocab], scores, [int(ty) for _, ty in vocab]




def write_sentencepiece_tokenizer(w, samples, pad=None, add_bos=None, add_eos=None, merges=False, spoil=None):
    """The vocabulary of w.arch into GGUFWriter `w`, with BOS/EOS/UNK ids, the
    pad token named (none when None), the add_bos/add_eos flags (absent when
    None) and, with `merges`, the trained BPE's merges (which transformers
    then takes instead of deriving them); `spoil` breaks it the way a file
    ftcore refuses is broken. Returns the vocabulary size."""
    tokens, scores, types = sentencepiece_vocabulary(w.arch, samples)
    if spoil == "token type":
        types[300] = 9
    w.add_tokenizer_model("bert" if spoil == "tokenizer model" else "llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    if spoil != "scores":
        w.add_token_scores(scores)
    w.add_token_types(types)
    if merges:
        w.add_token_merges(trained_bpe(tuple(samples))[1])
    ids = {t: i for i, t in enumerate(tokens)}
    gemma = w.arch.startswith("gemma")
    w.add_bos_token_id(ids["<bos>" if gemma else "<s>"])
    w.add_eos_token_id(ids["<eos>" if gemma else "</s>"])
    w.add_unk_token_id(ids["<unk>"])
    if pad is not None:
        w.add_pad_token_id(ids[pad])
    if add_bos is not None:
        w.add_add_bos_token(add_bos)
    if add_eos is not None:
        w.add_add_eos_token(add_eos)
    return len(tokens)
