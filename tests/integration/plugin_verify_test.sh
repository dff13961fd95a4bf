#!/usr/bin/env bash
# `ftcore plugin verify`: the in-tree plugin libraries pass it (an optimizer,
# the schedulers, the samplers, both quantizer libraries, a logger, the LoRA adapters), and the deliberately broken
# fixture (tests/fixtures/broken_plugin.cpp) fails exactly the checks it
# breaks, each with its reason; usage errors exit 2. And one version:
# `ftcore --version` says FTCORE_SDK_VERSION of the SDK header.
#
# usage: plugin_verify_test.sh FTCORE BROKEN_FIXTURE_SO SDK_VERSION_H
set -uo pipefail
ftcore=$1
broken=$2
version_h=$3
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# 1. In-tree libraries pass: exit 0, no FAIL line.
for name in optimizer/adamw scheduler/cosine sampler/multipack quantizer/nf4 quantizer/gptq logger/jsonl adapter/lora; do
  out=$("$ftcore" plugin verify "$name" 2>&1)
  rc=$?
  echo "$out" | sed "s|^|  [$name] |"
  [[ $rc -eq 0 ]] || fail "plugin verify $name exited $rc"
  grep -q '^FAIL' <<<"$out" && fail "plugin verify $name has FAIL lines"
  grep -q '^PASS' <<<"$out" || fail "plugin verify $name ran no checks"
done

# 2. The broken fixture: exit 1, and these checks fail for these reasons.
out=$("$ftcore" plugin verify "$broken" 2>&1)
rc=$?
echo "$out" | sed 's|^|  [broken] |'
[[ $rc -eq 1 ]] || fail "plugin verify of the broken fixture exited $rc, expected 1"
expect_line() {  # a line starting with $1 that contains $2
  local line
  line=$(grep -F -- "$1" <<<"$out" | head -n 1)
  [[ -n "$line" ]] || { fail "no line '$1'"; return; }
  [[ "$line" == *"$2"* ]] || fail "'$1' should say '$2', got: $line"
}
d="optimizer/fixture_drift"
expect_line "PASS $d: fp32: 6 steps" ""
expect_line "PASS $d: parameters with gradients move" ""
expect_line "FAIL $d: a parameter without gradients is left alone" "frozen changed although it never had a gradient"
expect_line "FAIL $d: a group with lr_scale = 0 does not move" "paused changed"
expect_line "FAIL $d: deterministic" "differs in "
expect_line "FAIL $d: state round trip" "the resumed run differs from the uninterrupted one"
s="scheduler/fixture_spike"
expect_line "FAIL $s: factor(step, total) finite" "factor(1, 1) = nan"
expect_line "FAIL $s: warmup_steps = 10" "factor(0) = factor(9): no warmup"
m="sampler/fixture_overlap"
expect_line "FAIL $m: one process: each of 37 examples exactly once" "yields 36 indices"
expect_line "FAIL $m: 3 ranks: shards cover every index" "72 rows repeated across ranks"
expect_line "PASS $m: resume: a fresh instance yields the same batches" ""
q="quantizer/fixture_lossy"
expect_line "PASS $q: quantizes a [64, 256] fp32 weight" ""
expect_line "PASS $q: round trip" "relative Frobenius error"
expect_line "FAIL $q: save/load" "max difference "
expect_line "FAIL $q: matmul(x, q) = x @ dequantize(q)^T" "max difference "
expect_line "FAIL logger/fixture_bad_default: the defaults satisfy" "min_rows must not exceed max_rows"
expect_line "verify: " "failed"

# 3. Usage errors exit 2 with a message.
for args in "plugin" "plugin verify" "plugin verify no_such_component" "plugin steps --optimizer adamw"; do
  # shellcheck disable=SC2086
  msg=$("$ftcore" $args 2>&1 >/dev/null)
  rc=$?
  [[ $rc -eq 2 ]] || fail "ftcore $args exited $rc, expected 2"
  [[ -n "$msg" ]] || fail "ftcore $args printed no message"
done

for args in "plugin --help" "plugin verify --help" "plugin steps --help"; do
  # shellcheck disable=SC2086
  "$ftcore" $args >/dev/null 2>&1 || fail "ftcore $args exited $?, expected 0"
done

# 4. The package and the SDK tell one version.
sdk_version=$(sed -n 's/^#define FTCORE_SDK_VERSION "\(.*\)"$/\1/p' "$version_h")
package_version=$("$ftcore" --version | sed -n 's/^ftcore //p')
[[ -n "$sdk_version" && "$package_version" == "$sdk_version" ]] ||
  fail "ftcore --version says '$package_version', $version_h says '$sdk_version'"
echo "  ftcore --version: $package_version, FTCORE_SDK_VERSION: $sdk_version"

[[ $failures -eq 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo "PASS: plugin verify (in-tree libraries pass, the broken fixture fails as expected, usage errors exit 2, one version)"
