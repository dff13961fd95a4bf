#!/usr/bin/env bash
# The installed package as a third party sees it: install this build to a
# temporary prefix, build the out-of-tree example plugin
# (sdk/examples/sgd_nesterov) against THAT prefix only, check that the
# installed ftcore lists and describes it, compare its steps with
# torch.optim.SGD and its resume with an uninterrupted run
# (sgd_nesterov_reference.py), check RUNPATHs of everything installed, that a
# plugin built against another libtorch is refused, and that the example
# installed into the prefix is found without FTCORE_PLUGIN_PATH. The steps
# and the conformance suite run through the INSTALLED ftcore (`ftcore plugin
# steps`, `ftcore plugin verify`), whose --version agrees with the SDK header.
#
# usage: install_and_example_test.sh BUILD_DIR PYTHON
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR PYTHON" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
python=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
example_src="$source_dir/sdk/examples/sgd_nesterov"

# The cmake that configured the build, else the one on PATH.
cmake_bin=$(sed -n 's/^CMAKE_COMMAND:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
[[ -x "$cmake_bin" ]] || cmake_bin=cmake

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ftcore-install-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
plugin_file=libftcore_optimizer_sgd_nesterov.so

check() { echo "check: $*"; }
ok() { echo "  ok: $*"; }
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# Runs a command quietly; on failure shows its output and fails the test.
run_logged() {
  local what=$1 log="$tmp/$2.log"
  shift 2
  if ! "$@" >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    fail "$what (command: $*)"
  fi
}

# 1. Install.
check "cmake --install $build --prefix <tmp>/prefix lays out bin/, lib/, lib/ftcore/plugins/, include/ftcore/, lib/cmake/ftcore/"
run_logged "install" install "$cmake_bin" --install "$build" --prefix "$prefix"
for f in bin/ftcore lib/libftcore.so lib/libftcore_sdk.so lib/ftcore/plugins/libftcore_optimizer_adamw.so \
  include/ftcore/sdk/plugin.h include/ftcore/sdk/optimizer.h include/ftcore/sdk/registry.h \
  include/ftcore/sdk/params.h include/ftcore/sdk/version.h include/ftcore/plugin_loader.h \
  lib/cmake/ftcore/ftcoreConfig.cmake lib/cmake/ftcore/ftcoreConfigVersion.cmake \
  lib/cmake/ftcore/ftcoreTargets.cmake lib/cmake/ftcore/FtcoreAddPlugin.cmake; do
  [[ -e "$prefix/$f" ]] || fail "the install lacks $f"
done
for dir in "$source_dir/sdk/include" "$source_dir/core/include"; do
  while IFS= read -r header; do
    [[ -f "$prefix/include/${header#"$dir"/}" ]] || fail "the install lacks ${header#"$dir"/} (from $dir)"
  done < <(find "$dir" -name '*.h')
done
ok "installed layout complete, every header of sdk/include and core/include installed"

# 2. RUNPATHs: $ORIGIN-relative for ftcore's own libraries, libtorch by its
# absolute folder, nothing pointing into the build tree, no missing folders.
runpath_of() { readelf -d "$1" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p'; }
check_runpath() {
  local file=$1 first=$2 rp entry
  rp=$(runpath_of "$file")
  [[ -n "$rp" ]] || fail "$file has no RUNPATH"
  [[ "${rp%%:*}" == "$first" ]] || fail "$file: RUNPATH '$rp' should start with $first"
  IFS=: read -r -a entries <<<"$rp"
  for entry in "${entries[@]}"; do
    [[ -n "$entry" ]] || fail "$file: RUNPATH '$rp' has an empty entry (the current directory)"
    [[ "$entry" == "$build"* ]] && fail "$file: RUNPATH '$rp' points into the build tree"
    [[ "$entry" == '$ORIGIN'* || -d "$entry" ]] || fail "$file: RUNPATH entry $entry does not exist"
  done
  local has_torch=no
  for entry in "${entries[@]}"; do
    [[ -e "${entry/\$ORIGIN/$(dirname "$file")}/libtorch_cpu.so" ]] && has_torch=yes
  done
  [[ $has_torch == yes ]] || fail "$file: no RUNPATH entry holds libtorch_cpu.so ('$rp')"
  ok "$(basename "$file"): RUNPATH $rp"
}
check "readelf -d: RUNPATHs of installed binaries, libraries and plugins"
check_runpath "$prefix/bin/ftcore" '$ORIGIN/../lib'
check_runpath "$(readlink -f "$prefix/lib/libftcore.so")" '$ORIGIN'
check_runpath "$(readlink -f "$prefix/lib/libftcore_sdk.so")" '$ORIGIN'
for plugin in "$prefix"/lib/ftcore/plugins/*.so; do check_runpath "$plugin" '$ORIGIN/../..'; done
# ldd's output is captured first: `ldd | grep -q` under pipefail fails at
# random when grep exits early and ldd dies of SIGPIPE.
ldd_out="$(ldd "$prefix/bin/ftcore")"
if grep -q 'not found' <<< "$ldd_out"; then
  echo "$ldd_out" >&2
  fail "installed ftcore has unresolved libraries"
fi
grep -q "libftcore.so.0 => $prefix/bin/../lib/" <<< "$ldd_out" ||
  fail "installed ftcore does not load the installed libftcore: $(grep libftcore <<< "$ldd_out")"
ok "installed ftcore resolves every library, libftcore from the prefix"

# 3. Build the example against the installed package only.
check "the example configures with find_package(ftcore) from the prefix and builds"
run_logged "configure the example" configure_example \
  "$cmake_bin" -S "$example_src" -B "$tmp/example" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
found_dir=$(sed -n 's/^ftcore_DIR:PATH=//p' "$tmp/example/CMakeCache.txt")
[[ "$found_dir" == "$prefix/lib/cmake/ftcore" ]] || fail "find_package(ftcore) used $found_dir, not the prefix"
run_logged "build the example" build_example "$cmake_bin" --build "$tmp/example"
[[ -f "$tmp/example/$plugin_file" ]] || fail "the example build produced no $plugin_file"
# Its compile lines name the prefix's headers and none of the source tree's.
if grep -oE -- "-(I|isystem) ?[^ ]+" "$tmp/example/compile_commands.json" | grep "$source_dir/\(sdk\|core\)/include" > /dev/null; then
  fail "the example was compiled with the source tree's headers on its include path"
fi
grep -q -- "-isystem $prefix/include" "$tmp/example/compile_commands.json" ||
  fail "the example was not compiled against $prefix/include"
nm -D --defined-only "$tmp/example/$plugin_file" | grep ' ftcore_plugin_info$' > /dev/null ||
  fail "$plugin_file does not export ftcore_plugin_info"
if nm -DC --defined-only "$tmp/example/$plugin_file" | grep 'sgd_nesterov::' > /dev/null; then
  fail "$plugin_file exports its own symbols (visibility should be hidden)"
fi
ok "found $found_dir, compiled against $prefix/include only, exports ftcore_plugin_info"

# Every installed header compiles on its own include path, and ftcore::core
# (with its dependencies) links, in a consumer that sees only the prefix.
check "a consumer including every installed header and linking ftcore::core builds and runs"
mkdir -p "$tmp/consumer"
{
  echo "// Generated by install_and_example_test.sh: every installed ftcore header."
  (cd "$prefix/include" && find ftcore -name '*.h' | sort | sed 's/.*/#include <&>/')
  echo '#include <iostream>'
  echo 'int main() { std::cout << ftcore::sdk::component_kind_name(ftcore::sdk::ComponentKind::Optimizer) << "\n"; }'
} >"$tmp/consumer/main.cpp"
cat >"$tmp/consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(ftcore_consumer LANGUAGES CXX)
find_package(ftcore REQUIRED)
add_executable(consumer main.cpp)
target_link_libraries(consumer PRIVATE ftcore::core)
CMAKE
run_logged "configure the consumer" configure_consumer \
  "$cmake_bin" -S "$tmp/consumer" -B "$tmp/consumer/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
run_logged "build the consumer" build_consumer "$cmake_bin" --build "$tmp/consumer/build"
[[ "$("$tmp/consumer/build/consumer")" == optimizer ]] || fail "the consumer did not run"
ok "$(grep -c '^#include <ftcore' "$tmp/consumer/main.cpp") installed headers compile; ftcore::core links and runs"

# 4. The installed ftcore lists and describes it.
check "FTCORE_PLUGIN_PATH=<example build> <prefix>/bin/ftcore plugins lists optimizer/sgd_nesterov"
listing=$(FTCORE_PLUGIN_PATH="$tmp/example" "$prefix/bin/ftcore" plugins 2>&1) || fail "ftcore plugins failed: $listing"
grep -q '^optimizer/sgd_nesterov ' <<<"$listing" || fail "optimizer/sgd_nesterov not listed:"$'\n'"$listing"
grep -q '^refused:' <<<"$listing" && fail "a plugin was refused:"$'\n'"$listing"
ok "$(grep '^optimizer/sgd_nesterov ' <<<"$listing")"
check "ftcore plugins describe sgd_nesterov"
description=$(FTCORE_PLUGIN_PATH="$tmp/example" "$prefix/bin/ftcore" plugins describe sgd_nesterov 2>&1) ||
  fail "ftcore plugins describe sgd_nesterov failed: $description"
grep -q "$tmp/example/$plugin_file" <<<"$description" || fail "describe does not name the example's library"
for key in lr momentum dampening weight_decay nesterov; do
  grep -q "^  $key (" <<<"$description" || fail "describe lacks parameter $key:"$'\n'"$description"
done
ok "describe names $plugin_file and its five parameters"

check "configs/ab/optimizers.toml (adamw, lion, adafactor and this third-party sgd_nesterov) validates: ftcore ab --dry-run"
experiment=$(cd "$source_dir" && "$prefix/bin/ftcore" ab configs/ab/optimizers.toml --dry-run --plugin-path "$tmp/example" 2>&1) ||
  fail "ftcore ab configs/ab/optimizers.toml --dry-run failed: $experiment"
grep -q 'optimizer.name:.*sgd_nesterov = "sgd_nesterov"' <<<"$experiment" || fail "the experiment's arms are not listed:"$'\n'"$experiment"
ok "4 arms resolve; they differ in $(grep -c '^  ' <<<"$experiment") keys"

# 5. Steps against torch.optim.SGD; resume in a fresh process.
check "30 steps of the example vs torch.optim.SGD, and resume bit for bit (sgd_nesterov_reference.py, installed ftcore plugin steps)"
FTCORE_PLUGIN_PATH="$tmp/example" "$python" "$here/sgd_nesterov_reference.py" "$prefix/bin/ftcore" ||
  fail "sgd_nesterov_reference.py"

# 5b. The conformance suite passes on the example, through the installed ftcore.
check "<prefix>/bin/ftcore plugin verify <example build>/$plugin_file"
if ! verdict=$("$prefix/bin/ftcore" plugin verify "$tmp/example/$plugin_file" 2>&1); then
  fail "ftcore plugin verify failed on the example:"$'\n'"$verdict"
fi
grep -q '^FAIL' <<<"$verdict" && fail "a check failed:"$'\n'"$verdict"
grep -q '^PASS optimizer/sgd_nesterov: state round trip' <<<"$verdict" ||
  fail "verify did not run the state round trip:"$'\n'"$verdict"
ok "$(tail -n 1 <<<"$verdict")"

# 5c. One version: the installed ftcore says the version its SDK header says.
check "ftcore --version agrees with FTCORE_SDK_VERSION in the installed ftcore/sdk/version.h"
sdk_version=$(sed -n 's/^#define FTCORE_SDK_VERSION "\(.*\)"$/\1/p' "$prefix/include/ftcore/sdk/version.h")
package_version=$("$prefix/bin/ftcore" --version | sed -n 's/^ftcore //p')
[[ -n "$sdk_version" && "$sdk_version" == "$package_version" ]] ||
  fail "ftcore --version says '$package_version', the SDK header says '$sdk_version'"
grep -q "PACKAGE_VERSION \"$sdk_version\"" "$prefix/lib/cmake/ftcore/ftcoreConfigVersion.cmake" ||
  fail "ftcoreConfigVersion.cmake does not say $sdk_version"
ok "ftcore $package_version, SDK $sdk_version, ftcoreConfigVersion.cmake $sdk_version"

# 6. A plugin built against another libtorch is refused, naming both versions and the file.
check "the example built against a pretend libtorch 0.0.1 is refused by the installed ftcore"
run_logged "configure the mismatched example" configure_mismatch \
  "$cmake_bin" -S "$example_src" -B "$tmp/mismatch" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF '-DCMAKE_CXX_FLAGS=-DFTCORE_PLUGIN_BUILD_TORCH_VERSION=\"0.0.1\"'
run_logged "build the mismatched example" build_mismatch "$cmake_bin" --build "$tmp/mismatch"
listing=$(FTCORE_PLUGIN_PATH="$tmp/mismatch" "$prefix/bin/ftcore" plugins 2>/dev/null) || fail "ftcore plugins failed"
refusal=$(grep '^refused:' <<<"$listing" || true)
torch_version=$("$python" -c "import torch; print(torch.__version__.split('+')[0])")
expected="refused: refusing plugin $tmp/mismatch/$plugin_file: it was built against libtorch 0.0.1, this ftcore runs libtorch $torch_version"
[[ "$refusal" == "$expected" ]] || fail "expected the refusal '$expected', got '$refusal'"
grep -q '^optimizer/sgd_nesterov ' <<<"$listing" && fail "the refused plugin's component was registered"
ok "$refusal"

# 7. Installed into the prefix, the example is found without FTCORE_PLUGIN_PATH.
check "cmake --install of the example puts it in <prefix>/lib/ftcore/plugins, found with no FTCORE_PLUGIN_PATH"
run_logged "install the example" install_example "$cmake_bin" --install "$tmp/example" --prefix "$prefix"
[[ -f "$prefix/lib/ftcore/plugins/$plugin_file" ]] || fail "the example did not install to lib/ftcore/plugins"
check_runpath "$prefix/lib/ftcore/plugins/$plugin_file" '$ORIGIN/../..'
[[ ":$(runpath_of "$prefix/lib/ftcore/plugins/$plugin_file"):" == *":$prefix/lib:"* ]] ||
  fail "the installed example's RUNPATH lacks the ftcore it was built against ($prefix/lib)"
description=$(env -u FTCORE_PLUGIN_PATH "$prefix/bin/ftcore" plugins describe sgd_nesterov 2>&1) ||
  fail "ftcore plugins describe sgd_nesterov failed after install: $description"
grep -q "$prefix/lib/ftcore/plugins/$plugin_file" <<<"$description" ||
  fail "describe does not name the installed library:"$'\n'"$description"
ok "found at $prefix/lib/ftcore/plugins/$plugin_file"

echo "PASS: install + out-of-tree example (build, list, describe, torch.optim.SGD, resume, refusal, install)"
