"""The default dataset: short-answer questions built from the quiz files of
the Debian package `bsdgames` (/usr/share/games/bsdgames/quiz), written as
alpaca JSONL (instruction, input, output) with a held-out split.

Quiz syntax (quiz(6)): fields separated by ':'; `a|b` alternatives; `{x}`
optional text; `[a|b]` alternatives inside a word; a trailing backslash
continues the line. The canonical answer takes the first alternative and keeps
optional text ("{G{eorge} }Washington" -> "George Washington").

Every row goes to the held-out file when a hash of its question falls in the
test fraction, so the split is the same on every machine.

usage: build_quiz_dataset.py QUIZ_DIR OUT_DIR [--test-fraction 0.1]
"""
import argparse
import hashlib
import json
import os
import sys

# quiz file -> (question template, answer field index); the question field is 0.
TEMPLATES = {
    "africa": ("What is the capital of {q}?", 1),
    "america": ("What is the capital of {q}?", 1),
    "asia": ("What is the capital of {q}?", 1),
    "europe": ("What is the capital of {q}?", 1),
    "province": ("What is the capital of the Canadian province {q}?", 1),
    "state": ("What is the capital of the US state {q}?", 1),
    "midearth": ("In Middle-earth, what is the capital of {q}?", 1),
    "elements": ("Which chemical element has the symbol {q}?", 3),
    "collectives": ("What is the collective noun for a group of {q}?", 1),
    "babies": ("A {q} is the young of which animal?", 1),
    "sexes": ("What is the female counterpart of {q}?", 1),
    "posneg": ("What is the opposite of '{q}'?", 1),
    "flowers": ("In the language of flowers, what does the {q} mean?", 1),
    "inca": ("Which Inca emperor succeeded {q}?", 1),
    "morse": ("What is the Morse code for {q}?", 1),
    "latin": ("Translate the Latin word '{q}' into English.", 1),
    "mult": ("What is {q}?", 1),
    "murders": ("Who killed {q}?", 1),
    "pres": ("In which years was {q} President of the United States?", 1),
    "locomotive": ("What is the name of the {q} locomotive wheel arrangement?", 1),
}
EXTRA = {  # more questions from other fields of the same files
    "elements": [("What is the chemical symbol of {q}?", 3, 0), ("What is the atomic number of {q}?", 3, 1)],
    "state": [("What is the postal abbreviation of the US state {q}?", 0, 2)],
}


def first_alternative(text, start=0, stop_chars="|"):
    """Expands quiz syntax from `start`; returns (expanded text, index after it)."""
    out, i = [], start
    while i < len(text):
        c = text[i]
        if c in stop_chars:
            break
        if c == "{":
            inner, i = first_alternative(text, i + 1, "}|")
            while i < len(text) and text[i] == "|":  # skip further alternatives inside {}
                _, i = first_alternative(text, i + 1, "}|")
            out.append(inner)
            i += 1  # past '}'
        elif c == "[":
            inner, i = first_alternative(text, i + 1, "]|")
            while i < len(text) and text[i] == "|":
                _, i = first_alternative(text, i + 1, "]|")
            out.append(inner)
            i += 1  # past ']'
        elif c == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out), i


def canonical(field):
    value, _ = first_alternative(field)
    return " ".join(value.split())


def read_quiz(path):
    lines, pending = [], ""
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.endswith("\\"):
                pending += line[:-1]
                continue
            lines.append(pending + line)
            pending = ""
    return [l.split(":") for l in lines if l.strip()]


def rows_for(name, path):
    fields = read_quiz(path)
    specs = [(TEMPLATES[name][0], 0, TEMPLATES[name][1])] + EXTRA.get(name, [])
    for template, q_index, a_index in specs:
        for f in fields:
            if max(q_index, a_index) >= len(f):
                continue
            q, a = canonical(f[q_index]), canonical(f[a_index])
            if q and a:
                yield {"instruction": template.format(q=q), "input": "", "output": a, "source": name}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("quiz_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--test-fraction", type=float, default=0.1)
    args = parser.parse_args()
    if not os.path.isdir(args.quiz_dir):
        sys.exit(f"{args.quiz_dir} not found: install the Debian package bsdgames")
    rows = []
    for name in sorted(TEMPLATES):
        path = os.path.join(args.quiz_dir, name)
        if os.path.exists(path):
            rows.extend(rows_for(name, path))
    seen, unique = set(), []
    for r in rows:
        if r["instruction"] not in seen:
            seen.add(r["instruction"])
            unique.append(r)
    os.makedirs(args.out_dir, exist_ok=True)
    split = {"train": [], "test": []}
    for r in unique:
        h = int(hashlib.sha256(r["instruction"].encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
        split["test" if h < args.test_fraction else "train"].append(r)
    for part, items in split.items():
        tmp = os.path.join(args.out_dir, f"{part}.jsonl.part")
        with open(tmp, "w", encoding="utf-8") as f:
            for r in items:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        os.replace(tmp, os.path.join(args.out_dir, f"{part}.jsonl"))
    print(f"quiz dataset: {len(split['train'])} train, {len(split['test'])} held-out rows -> {args.out_dir}")


if __name__ == "__main__":
    main()
