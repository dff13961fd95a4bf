"""The text corpus of tokenizer_test and tokenizer_bench, built at test time
from files that installed Debian packages carry (licenses, copyright files,
man pages, C headers, the word list), plus generated lines for what those
lack: emoji, CJK, Cyrillic, Arabic and other scripts, combining marks,
Unicode whitespace runs, digits, contractions and special-token look-alikes.

Deterministic for a given machine (sorted file lists, fixed seed). Each
sample is one line, or a few consecutive lines joined with their newlines.

usage: make_tokenizer_corpus.py OUT.json [--min-lines N] [--scale K]
"""
import glob
import gzip
import json
import os
import random
import sys

SEED = 20240611


def read_text(path):
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            return f.read(200_000).decode("utf-8", errors="replace")
    except OSError:
        return ""


def lines_of(paths, limit, rng, keep_blank=False):
    """Up to `limit` lines from `paths`, taken in runs so code keeps its indentation."""
    out = []
    for path in paths:
        lines = read_text(path).split("\n")
        if not lines:
            continue
        start = rng.randrange(max(1, len(lines) - 40))
        for line in lines[start:start + 40]:
            if line.strip() or keep_blank:
                out.append(line.rstrip("\n"))
        if len(out) >= limit:
            break
    return out[:limit]


def debian_lines(rng, scale=1):
    licenses = sorted(glob.glob("/usr/share/common-licenses/*"))
    copyrights = sorted(glob.glob("/usr/share/doc/*/copyright"))
    rng.shuffle(copyrights)
    man_pages = sorted(glob.glob("/usr/share/man/man1/*.gz")) + sorted(glob.glob("/usr/share/man/man3/*.gz"))
    rng.shuffle(man_pages)
    headers = sorted(glob.glob("/usr/include/*.h"))
    rng.shuffle(headers)
    games = sorted(glob.glob("/usr/share/games/bsdgames/*"))
    sources = {
        "licenses": lines_of(licenses, 500 * scale, rng),
        "copyright": lines_of(copyrights, 500 * scale, rng),
        "man": lines_of(man_pages, 500 * scale, rng),
        "headers": lines_of(headers, 600 * scale, rng, keep_blank=True),
        "games": lines_of([p for p in games if os.path.isfile(p)], 200 * scale, rng),
    }
    words_path = "/usr/share/dict/words"
    if os.path.exists(words_path):
        words = read_text(words_path).split("\n")
        words = [w for w in words if w]
        sources["dict"] = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 12))) for _ in range(300 * scale)]
    return sources


SCRIPTS = {
    "cjk": "我们的世界很大今天天气不错学习语言需要时间東京都渋谷区ひらがなカタカナ漢字한국어를배우고있습니다",
    "cyrillic": "Съешь же ещё этих мягких французских булок, да выпей чаю. Привет мир ЁЖИК",
    "arabic": "مرحبا بالعالم هذه جملة عربية للاختبار ١٢٣٤٥٦٧٨٩٠",
    "hebrew": "שלום עולם זהו משפט בעברית",
    "devanagari": "नमस्ते दुनिया यह हिंदी वाक्य है १२३",
    "thai": "สวัสดีชาวโลกภาษาไทยไม่มีช่องว่าง",
    "greek": "Γειά σου Κόσμε ΑΒΓΔ αβγδ ς",
    "latin": "Ça va? Déjà vu, naïve façade, Straße, Ærøskøbing, İstanbul, ǅ, ﬁ ligature",
}
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "🏳️‍🌈", "❤️", "🤖", "🎉", "✅", "🧪", "😂😂😂", "🙏🏿", "🐍", "🦀"]
SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\u00a0", "\u2003", "\u3000", "\u0085", "\u2028",
          "\u200b", "\ufeff", " \n ", "    \n"]
