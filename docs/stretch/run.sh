#!/usr/bin/env bash
# The recorded stretch run (docs/stretch): SmolLM2-135M-Instruct (the embedded model), every
# scaling, perplexity at 2k..16k on two documents, passkey retrieval at 0.5x and 1.5x the context
# (3 depths x 2 seeds). Resumable: rerun to finish what a stop left (same database).
set -euo pipefail
cd "$(dirname "$0")/../.."
posenc stretch \
  --scalings none,dynamic_yarn,yarn,dynamic,ntk,linear,llama3,longrope,proportional \
  --lengths 0.25x,0.5x,1x,1.5x,2x --retrieval-lengths 0.5x,1.5x --tasks ppl,passkey \
  --docs 2 --depths 0.2,0.5,0.8 --seeds 2 \
  --db docs/stretch/stretch.sqlite --out docs/stretch --json docs/stretch/rows.json "$@"
