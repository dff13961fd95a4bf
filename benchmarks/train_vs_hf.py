"""End-to-end training throughput and memory, ftcore vs HF Trainer + PEFT
(issue #4, Benchmarks), side by side in one run on the CPU.

For each mode (lora, full) the same recipe trains on both sides, each in its
own process so that each side's peak RSS is its own (os.wait4's rusage of
that child, ru_maxrss: the whole process, model load included):

- ftcore: `ftcore run` on a recipe written to a temporary folder (below).
- HF: this file again as `--hf-worker`: transformers' Trainer (+ PEFT's
  LoraConfig for lora) on the same model folder, fp32 weights.

The shared recipe: the default model (SmolLM2-135M-Instruct, fp32 weights),
the quiz data (third_party/data/quiz/train.jsonl, alpaca prompt, prompt tokens
masked, output + EOS trained, sequence_len 512, no validation split),
micro-batch 8, no accumulation, STEPS optimizer steps, `--precision` bf16
(autocast over fp32 weights, both sides) or fp32, AdamW (lr 2e-4 LoRA / 2e-5
full, weight decay 0.01, betas 0.9/0.999, eps 1e-8), grad clipping at 1.0,
cosine schedule with 5% linear warmup, LoRA r=8 alpha=16 dropout 0.05 on
q/k/v/o_proj, seed 42, logging every step, no eval, no checkpoints.
Both sides take the examples in file order (ftcore's `sequential` sampler;
a SequentialSampler in the Trainer), so step k trains the same 8 examples,
padded on the right to the longest of the 8 (no padding to sequence_len) on
both sides: the same tokens per step, and the step-1 losses are comparable
(LoRA B starts at zero, so step 1 is the base model's loss on both sides).
The HF side renders the alpaca template of core/src/data/prompt_formats.cpp
and tokenizes as core/src/data/tokenize_example.cpp does; the script checks
its totals (tokens and loss targets over the whole file) against
`ftcore data inspect` and stops if they differ.

Threads: FTCORE_NUM_THREADS=THREADS for ftcore, torch.set_num_threads(THREADS)
(and OMP_NUM_THREADS) for HF. OpenMP's wait policy: the environment as it is
(`--wait-policy untouched`, the default: what a user gets), or
OMP_WAIT_POLICY=PASSIVE / ACTIVE for both sides; issue #14 asks for both
the untouched and the PASSIVE numbers, i.e. two runs of this script.

Targets (issue #14): tokens/s LoRA >= 2.0x HF (bf16 and fp32), full fine-tune
>= 1.6x; peak RSS LoRA <= 0.5x HF, full fine-tune <= 0.8x.

tokens/s (both sides): real (non-pad) input tokens of steps 2..STEPS divided
by the wall time from the end of step 1 to the end of step STEPS; step 1 (lazy
initialisation, first-touch allocations) is left out on both sides.
- ftcore: metrics.jsonl has one train record per step (logging_steps = 1),
  written at the end of the step, with a "time" field (wall clock) and
  "tokens_per_second" = that step's tokens / time since the previous record.
  Time = time[STEPS] - time[1]; tokens = sum over k = 2..STEPS of
  tokens_per_second[k] * (time[k] - time[k-1]) (ftcore's own count; the
  script also reports how far it is from the exact counts of the HF side's
  tokenization of the same batches).
- HF: a TrainerCallback takes time.time() at on_step_end (after the optimizer
  and scheduler step, as ftcore's record); a Trainer subclass counts
  attention_mask.sum() of each step's inputs in training_step.
Memory: peak RSS of each process (ru_maxrss of os.wait4); ftcore's own
"peak_rss_mb" of its last record is shown too.

With --rounds R > 1 each side runs R times per mode, alternating which side
goes first; the table takes each side's fastest round (the one least disturbed
by other work on a shared machine) and its highest peak RSS; the JSON keeps
every round.

Ratios are ftcore / HF: targets tokens/s >= 1.5x, peak RSS <= 0.8x.

usage: train_vs_hf.py [--steps 30] [--precision bf16|fp32] [--modes lora,full] [--rounds 1]
                      [--threads 2] [--ftcore build/bin/ftcore] [--out FILE.json] [--keep]
       (HF side alone: train_vs_hf.py --hf-worker --mode lora|full --precision P --steps N
                       --threads T --result FILE.json)
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "third_party", "models", "SmolLM2-135M-Instruct")
DATA = os.path.join(ROOT, "third_party", "data", "quiz", "train.jsonl")
SEQUENCE_LEN = 512
BATCH = 8
SEED = 42
LR = {"lora": 2e-4, "full": 2e-5}
WEIGHT_DECAY = 0.01
WARMUP_RATIO = 0.05
LORA = {"r": 8, "alpha": 16, "dropout": 0.05, "targets": ["q_proj", "k_proj", "v_proj", "o_proj"]}

# core/src/data/prompt_formats.cpp, verbatim.
ALPACA_WITH_INPUT = (
    "Below is an instruction that describes a task, paired with an input that provides further context. "
    "Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n")
ALPACA_NO_INPUT = (
    "Below is an instruction that describes a task. Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n{instruction}\n\n### Response:\n")


# ---------------------------------------------------------------- HF side

def tokenize_like_ftcore(tokenizer, path, sequence_len):
    """Rows -> {input_ids, attention_mask, labels} as ftcore's alpaca format and
    tokenize_segments make them: the prompt (special tokens added, as ftcore's
    first segment) masked with -100, the output trained, EOS appended (and
    trained) unless the ids already end with it, truncated to sequence_len."""
    examples = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            instruction, output = row["instruction"], row["output"]
            given = row.get("input") or ""
            template = ALPACA_WITH_INPUT if given else ALPACA_NO_INPUT
            prompt = template.replace("{instruction}", instruction).replace("{input}", given)
            prompt_ids = tokenizer(prompt, add_special_tokens=True)["input_ids"]
            output_ids = tokenizer(output, add_special_tokens=False)["input_ids"]
            ids = prompt_ids + output_ids
            labels = [-100] * len(prompt_ids) + list(output_ids)
            eos = tokenizer.eos_token_id
            if eos is not None and (not ids or ids[-1] != eos):
                ids.append(eos)
                labels.append(eos)
            ids, labels = ids[:sequence_len], labels[:sequence_len]
            examples.append({"input_ids": ids, "attention_mask": [1] * len(ids), "labels": labels})
    return examples


def hf_worker(args):
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    start_wall = time.time()
    import torch
    from torch.utils.data import Dataset, SequentialSampler
    from transformers import (AutoModelForCausalLM, AutoTokenizer, DataCollatorForSeq2Seq, Trainer,
                              TrainerCallback, TrainingArguments)
    import transformers

    torch.set_num_threads(args.threads)
    transformers.set_seed(SEED)  # before the LoRA factors are drawn (the Trainer seeds only later)
    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    tokenizer.padding_side = "right"
    examples = tokenize_like_ftcore(tokenizer, DATA, SEQUENCE_LEN)

    class Rows(Dataset):
        def __len__(self):
            return len(examples)

        def __getitem__(self, i):
            return examples[i]

    model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32)
    peft_version = None
    if args.mode == "lora":
        import peft
        from peft import LoraConfig, get_peft_model
        peft_version = peft.__version__
        model = get_peft_model(model, LoraConfig(r=LORA["r"], lora_alpha=LORA["alpha"], lora_dropout=LORA["dropout"],
                                                 target_modules=LORA["targets"], task_type="CAUSAL_LM"))
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)

    step_times, step_tokens, step_logs = [], [], []

    class Clock(TrainerCallback):
        def on_step_end(self, args_, state, control, **kwargs):
            step_times.append(time.time())

        def on_log(self, args_, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                record = {k: v for k, v in logs.items() if isinstance(v, (int, float))}
                record["step"] = state.global_step
                step_logs.append(record)

    class InOrderTrainer(Trainer):
        def _get_train_sampler(self, *a, **k):
            return SequentialSampler(self.train_dataset)

        def training_step(self, model, inputs, num_items_in_batch=None):
            step_tokens.append(int(inputs["attention_mask"].sum()))
            return super().training_step(model, inputs, num_items_in_batch)

    out_dir = tempfile.mkdtemp(prefix="train_vs_hf_hf_")
    training_args = TrainingArguments(
        output_dir=out_dir, per_device_train_batch_size=BATCH, gradient_accumulation_steps=1, max_steps=args.steps,
        learning_rate=LR[args.mode], weight_decay=WEIGHT_DECAY, adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8,
        max_grad_norm=1.0, lr_scheduler_type="cosine", warmup_steps=WARMUP_RATIO, bf16=args.precision == "bf16",
        use_cpu=True, logging_steps=1, save_strategy="no", eval_strategy="no", report_to="none",
        dataloader_num_workers=0, seed=SEED, disable_tqdm=True)
    trainer = InOrderTrainer(model=model, args=training_args, train_dataset=Rows(),
                             data_collator=DataCollatorForSeq2Seq(tokenizer, padding=True, label_pad_token_id=-100),
                             callbacks=[Clock()])
    train_start = time.time()
    trainer.train()
    train_end = time.time()
    shutil.rmtree(out_dir, ignore_errors=True)
    result = {
        "impl": "hf", "mode": args.mode, "precision": args.precision, "threads": torch.get_num_threads(),
        "transformers": transformers.__version__, "peft": peft_version, "torch": torch.__version__,
        "optim": str(training_args.optim), "trainable_params": trainable,
        "step_times": step_times, "step_tokens": step_tokens, "logs": step_logs,
        "train_wall_s": train_end - train_start, "setup_s": train_start - start_wall,
        "data_tokens": sum(len(e["input_ids"]) for e in examples),
        "data_targets": sum(sum(1 for l in e["labels"] if l != -100) for e in examples),
        "data_rows": len(examples),
        "batch_tokens_exact": [sum(len(examples[i]["input_ids"]) for i in range(k * BATCH, min((k + 1) * BATCH, len(examples))))
                               for k in range(args.steps)],
        "self_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    with open(args.result, "w") as f:
        json.dump(result, f)


# ---------------------------------------------------------------- ftcore side

def ftcore_recipe(mode, precision, steps, out_dir):
    adapter = ""
    if mode == "lora":
        targets = ", ".join('"%s"' % t for t in LORA["targets"])
        adapter = f"""