SPECIAL_LOOKALIKES = ["<|im_start|>user\nHello<|im_end|>\n", "<s>[INST] hi [/INST]", "</s>", "<|endoftext|>",
                      "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>", "<|im_sta",
                      "<|im_end|><|im_end|>", "x<s>y", "  <s>  ", "<tool>", " <tool> ", "a<tool>b", "<TOOL>",
                      "[MASK] text [MASK]", "<unk>", "<|user|>", " <|user|> hi", "hi<|user|>\n\nthere",
                      "\u3000<|user|>\u3000x", "<|user|><|user|>", "<s>Hello", "<s> Hello", "<|user|>Hello world",
                      "<think>reasoning</think>", "x<think> y </think>z", " [MASK] ", "é[MASK]é",
                      "▁▁already▁metaspace", "  double  spaces  "]
CONTRACTIONS = ["I'm", "you're", "DON'T", "she'S", "we'VE", "they'd", "it's", "'s", "ſ", "\u212a", "O'Neil's",
                "rock'n'roll", "''quoted''"]


def generated_lines(rng):
    out = []
    for name, text in SCRIPTS.items():
        chars = list(text)
        for _ in range(40):
            a = rng.randrange(len(chars))
            out.append("".join(chars[a:a + rng.randint(1, 40)]))
    for _ in range(150):
        parts = [rng.choice(EMOJI) if rng.random() < 0.5 else rng.choice(list(SCRIPTS.values()))[:rng.randint(1, 12)]
                 for _ in range(rng.randint(1, 6))]
        out.append(rng.choice([" ", "", "  "]).join(parts))
    for _ in range(200):
        parts = []
        for _ in range(rng.randint(1, 8)):
            r = rng.random()
            if r < 0.4:
                parts.append(rng.choice(SPACES))
            elif r < 0.7:
                parts.append(rng.choice(["word", "Hello", "x", "über", "ß", "!", "...", "--", "()", "42"]))
            else:
                parts.append(rng.choice(CONTRACTIONS))
        out.append("".join(parts))
    for _ in range(200):
        kind = rng.random()
        if kind < 0.3:
            out.append(str(rng.randrange(10 ** rng.randint(1, 25))))
        elif kind < 0.5:
            out.append(f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 8)}f}")
        elif kind < 0.7:
            out.append(f"{rng.randrange(10 ** 9):,} items at ${rng.randrange(10000) / 100} on 2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}")
        else:
            out.append("".join(rng.choice("0123456789 ٣٤५६①²¾Ⅻ.,+-") for _ in range(rng.randint(1, 30))))
    out += SPECIAL_LOOKALIKES * 3
    out += [" ".join(CONTRACTIONS), "e\u0301 cafe\u0301 A\u030a \u1e9b\u0323", "\x00\x01\x1f\x7f control",
            "tab\tseparated\tvalues", "trailing spaces   ", "   leading spaces", "", " ", "\n", "a" * 300,
            "ab" * 200 + " " + "😀" * 50, " " * 64, "\t" * 10 + "x",
            " " * 5000 + "x", "\n" * 300, "word " * 2000]
    return out


def build_corpus(min_lines=2000, scale=1):
    """Samples and per-source line counts; `scale` multiplies the Debian lines (benchmarks)."""
    rng = random.Random(SEED)
    sources = debian_lines(rng, scale)
    lines = [line for part in sources.values() for line in part] + generated_lines(rng)
    samples = list(lines)
    # Multi-line samples: runs of consecutive lines with their newlines.
    for _ in range(200 * scale):
        a = rng.randrange(len(lines))
        samples.append("\n".join(lines[a:a + rng.randint(2, 6)]))
    counts = {name: len(part) for name, part in sources.items()}
    counts["generated"] = len(lines) - sum(counts.values())
    counts["multi_line_samples"] = 200 * scale
    total_lines = sum(s.count("\n") + 1 for s in samples)
    if total_lines < min_lines:
        raise SystemExit(f"corpus has {total_lines} lines, fewer than {min_lines}: are the Debian docs installed?")
    return samples, counts


def main():
    out = sys.argv[1]
    min_lines = int(sys.argv[sys.argv.index("--min-lines") + 1]) if "--min-lines" in sys.argv else 2000
    scale = int(sys.argv[sys.argv.index("--scale") + 1]) if "--scale" in sys.argv else 1
    samples, counts = build_corpus(min_lines, scale)
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"samples": samples, "sources": counts}, f, ensure_ascii=False)
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
