"""Mixture-of-experts throughput, ftcore vs transformers, on CPU, side by side
in one run: a tiny-but-wide MixtralForCausalLM (8 experts, top-2; random
weights made here by transformers, fixed seed), the same batch, dtype and
thread count. Forward: full logits, no grad. Training: forward + cross-entropy
+ router_aux_loss_coef x aux loss (output_router_logits) + backward (no
optimizer step): --mode full into every weight; --mode lora into LoRA
tensors only, all-linear r 8 alpha 16 on both sides (PEFT's all-linear on
this model: attention, the routers and the expert stacks as target_parameters;
ftcore's adapter/lora picks the same). Each side runs in its own process; the two
alternate for ROUNDS rounds of ITERS timed iterations after one warmup; the
table shows each side's median over the rounds' medians and the ratio.
transformers runs its default experts implementation (config
_experts_implementation, printed). Target: ftcore >= 1.5x on both.

usage: moe_bench.py BUILD_DIR [--mode full|lora] [--dtype fp32] [--batch 4] [--seq 128] [--iters 3] [--rounds 3]
                   [--threads N]
                   [--hf-experts default|eager|grouped_mm|batched_mm]
       (transformers' side alone: moe_bench.py --hf-worker MODEL_DIR DTYPE B T ITERS MODE EXPERTS)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from model_forward_bench import add_side_by_side_arguments, run_json, side_env

SHAPE = dict(vocab_size=4096, hidden_size=512, intermediate_size=1024, num_hidden_layers=2, num_attention_heads=8,
             num_key_value_heads=4, num_local_experts=8, num_experts_per_tok=2, max_position_embeddings=1024,
             output_router_logits=True, router_aux_loss_coef=0.02)


def make_model(folder):
    import torch
    from transformers import MixtralConfig, MixtralForCausalLM
    torch.manual_seed(0)
    MixtralForCausalLM(MixtralConfig(**SHAPE)).save_pretrained(folder)


def timed(iters, body):
    body()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        body()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def hf_worker(model_dir, dtype_name, batch, seq, iters, mode, experts):
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import torch
    from transformers import MixtralForCausalLM
    threads = int(os.environ.get("FTCORE_NUM_THREADS", os.cpu_count()))
    torch.set_num_threads(threads)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
    kwargs = {} if experts == "default" else {"experts_implementation": experts}
    model = MixtralForCausalLM.from_pretrained(model_dir, dtype=dtype, **kwargs).eval()
    if mode == "lora":
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear")).eval()
    torch.manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (batch, seq))

    def forward():
        with torch.no_grad():
            model(input_ids=ids)

    def train():
        model.zero_grad()
        model(input_ids=ids, labels=ids, output_router_logits=True).loss.backward()

    fwd = timed(iters, forward)
    model.train()
    step = timed(iters, train)
    print(json.dumps({"impl": "transformers", "mode": mode, "threads": threads,
                      "experts": model.config._experts_implementation,
                      "forward_s": fwd, "forward_tokens_per_s": batch * seq / fwd, "train_s": step,
                      "train_tokens_per_s": batch * seq / step}))


def main():
    if sys.argv[1:2] == ["--hf-worker"]:  # MODEL_DIR DTYPE B T ITERS MODE EXPERTS
        return hf_worker(sys.argv[2], sys.argv[3], *map(int, sys.argv[4:7]), sys.argv[7], sys.argv[8])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("build_dir", help="the build folder with bin/moe_bench_driver")
    add_side_by_side_arguments(p, dtype="fp32", seq=128)
    p.add_argument("--mode", choices=["full", "lora"], default="full", help="what the training backward reaches")
    p.add_argument("--hf-experts", choices=["default", "eager", "grouped_mm", "batched_mm"], default="default",
                   help="transformers' experts implementation: its default (grouped_mm in 5.24), or eager, the "
                        "per-expert loop issue #17's target was set against")
    a = p.parse_args()
    env = side_env(a.threads)
    driver = os.path.join(a.build_dir, "bin", "moe_bench_driver")
    shape = [a.dtype, str(a.batch), str(a.seq), str(a.iters), a.mode]
    with tempfile.TemporaryDirectory() as folder:
        make_model(folder)
        results = {"ftcore": [], "transformers": []}
        for _ in range(a.rounds):
            results["ftcore"].append(run_json([driver, folder] + shape, env))
            results["transformers"].append(
                run_json([sys.executable, os.path.abspath(__file__), "--hf-worker", folder] + shape + [a.hf_experts], env))
    print(f"Mixtral {SHAPE['num_local_experts']} experts top-{SHAPE['num_experts_per_tok']}, hidden "
          f"{SHAPE['hidden_size']}, expert width {SHAPE['intermediate_size']}, {SHAPE['num_hidden_layers']} layers, "
          f"vocab {SHAPE['vocab_size']}; training {a.mode}; {a.dtype}, batch {a.batch} x {a.seq} tokens, {a.threads} threads "
          f"(OMP_WAIT_POLICY={env['OMP_WAIT_POLICY']}); transformers experts implementation "
          f"{results['transformers'][0]['experts']}; {a.rounds} alternating rounds x {a.iters} iterations")
    print(f"{'':14s}{'forward tok/s':>15s}{'train tok/s':>13s}   per round (forward / train)")
    medians = {}
    for k in ("ftcore", "transformers"):
        medians[k] = {m: statistics.median(r[m] for r in results[k]) for m in ("forward_s", "train_s")}
        rounds = ", ".join(f"{r['forward_tokens_per_s']:.0f}/{r['train_tokens_per_s']:.0f}" for r in results[k])
        tokens = a.batch * a.seq
        print(f"{k:14s}{tokens / medians[k]['forward_s']:15.1f}{tokens / medians[k]['train_s']:13.1f}   {rounds}")
    for m, label in (("forward_s", "forward"), ("train_s", "training")):
        ratio = medians["transformers"][m] / medians["ftcore"][m]
        print(f"{label} ratio ftcore / transformers = {ratio:.2f}x (target >= 1.5x: {'met' if ratio >= 1.5 else 'MISSED'})")


if __name__ == "__main__":
    main()
