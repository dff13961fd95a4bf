#!/usr/bin/env bash
# The ftcore CLI contract: exit codes (0 ok, 1 runtime failure, 2 usage or
# config error), --help on every subcommand, --version facts, JSON listing.
set -uo pipefail
ftcore="$1"; root="$2"
failures=0
expect() {  # expect CODE DESCRIPTION -- COMMAND...
  local want="$1" what="$2"; shift 3
  "$@" > /tmp/ftcore_cli_out.$$ 2>&1
  local got=$?
  if [[ $got -ne $want ]]; then
    echo "FAIL: $what: exit $got, expected $want"; sed 's/^/    /' /tmp/ftcore_cli_out.$$; failures=$((failures + 1))
  else
    echo "ok: $what (exit $got)"
  fi
}
expect 2 "no command" -- "$ftcore"
expect 0 "--help" -- "$ftcore" --help
expect 2 "unknown command" -- "$ftcore" trian
expect 2 "unknown option" -- "$ftcore" validate --bogus x.toml
expect 2 "validate without a recipe" -- "$ftcore" validate
expect 2 "missing recipe file" -- "$ftcore" validate /nonexistent/recipe.toml
expect 2 "bad --log-level" -- "$ftcore" --log-level loud plugins
for sub in run validate plugins; do expect 0 "$sub --help" -- "$ftcore" $sub --help; done
expect 0 "validate quickstart" -- "$ftcore" validate "$root/configs/quickstart.toml"
expect 0 "validate with --set" -- "$ftcore" validate "$root/configs/quickstart.toml" --set optimizer.lr=1e-4
expect 2 "validate with a bad --set" -- "$ftcore" validate "$root/configs/quickstart.toml" --set optimizer.lr=-1
runs="$(mktemp -d)"
expect 2 "run with a missing model folder (found by validation)" -- "$ftcore" run "$root/configs/quickstart.toml" --output-dir "$runs" --set model.path=/nonexistent
expect 2 "run resuming from a folder that is not a checkpoint" -- "$ftcore" run "$root/configs/quickstart.toml" --output-dir "$runs" --set train.resume_from_checkpoint=/nonexistent
expect 2 "run with an unknown metric_for_best" -- "$ftcore" run "$root/configs/quickstart.toml" --output-dir "$runs" --set train.metric_for_best=accuracy
rm -rf "$runs"
expect 0 "plugins" -- "$ftcore" plugins
expect 0 "plugins --kind scheduler" -- "$ftcore" plugins --kind scheduler
expect 2 "plugins --kind bogus" -- "$ftcore" plugins --kind bogus
expect 0 "plugins describe adamw" -- "$ftcore" plugins describe adamw
expect 0 "plugins describe scheduler/cosine" -- "$ftcore" plugins describe scheduler/cosine
expect 2 "plugins describe unknown" -- "$ftcore" plugins describe adamx

version="$("$ftcore" --version)"
for fact in "ftcore " "libtorch " "_GLIBCXX_USE_CXX11_ABI=" "CUDA "; do
  grep -q "$fact" <<< "$version" || { echo "FAIL: --version lacks '$fact'"; failures=$((failures + 1)); }
done
"$ftcore" plugins --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
keys = {c["key"] for c in d["components"]}
need = {"optimizer/adamw", "logger/console", "logger/jsonl", "scheduler/cosine", "scheduler/linear",
        "scheduler/constant", "scheduler/polynomial", "scheduler/inverse_sqrt", "scheduler/one_cycle",
        "scheduler/warmup_stable_decay", "scheduler/cosine_with_restarts", "scheduler/constant_with_warmup"}
missing = need - keys
sys.exit(f"plugins --json lacks {sorted(missing)}" if missing else 0)' || failures=$((failures + 1))
"$ftcore" plugins describe adamw | grep "betas (pair of floats, default \[0.9, 0.999\]" \
  || { echo "FAIL: describe adamw lacks the betas line"; failures=$((failures + 1)); }
expect 0 "merge --help" -- "$ftcore" merge --help
expect 2 "merge without --out" -- "$ftcore" merge --model "$root" --adapter "$root"
expect 2 "merge with a missing model folder" -- "$ftcore" merge --model /nonexistent --adapter /nonexistent --out /nonexistent/out
expect 2 "merge with a bad --dtype" -- "$ftcore" merge --model /nonexistent --adapter /nonexistent --out /nonexistent/out --dtype int8
"$ftcore" merge --help | grep -- "--max-shard-size" > /dev/null || { echo "FAIL: merge --help lacks --max-shard-size"; failures=$((failures + 1)); }
rm -f /tmp/ftcore_cli_out.$$
echo "$failures failures"
[[ $failures -eq 0 ]]
