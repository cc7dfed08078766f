#!/usr/bin/env bash
# The second wave (issue 28) beside the 2024-25 wave, RoPE and NoPE on lm, 2 seeds. Run from
# this folder; the database holds the first wave's seed-0 cells (run.sh of issue 16), which resume.
set -euo pipefail
posenc arena --tasks lm --seeds 2 --workers 1 --db arena.sqlite --out . \
    --encodings rope,nope,rope_nd,pope,fope,liere,fox,dape,stickbreaking,path,grape_m,grape_a,comrope,rope_pp,cable,dynamic_bias,distance_basis,rope_heads,videorope,hope,vrope