[adapter]
name = "lora"
r = {LORA['r']}
alpha = {float(LORA['alpha'])}
dropout = {LORA['dropout']}
target_modules = [{targets}]
"""
    return f"""# written by benchmarks/train_vs_hf.py
[model]
path = "{MODEL}"
dtype = "fp32"
device = "cpu"

[data]
path = "{DATA}"
format = "alpaca"
sequence_len = {SEQUENCE_LEN}
val_set_size = 0.0
pad_to_sequence_len = false
padding_side = "right"
sample_packing = false

[train]
output_dir = "{out_dir}"
run_name = "{mode}"
micro_batch_size = {BATCH}
gradient_accumulation_steps = 1
max_steps = {steps}
max_grad_norm = 1.0
precision = "{precision}"
gradient_checkpointing = false
seed = {SEED}
logging_steps = 1
eval_before_training = false
eval_generation_samples = 0
{adapter}
[optimizer]
name = "adamw"
lr = {LR[mode]}
betas = [0.9, 0.999]
eps = 1e-8
weight_decay = {WEIGHT_DECAY}

[scheduler]
name = "cosine"
warmup_ratio = {WARMUP_RATIO}

[sampler]
name = "sequential"

[[logger]]
name = "jsonl"
"""


def run_child(cmd, env, log_path):
    """Runs cmd, waits with os.wait4: (exit code, its own peak RSS in MiB, wall s)."""
    with open(log_path, "w") as log:
        start = time.time()
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.time() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss / 1024, wall


WAIT_POLICY = "untouched"  # --wait-policy
SPEED_TARGET = {"lora": 2.0, "full": 1.6}  # issue #14: ftcore / HF tokens/s at least
RSS_TARGET = {"lora": 0.5, "full": 0.8}  # issue #14: ftcore / HF peak RSS at most


def base_env(threads):
    env = dict(os.environ)
    if WAIT_POLICY != "untouched":
        env["OMP_WAIT_POLICY"] = WAIT_POLICY
    env["FTCORE_NUM_THREADS"] = str(threads)
    env["OMP_NUM_THREADS"] = str(threads)
    return env


def check_tail(log_path):
    with open(log_path, errors="replace") as f:
        return "".join(f.readlines()[-30:])


def run_ftcore(args, mode, work):
    recipe = os.path.join(work, f"{mode}.toml")
    with open(recipe, "w") as f:
        f.write(ftcore_recipe(mode, args.precision, args.steps, os.path.join(work, "runs")))
    log = os.path.join(work, f"ftcore_{mode}.log")
    shutil.rmtree(os.path.join(work, "runs", mode), ignore_errors=True)  # a fresh run folder every round
    rc, rss, wall = run_child([args.ftcore, "run", recipe], base_env(args.threads), log)
    if rc != 0:
        sys.exit(f"ftcore run ({mode}) exited {rc}:\n{check_tail(log)}")
    records = []
    with open(os.path.join(work, "runs", mode, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("phase") == "train" and "loss" in r:
                records.append(r)
    records.sort(key=lambda r: r["step"])
    steps = [r["step"] for r in records]
    if steps != list(range(1, args.steps + 1)):
        sys.exit(f"ftcore ({mode}): expected one train record per step 1..{args.steps}, got steps {steps}")
    times = [r["time"] for r in records]
    step_tokens = [None] + [records[k]["tokens_per_second"] * (times[k] - times[k - 1]) for k in range(1, len(records))]
    return {"impl": "ftcore", "peak_rss_mb": rss, "process_wall_s": wall, "step_times": times,
            "step_tokens_from_metric": step_tokens, "losses": [r["loss"] for r in records],
            "grad_norms": [r.get("grad_norm") for r in records], "lrs": [r.get("lr") for r in records],
            "self_peak_rss_mb": records[-1].get("peak_rss_mb"),
            "tokens_per_s": sum(step_tokens[1:]) / (times[-1] - times[0])}


def run_hf(args, mode, work):
    result = os.path.join(work, f"hf_{mode}.json")
    log = os.path.join(work, f"hf_{mode}.log")
    cmd = [sys.executable, os.path.abspath(__file__), "--hf-worker", "--mode", mode, "--precision", args.precision,
           "--steps", str(args.steps), "--threads", str(args.threads), "--result", result]
    rc, rss, wall = run_child(cmd, base_env(args.threads), log)
    if rc != 0:
        sys.exit(f"HF worker ({mode}) exited {rc}:\n{check_tail(log)}")
    with open(result) as f:
        r = json.load(f)
    times, tokens = r["step_times"], r["step_tokens"]
    if len(times) != args.steps or len(tokens) != args.steps:
        sys.exit(f"HF ({mode}): {len(times)} step times and {len(tokens)} token counts for {args.steps} steps")
    losses = {l["step"]: l["loss"] for l in r["logs"]}
    r.update({"peak_rss_mb": rss, "process_wall_s": wall,
              "losses": [losses.get(k) for k in range(1, args.steps + 1)],
              "grad_norms": [next((l.get("grad_norm") for l in r["logs"] if l["step"] == k), None)
                             for k in range(1, args.steps + 1)],
              "tokens_per_s": sum(tokens[1:]) / (times[-1] - times[0])})
    return r


def ftcore_data_totals(args, work):
    recipe = os.path.join(work, "inspect.toml")
    with open(recipe, "w") as f:
        f.write(ftcore_recipe("full", args.precision, args.steps, os.path.join(work, "runs")))
    out = subprocess.run([args.ftcore, "--log-level", "warn", "data", "inspect", recipe, "--rows", "0"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    # "...: 1133 rows, 1133 train, 0 validation, 0 skipped, 0 truncated to 512 tokens; 49132 train tokens, 3924 loss targets"
    head = out.splitlines()[0]
    tail = head.rsplit(";", 1)[1].split(",")
    return {"line": head, "tokens": int(tail[0].split()[0]), "targets": int(tail[1].split()[0])}


def fmt(x, digits=0):
    return f"{x:,.{digits}f}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--modes", default="lora,full")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--wait-policy", choices=["untouched", "PASSIVE", "ACTIVE"], default="untouched",
                   help="OMP_WAIT_POLICY for both sides; untouched: the environment as it is")
    p.add_argument("--rounds", type=int, default=1,
                   help="runs of each side per mode, alternating which goes first; the table takes each side's fastest")
    p.add_argument("--ftcore", default=os.path.join(ROOT, "build", "bin", "ftcore"))
    p.add_argument("--out")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder (recipes, logs, metrics)")
    p.add_argument("--hf-worker", action="store_true")
    p.add_argument("--mode", choices=["lora", "full"])
    p.add_argument("--result")
    args = p.parse_args()
    if args.hf_worker:
        hf_worker(args)
        return
    global WAIT_POLICY
    WAIT_POLICY = args.wait_policy
    if args.steps < 3:
        sys.exit("--steps must be >= 3 (step 1 is left out of the timing)")

    work = tempfile.mkdtemp(prefix="train_vs_hf_")
    load_before = os.getloadavg()
    started = time.time()
    totals = ftcore_data_totals(args, work)
    report = {"command": " ".join([os.path.relpath(sys.argv[0], ROOT)] + sys.argv[1:]), "steps": args.steps,
              "precision": args.precision, "threads": args.threads, "batch": BATCH, "sequence_len": SEQUENCE_LEN,
              "omp_wait_policy": base_env(args.threads).get("OMP_WAIT_POLICY", "unset"), "loadavg_before": load_before,
              "ftcore_data": totals, "modes": {}}
    for mode in args.modes.split(","):
        fts, hfs = [], []
        for round_ in range(args.rounds):
            # Alternate which side goes first, so that a burst of other load hits each side in turn.
            for side in (("ftcore", "hf") if round_ % 2 == 0 else ("hf", "ftcore")):
                load = os.getloadavg()[0]
                r = run_ftcore(args, mode, work) if side == "ftcore" else run_hf(args, mode, work)
                r["loadavg_1min_at_start"] = load
                (fts if side == "ftcore" else hfs).append(r)
                print(f"  {mode} round {round_ + 1} {side:<6}: {r['tokens_per_s']:8.1f} tok/s, peak RSS "
                      f"{r['peak_rss_mb']:7.0f} MB (load {load:.2f})", flush=True)
        # Speed: the fastest round of each side (the one least disturbed by other work on the machine);
        # memory: the highest peak RSS of each side over its rounds.
        ft = dict(max(fts, key=lambda r: r["tokens_per_s"]), peak_rss_mb=max(r["peak_rss_mb"] for r in fts))
        hf = dict(max(hfs, key=lambda r: r["tokens_per_s"]), peak_rss_mb=max(r["peak_rss_mb"] for r in hfs))
        if (hf["data_tokens"], hf["data_targets"]) != (totals["tokens"], totals["targets"]):
            sys.exit(f"the HF side's tokenization differs from ftcore's: {hf['data_tokens']} tokens, "
                     f"{hf['data_targets']} targets vs ftcore's {totals['line']}")
        if hf["step_tokens"] != hf["batch_tokens_exact"]:
            sys.exit(f"HF trained other batches than the file's order: {hf['step_tokens']} vs {hf['batch_tokens_exact']}")
        exact = hf["batch_tokens_exact"]
        metric_error = max(abs(a - b) / b for a, b in zip(ft["step_tokens_from_metric"][1:], exact[1:]))
        report["modes"][mode] = {
            "ftcore": {k: ft[k] for k in ("tokens_per_s", "peak_rss_mb", "self_peak_rss_mb", "process_wall_s",
                                          "losses", "grad_norms")},
            "hf": {k: hf[k] for k in ("tokens_per_s", "peak_rss_mb", "self_peak_rss_mb", "process_wall_s", "losses",
                                      "grad_norms", "optim", "transformers", "peft", "torch", "trainable_params",
                                      "threads")},
            "rounds": {"ftcore_tokens_per_s": [r["tokens_per_s"] for r in fts],
                       "hf_tokens_per_s": [r["tokens_per_s"] for r in hfs],
                       "ftcore_peak_rss_mb": [r["peak_rss_mb"] for r in fts],
                       "hf_peak_rss_mb": [r["peak_rss_mb"] for r in hfs],
                       "ftcore_loadavg_1min_at_start": [r["loadavg_1min_at_start"] for r in fts],
                       "hf_loadavg_1min_at_start": [r["loadavg_1min_at_start"] for r in hfs]},
            "timed_tokens": sum(exact[1:]),
            "ftcore_timed_s": ft["step_times"][-1] - ft["step_times"][0],
            "hf_timed_s": hf["step_times"][-1] - hf["step_times"][0],
            "ftcore_tokens_metric_max_rel_error": metric_error,
            "tokens_per_s_ratio": ft["tokens_per_s"] / hf["tokens_per_s"],
            "peak_rss_ratio": ft["peak_rss_mb"] / hf["peak_rss_mb"],
            "step1_loss": {"ftcore": ft["losses"][0], "hf": hf["losses"][0]},
            "last_loss": {"ftcore": ft["losses"][-1], "hf": hf["losses"][-1]},
        }
    report["loadavg_after"] = os.getloadavg()
    report["total_wall_s"] = time.time() - started

    print(f"\n{args.precision}, {args.steps} steps x batch {BATCH} (timed: steps 2..{args.steps}), "
          f"{args.threads} threads, OMP_WAIT_POLICY={report['omp_wait_policy']}, load before "
          f"{load_before[0]:.2f} after {report['loadavg_after'][0]:.2f}")
    print(f"{'mode':<5} {'ftcore tok/s':>12} {'HF tok/s':>9} {'ratio':>6} {'ftcore RSS MB':>13} {'HF RSS MB':>9} "
          f"{'ratio':>6}  {'step-1 loss ftcore / HF':>24}  {'step-N loss ftcore / HF':>24}")
    for mode, m in report["modes"].items():
        print(f"{mode:<5} {fmt(m['ftcore']['tokens_per_s']):>12} {fmt(m['hf']['tokens_per_s']):>9} "
              f"{m['tokens_per_s_ratio']:>5.2f}x {fmt(m['ftcore']['peak_rss_mb']):>13} {fmt(m['hf']['peak_rss_mb']):>9} "
              f"{m['peak_rss_ratio']:>5.2f}x  {m['step1_loss']['ftcore']:>11.4f} / {m['step1_loss']['hf']:<10.4f}"
              f"  {m['last_loss']['ftcore']:>11.4f} / {m['last_loss']['hf']:<10.4f}")
        print(f"      timed {m['timed_tokens']:,} tokens: ftcore {m['ftcore_timed_s']:.1f} s, HF {m['hf_timed_s']:.1f} s; "
              f"ftcore's tokens_per_second x interval vs exact batch tokens: max error {100 * m['ftcore_tokens_metric_max_rel_error']:.3f}%; "
              f"targets: tok/s >= {SPEED_TARGET[mode]}x {'met' if m['tokens_per_s_ratio'] >= SPEED_TARGET[mode] else 'MISSED'}, "
              f"RSS <= {RSS_TARGET[mode]}x {'met' if m['peak_rss_ratio'] <= RSS_TARGET[mode] else 'MISSED'}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    if args.keep:
        print(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
