"""Chat templates of Qwen3, SmolLM3, Gemma 2/3, Phi-3/3.5, Phi-4 and
Phi-4-mini under transformers' apply_chat_template, for tokenizer_test.

The template texts are in chat_templates/*.jinja (see the README there for
the models they come from). One byte-level BPE tokenizer, trained here, holds
every family's special tokens; each family gets a folder with its own
tokenizer_config.json (bos/eos). For each template and conversation (system
or not, one or several turns, replies with reasoning, thinking on and off,
with and without the generation prompt) this writes HF's text and token ids,
what HF says must be trained on: the assistant-token mask where the template
marks replies with {% generation %}, otherwise every reply as the template
rendered it, from after its header through its end-of-turn token (found in
HF's text), and whether HF refused the conversation.
"""
import datetime
import json
import os
import re

from tokenizers import AddedToken, Regex, Tokenizer, decoders, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|im_sep|>", "<bos>", "<eos>", "<start_of_turn>",
            "<end_of_turn>", "<s>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
# Folder -> tokenizer_config.json; the template files -> (ftcore's name, folder, reply pattern in HF's text).
FOLDERS = {"chat-im": {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
           "chat-gemma": {"bos_token": "<bos>", "eos_token": "<eos>"},
           "chat-phi": {"bos_token": "<s>", "eos_token": "<|endoftext|>"}}
TEMPLATES = {
    "qwen3": ("qwen3", "chat-im", r"<\|im_start\|>assistant\n(.*?<\|im_end\|>)"),
    "smollm3": ("smollm3", "chat-im", None),
    "gemma2": ("gemma-2", "chat-gemma", r"<start_of_turn>model\n(.*?<end_of_turn>)"),
    "gemma3": ("gemma-3", "chat-gemma", r"<start_of_turn>model\n(.*?<end_of_turn>)"),
    "phi3": ("phi-3", "chat-phi", r"<\|assistant\|>\n(.*?<\|end\|>)"),
    "phi3_5": ("phi-3.5", "chat-phi", r"<\|assistant\|>\n(.*?<\|end\|>)"),
    "phi4": ("phi-4", "chat-im", r"<\|im_start\|>assistant<\|im_sep\|>(.*?<\|im_end\|>)"),
    "phi4_mini": ("phi-4-mini", "chat-phi", r"<\|assistant\|>(.*?<\|end\|>)"),
}
TODAY = "07 March 2025"  # SmolLM3's strftime_now("%d %B %Y"), fixed so the expectations do not change with the date


class FixedDatetime(datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return cls(2025, 3, 7, 12, 0, 0)


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


def system(text):
    return {"role": "system", "content": text}


CONVERSATIONS = [
    [user("Hello!")],
    [system("You are terse."), user("2+2?"), assistant(" 4 ")],
    [user("  Write a haiku.\n"), assistant("Leaves fall\nslowly.\n"), user("Another, in French é"),
     assistant("Feuilles\u3000qui tombent")],
    [system(""), user("Empty system?")],
    # Reasoning written in the reply (Qwen3 keeps it only after the last user message).
    [user("What is 6*7?"), assistant("<think>\nSix sevens.\n</think>\n\n42")],
    [user("a?"), assistant("<think>first</think>A"), user("b?"), assistant("\n<think>\n\nsecond\n</think>B\n")],
    [user("c?"), assistant("<think>x</think>C"), user("d?")],
    # SmolLM3's flags in the system message.
    [system("Be brief. /no_think"), user("Why?"), assistant("Because.")],
    [system("Think hard /think  "), user("How?"), assistant("\nLike this.")],
    [system("Only this. /system_override"), user("Ok?"), assistant("Ok.")],
    # Roles out of order: the templates that require alternation refuse it.
    [user("one"), user("two")],
]


def build_tokenizer(samples):
    tok = Tokenizer(__import__("tokenizers").models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(SPLIT), "isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=2500, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(samples, trainer)
    tok.add_tokens([AddedToken("<think>", normalized=True), AddedToken("</think>", normalized=True)])
    return tok


def template_text(file):
    with open(os.path.join(HERE, "chat_templates", file + ".jinja"), encoding="utf-8") as f:
        return f.read()


def render(hf, messages, template, generation_prompt, thinking, with_mask):
    kwargs = {}
    if thinking is not None:
        kwargs["enable_thinking"] = thinking
    text = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt,
                                  chat_template=template, **kwargs)
    tokens = hf.apply_chat_template(messages, tokenize=True, return_dict=True, add_generation_prompt=generation_prompt,
                                    chat_template=template, return_assistant_tokens_mask=with_mask, **kwargs)
    return text, tokens


def chat_family_cases(out_dir, samples):
    from transformers import PreTrainedTokenizerFast
    from transformers.utils import chat_template_utils
    chat_template_utils.datetime = FixedDatetime  # what its strftime_now reads the date from
    tok = build_tokenizer(samples)
    hfs = {}
    for folder, config in FOLDERS.items():
        path = os.path.join(out_dir, folder)
        os.makedirs(path, exist_ok=True)
        tok.save(os.path.join(path, "tokenizer.json"))
        with open(os.path.join(path, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f)
        hfs[folder] = PreTrainedTokenizerFast(tokenizer_file=os.path.join(path, "tokenizer.json"),
                                              bos_token=config["bos_token"], eos_token=config["eos_token"])
    cases = []
    for file, (kind, folder, reply_pattern) in TEMPLATES.items():
        template = template_text(file)
        thinking_options = (None, False) if kind in ("qwen3", "smollm3") else (None,)
        for messages in CONVERSATIONS:
            for generation_prompt in (False, True):
                for thinking in thinking_options:
                    case = {"tokenizer": folder, "file": file, "template": template, "kind": kind, "messages": messages,
                            "add_generation_prompt": generation_prompt, "today": TODAY}
                    if thinking is not None:
                        case["enable_thinking"] = thinking
                    try:
                        text, tokens = render(hfs[folder], messages, template, generation_prompt, thinking,
                                              reply_pattern is None)
                    except Exception as e:  # the template's raise_exception
                        cases.append({**case, "refused": str(e)})
                        continue
                    case.update(expected=text, ids=tokens["input_ids"])
                    if reply_pattern is None:
                        case["assistant_mask"] = tokens["assistant_masks"]
                    else:
                        case["replies"] = re.findall(reply_pattern, text, flags=re.S)
                    cases.append(case)
    return cases
