"""Tokenizer throughput, ftcore vs HF tokenizers, side by side in one run,
single-threaded, on the same corpus (tests/unit/make_tokenizer_corpus.py,
scaled up) and the same tokenizers: the default model's (when present) and
tokenizers trained like tokenizer_test's (GPT-2, Llama-3, Qwen2, Llama-2
styles). Loading is not timed; each side's fastest of ROUNDS passes counts
(word caches warm on both sides). HF is measured two ways: encode_batch with
its thread pool off, and a plain Python loop over encode.

usage: python benchmarks/tokenizer_bench.py [--build-dir build] [--scale 10] [--rounds 3]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ["TOKENIZERS_PARALLELISM"] = "false"  # encode_batch on one thread
os.environ["RAYON_NUM_THREADS"] = "1"

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "unit"))
from make_tokenizer_corpus import build_corpus  # noqa: E402
from tokenizer_reference import BUILDERS  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402


def best_of(rounds, run):
    best, result = float("inf"), None
    for _ in range(rounds):
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    return best, result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    driver = os.path.join(args.build_dir, "bin", "tokenizer_bench")
    if not os.path.exists(driver):
        sys.exit(f"{driver} is missing: cmake --build {args.build_dir} --target tokenizer_bench")

    samples, _ = build_corpus(scale=args.scale)
    training, _ = build_corpus()
    with tempfile.TemporaryDirectory() as tmp:
        corpus_path = os.path.join(tmp, "corpus.json")
        with open(corpus_path, "w", encoding="utf-8") as f:
            json.dump({"samples": samples}, f, ensure_ascii=False)
        folders = {}
        default = os.path.join(ROOT, "third_party", "models", "SmolLM2-135M-Instruct")
        if os.path.exists(os.path.join(default, "tokenizer.json")):
            folders["SmolLM2 (default model)"] = default
        for name in ("gpt2", "llama3", "qwen2", "llama2"):
            folder = os.path.join(tmp, name)
            os.makedirs(folder)
            tok, _ = BUILDERS[name]([s for s in training if s])
            tok.save(os.path.join(folder, "tokenizer.json"))
            folders[name] = folder

        n_bytes = sum(len(s.encode()) for s in samples)
        print(f"corpus: {len(samples)} samples, {n_bytes / 1e6:.2f} MB; best of {args.rounds} rounds; one thread")
        print(f"{'tokenizer':<24}{'tokens':>9}{'HF batch tok/s':>16}{'HF encode tok/s':>17}{'ftcore tok/s':>14}"
              f"{'vs batch':>10}{'vs encode':>11}")
        for name, folder in folders.items():
            hf = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
            batch_s, batch = best_of(args.rounds, lambda: hf.encode_batch(samples, add_special_tokens=False))
            loop_s, _ = best_of(args.rounds, lambda: [hf.encode(s, add_special_tokens=False) for s in samples])
            tokens = sum(len(e.ids) for e in batch)
            out = subprocess.run([driver, folder, corpus_path, str(args.rounds)], check=True, capture_output=True,
                                 text=True).stdout
            ours = json.loads(out)
            if ours["tokens"] != tokens:
                print(f"  warning: {name}: ftcore made {ours['tokens']} tokens, HF {tokens}")
            rate = tokens / ours["seconds"]
            print(f"{name:<24}{tokens:>9}{tokens / batch_s:>16,.0f}{tokens / loop_s:>17,.0f}{rate:>14,.0f}"
                  f"{rate / (tokens / batch_s):>9.2f}x{rate / (tokens / loop_s):>10.2f}x")


if __name__ == "__main__":
    main()
