#!/usr/bin/env bash
# Installs what ftcore needs to build and test, and nothing twice.
#   - Debian -dev packages (Boost 1.74, TOML++, spdlog, nlohmann-json, PCRE2,
#     OpenSSL's libcrypto, GoogleTest, Google Benchmark, ccache) and tcmalloc,
#     only those missing;
#   - a venv at third_party/venv holding the pinned torch wheel (used as
#     libtorch) and the test-only reference packages, only when the pins change.
# A second run with everything present takes seconds.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/venv"
requirements="$here/requirements.txt"

# bsdgames: its quiz files become the default dataset (setup_defaults.sh).
# libicu-dev: Unicode normalizers (NFC...) of tokenizers such as Qwen2's.
# wamerican, manpages: text for the tokenizer test corpus (make_tokenizer_corpus.py).
# clang, libclang-rt-14-dev: libFuzzer targets (tests/fuzz).
# libgloo-dev: the gloo headers ProcessGroupGloo.hpp includes (headers only; core/src/dist).
# iproute2, procps: network namespaces and pgrep for the multi-process tests.
# chromium: headless screenshots of `ftcore ab` reports in the tests.
# libssl-dev: libcrypto's SHA-256 (core/src/util/hash.cpp) and base64 (old checkpoints' RNG state).
# libtcmalloc-minimal4: gperftools' tcmalloc, the ftcore executable's malloc (core/CMakeLists.txt).
apt_packages=(
  build-essential cmake ninja-build ccache pkg-config
  libboost1.74-dev libboost-program-options1.74-dev libboost-filesystem1.74-dev
  libtomlplusplus-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libpcre2-dev
  libssl-dev libtcmalloc-minimal4
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-venv
  bsdgames
  libicu-dev wamerican manpages
  clang libclang-rt-14-dev
  libgloo-dev iproute2 procps
  chromium
)

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing Debian packages: ${missing[*]}"
  sudo_cmd=""; [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    > "${TMPDIR:-/tmp}/ftcore-apt.log" 2>&1 || { cat "${TMPDIR:-/tmp}/ftcore-apt.log"; exit 1; }
fi

# The venv is rebuilt only when requirements.txt changes (its hash is stamped).
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
  python="${FTCORE_PYTHON:-python3}"
  [[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  echo "bootstrap: installing the pinned Python packages (torch is large; first run takes minutes)"
  "$venv/bin/python" -m pip install -q -r "$requirements"
  echo "$want" > "$stamp"
fi
echo "bootstrap: ok ($("$venv/bin/python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'))"
