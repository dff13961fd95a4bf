"""quantizer/nf4: dequantization bandwidth vs a STREAM triad, and the tiled
quantized matmul (forward + grad_input) vs dense bf16 GEMMs of the same
shapes, all measured in one process by quantize_tensors --mode bench.

  dequant bandwidth = (n/2 packed + 2n bf16 out + state bytes) / seconds   target >= 0.8 x triad
                      "dequant": into a reused, already-touched output (the kernel: a caching
                      CPU allocator returns the same buffer each call); "e2e": a fresh output
                      from the default allocator each call (includes its page faults)
  triad bandwidth   = 12 bytes x elements / seconds of a = b + 3c (fp32, same threads, same bytes)
  matmul ratio      = (matmul + matmul_grad_input) / (x @ W^T + g @ W dense bf16)   target <= 1.3

usage: FTCORE_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE python benchmarks/dequant_bandwidth.py \
           build/tests/quantize_tensors [--tokens 512] [--shapes 576x1536,4096x4096,4096x11008]
"""
import argparse
import json
import os
import subprocess

ap = argparse.ArgumentParser()
ap.add_argument("tool")
ap.add_argument("--tokens", type=int, default=512)
ap.add_argument("--shapes", default="576x1536,4096x4096,4096x11008")
ap.add_argument("--repeat", type=int, default=5)
ap.add_argument("--quantizer", default="nf4")
args = ap.parse_args()

env = dict(os.environ)
env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
r = subprocess.run([args.tool, "--quantizer", args.quantizer, "--mode", "bench", "--shapes", args.shapes,
                    "--tokens", str(args.tokens), "--repeat", str(args.repeat)],
                   env=env, capture_output=True, text=True, check=True)
print(f"{'shape':>12} {'thr':>3} {'dequant GB/s':>12} {'triad GB/s':>10} {'ratio':>6} {'e2e GB/s':>8} {'ratio':>6} "
      f"{'q fwd+bwd ms':>12} {'dense ms':>9} {'ratio':>6}")
for line in (l for l in r.stdout.splitlines() if l.startswith("{")):  # spdlog warnings share stdout
    j = json.loads(line)
    dq = j["dequant_bytes"] / j["dequant_s"] / 1e9
    tr = j["triad_bytes"] / j["triad_s"] / 1e9
    e2e = j["dequant_bytes"] / j["dequant_alloc_s"] / 1e9
    print(f"{'x'.join(map(str, j['shape'])):>12} {j['threads']:>3} {dq:12.2f} {tr:10.2f} {dq / tr:6.2f} "
          f"{e2e:8.2f} {e2e / tr:6.2f} "
          f"{j['quant_fwd_bwd_s'] * 1e3:12.1f} {j['dense_fwd_bwd_s'] * 1e3:9.1f} "
          f"{j['quant_fwd_bwd_s'] / j['dense_fwd_bwd_s']:6.2f}")
print(f"(M = {args.tokens} tokens, best of {args.repeat}; targets: dequant (reused output) >= 0.8 x triad, matmul <= 1.3 x dense)")
