"""Reference side of data_test: what the data pipeline must produce, computed
with HF `tokenizers` / transformers from the same rows.

  make-tokenizer DIR   trains a small byte-level BPE tokenizer (chatml special
                       tokens, eos <|im_end|>, a chatml chat template) and
                       writes DIR/tokenizer.json + tokenizer_config.json
  expect DIR ROWS FORMAT SEQUENCE_LEN TRAIN_ON_INPUTS [TEMPLATE]
                       prints, as JSON, the input_ids and labels of every row
                       of the JSONL file ROWS:
    alpaca      Stanford Alpaca's prompt (with / without input), masked, then
                the output and EOS as targets
    completion  the text field, all targets, then EOS
    template    the given {instruction}/{input} prompt, then output and EOS
    chat        the conversation rendered by transformers' apply_chat_template
                (checked equal to the concatenated segments); assistant content
                and its <|im_end|> are targets
  Each segment is tokenized on its own; labels are -100 where masked; rows are
  cut to SEQUENCE_LEN.
"""
import json
import os
import sys

from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers

ALPACA_INPUT = ("Below is an instruction that describes a task, paired with an input that provides further context. "
                "Write a response that appropriately completes the request.\n\n"
                "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n")
ALPACA_NO_INPUT = ("Below is an instruction that describes a task. Write a response that appropriately completes "
                   "the request.\n\n### Instruction:\n{instruction}\n\n### Response:\n")
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>'"
          " + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TEXT = [
    "What is the capital of France? Paris is the capital of France.",
    "Below is an instruction that describes a task. Write a response that appropriately completes the request.",
    "### Instruction: ### Input: ### Response: translate count answer question",
    "The quick brown fox jumps over the lazy dog 0123456789 times.",
] * 50


def make_tokenizer(folder):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TEXT, trainer)
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": "<|im_end|>", "bos_token": None, "pad_token": "<|endoftext|>",
                   "chat_template": CHATML, "tokenizer_class": "PreTrainedTokenizerFast"}, f)


def chat_segments(row):
    messages = row.get("messages")
    if messages is None:
        roles = {"human": "user", "gpt": "assistant", "system": "system"}
        messages = [{"role": roles[m["from"]], "content": m["value"]} for m in row["conversations"]]
    segments = []
    for m in messages:
        segments.append((f"<|im_start|>{m['role']}\n", False))
        segments.append((m["content"] + "<|im_end|>", m["role"] == "assistant"))
        segments.append(("\n", False))
    return messages, segments


def expect(folder, rows_path, fmt, sequence_len, train_on_inputs, template=None):
    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    eos = tok.token_to_id("<|im_end|>")
    from transformers import PreTrainedTokenizerFast
    hf = PreTrainedTokenizerFast(tokenizer_file=os.path.join(folder, "tokenizer.json"))
    hf.chat_template = CHATML
    out = []
    with open(rows_path) as f:
        for line in f:
            row = json.loads(line)
            if fmt == "completion":
                segments = [(row["text"], True)]
            elif fmt in ("alpaca", "template"):
                prompt = template if fmt == "template" else (ALPACA_INPUT if row.get("input") else ALPACA_NO_INPUT)
                prompt = prompt.replace("{instruction}", row["instruction"]).replace("{input}", row.get("input", ""))
                segments = [(prompt, False), (row["output"], True)]
            else:
                messages, segments = chat_segments(row)
                rendered = hf.apply_chat_template(messages, tokenize=False)
                assert rendered == "".join(s for s, _ in segments), (rendered, segments)
            ids, labels = [], []
            for k, (text, trainable) in enumerate(segments):
                piece = tok.encode(text, add_special_tokens=(k == 0)).ids
                ids += piece
                labels += piece if (trainable or train_on_inputs) else [-100] * len(piece)
            if fmt != "chat" and (not ids or ids[-1] != eos):
                ids.append(eos)
                labels.append(eos)
            out.append({"input_ids": ids[:sequence_len], "labels": labels[:sequence_len]})
    print(json.dumps(out))


def main():
    if sys.argv[1] == "make-tokenizer":
        make_tokenizer(sys.argv[2])
    else:
        expect(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6] == "1",
               sys.argv[7] if len(sys.argv) > 7 else None)


if __name__ == "__main__":
    main()
