#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (separate build folder) and runs
# each for a bounded time from a small seed corpus of valid files. Any crash,
# sanitizer report or unexpected exception fails the test.
#   run_fuzzers.sh SOURCE_DIR BUILD_DIR SECONDS_PER_TARGET
set -euo pipefail
src="$1"; build="$2"; seconds="${3:-20}"
if ! command -v clang++ > /dev/null; then
  echo "SKIPPED: clang++ is not installed (bootstrap installs clang and libclang-rt-14-dev)"; exit 0
fi
cmake -S "$src/tests/fuzz" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFTCORE_SOURCE_DIR="$src" > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" > "$build.build.log" 2>&1 || { tail -50 "$build.build.log"; exit 1; }

seeds="$build/seeds"
mkdir -p "$seeds/safetensors" "$seeds/gguf" "$seeds/jsonl"
"$src/third_party/venv/bin/python" - "$seeds" <<'PY'
import json, sys, numpy as np, torch
from safetensors.torch import save_file
from gguf import GGUFWriter, GGMLQuantizationType as T
from gguf.quants import quantize
seeds = sys.argv[1]
save_file({"a": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.ones(4, dtype=torch.bfloat16)},
          f"{seeds}/safetensors/seed.safetensors", metadata={"k": "v"})
w = GGUFWriter(f"{seeds}/gguf/seed.gguf", arch="llama")
w.add_uint32("x", 7); w.add_string("s", "text"); w.add_array("arr", [1, 2, 3])
w.add_tensor("f32", np.ones((2, 4), np.float32))
q = quantize(np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32), T.Q4_1)
w.add_tensor("q", q, raw_shape=q.shape, raw_dtype=T.Q4_1)
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
with open(f"{seeds}/jsonl/seed.jsonl", "w") as f:
    f.write(json.dumps({"instruction": "q", "input": "", "output": "a"}) + "\n{bad\n\n")
PY
export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
status=0
for target in safetensors gguf jsonl; do
  corpus="$build/corpus-$target"; mkdir -p "$corpus"
  echo "fuzzing $target for ${seconds}s"
  if ! "$build/${target}_fuzzer" "$corpus" "$seeds/$target" -max_total_time="$seconds" -rss_limit_mb=4096 \
       -max_len=65536 -artifact_prefix="$build/crash-$target-" > "$build/$target.log" 2>&1; then
    echo "FAILED: $target fuzzer found a problem:"; tail -40 "$build/$target.log"; status=1
  else
    grep -E "^(Done|#[0-9]+.*DONE)" "$build/$target.log" | tail -1 || true
  fi
done
exit $status
