"""Optimizer step time and effective bandwidth: ftcore's adamw, adamw_8bit, lion, lion_8bit,
adafactor, paged_adamw_32bit and paged_adamw_8bit (benchmarks/optimizer_step_driver; the paged ones
unbounded, max_resident_bytes = 0: a resident budget is benchmarks/paged_optimizer.py's subject)
against torch.optim.AdamW (foreach and fused, in this Python process, on tensors of the same shapes
and the same thread count), and a STREAM triad measured by the driver in the same run.

Effective bandwidth = the bytes a step must move per parameter (fp32 params and grads) / step time:
  adamw, paged_adamw_32bit, torch AdamW: read p, g, m, v + write p, m, v = 28 B
  adamw_8bit, paged_adamw_8bit: read p, g, 2 codes + write p, 2 codes (+ absmax) = 16 + 16/256 B
  lion:       read p, g, m + write p, m                         = 20 B
  lion_8bit:  read p, g, code + write p, code (+ absmax)        = 14 + 8/256 B
  adafactor:  read p, g + write p (factored state is O(rows + cols)) = 12 B (a lower bound)
Targets: bandwidth >= 0.6 x triad for the fused kernels; adamw_8bit step <= 0.7 x adamw step (issue #5),
adamw_8bit <= 1.0 x adamw and lion_8bit <= 1.0 x lion (issue #14).

usage: OMP_WAIT_POLICY=PASSIVE FTCORE_NUM_THREADS=2 python benchmarks/optimizer_step.py BUILD_DIR [--steps N]
"""
import json
import math
import os
import subprocess
import sys
import time

import torch

BYTES = {"adamw": 28, "adamw_8bit": 16 + 16 / 256, "lion": 20, "lion_8bit": 14 + 8 / 256, "adafactor": 12,
         "paged_adamw_32bit": 28, "paged_adamw_8bit": 16 + 16 / 256, "torch AdamW foreach": 28,
         "torch AdamW fused": 28}


def shapes_of(name):
    if name == "lora":
        return [(16, 2048), (2048, 16)] * 150
    s = [(49152, 576)]
    for _ in range(30):
        s += [(576, 576), (192, 576), (192, 576), (576, 576), (1536, 576), (1536, 576), (576, 1536), (576,), (576,)]
    return s + [(576,)]


def torch_adamw_ms(shapes, steps, **kw):
    torch.manual_seed(0)
    params = [torch.randn(s, requires_grad=True) for s in shapes]
    for p in params:
        p.grad = torch.randn(p.shape) * 1e-3
    opt = torch.optim.AdamW(params, lr=1e-3, **kw)
    for _ in range(3):
        opt.step()
    t0 = time.perf_counter()
    for _ in range(steps):
        opt.step()
    return (time.perf_counter() - t0) * 1e3 / steps


def describe_machine():
    """CPU model, the ISA flags the kernels dispatch on (and AMX), and the load: ratios depend on them."""
    model, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "unknown CPU":
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags") and not flags:
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    shown = [f for f in ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "amx_bf16") if f in flags]
    return f"{model}, {os.cpu_count()} CPUs, flags: {' '.join(shown) or 'none of avx2/avx512/amx'}, " \
           f"load average {os.getloadavg()[0]:.1f}"


def main():
    build = sys.argv[1]
    print(describe_machine())
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 20
    driver = os.path.join(build, "benchmarks", "optimizer_step_driver")
    torch.set_num_threads(int(os.environ.get("FTCORE_NUM_THREADS", "2")))
    for name in ("lora", "135m"):
        out = subprocess.run([driver, "--set", name, "--steps", str(steps)], capture_output=True, text=True,
                             env=dict(os.environ, FTCORE_PLUGIN_PATH=""))
        if out.returncode != 0:
            sys.exit(out.stderr)
        rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        triad = rows[0]["triad_gbs"]
        ms = {r["optimizer"]: r["ms_per_step"] for r in rows[1:]}
        numel = rows[1]["numel"]
        shapes = shapes_of(name)
        assert sum(math.prod(s) for s in shapes) == numel
        ms["torch AdamW foreach"] = torch_adamw_ms(shapes, steps, foreach=True)
        ms["torch AdamW fused"] = torch_adamw_ms(shapes, steps, fused=True)
        print(f"\n{name}: {len(shapes)} tensors, {numel / 1e6:.1f}M fp32 parameters, {rows[0]['threads']} threads, "
              f"STREAM triad {triad:.1f} GB/s")
        print(f"{'optimizer':22s} {'ms/step':>9s} {'GB/s':>7s} {'x triad':>8s} {'vs torch fused':>15s}")
        for k, v in ms.items():
            gbs = BYTES[k] * numel / (v * 1e-3) / 1e9
            print(f"{k:22s} {v:9.2f} {gbs:7.1f} {gbs / triad:8.2f} {ms['torch AdamW fused'] / v:14.2f}x")
        print(f"adamw_8bit / adamw step time: {ms['adamw_8bit'] / ms['adamw']:.2f}; "
              f"lion_8bit / lion: {ms['lion_8bit'] / ms['lion']:.2f} (targets: <= 0.7 issue #5, <= 1.0 issue #14)")


if __name__ == "__main__":
    main()
