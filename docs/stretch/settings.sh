#!/usr/bin/env bash
# Records docs/stretch/settings.txt: the engine settings `posenc stretch settings` prints for
# the embedded SmolLM2-135M-Instruct (GGUF), for the recorded run's recommendation (a tie: yarn(factor=1.5), dynamic_yarn), a base-change
# and a dynamic scaling.
set -euo pipefail
cd "$(dirname "$0")/../.."
{
  for label in 'yarn(factor=1.5)' 'dynamic_yarn' 'ntk(factor=2)' 'dynamic'; do
    echo "\$ posenc stretch settings '$label'"
    PYTHONPATH=src python -m posenc stretch settings "$label"
    echo
  done
} > docs/stretch/settings.txt
