#!/usr/bin/env bash
# The second wave (issue 28) beside RoPE and NoPE on copy at L = 8, 2 seeds, trained to the bar
# with --quick's cap of 3000 steps (the full recipe's 15000-step cap takes ~2 h for these 28
# models on 2 cores). Run from this folder, into the same database as run.sh's lm cells.
set -euo pipefail
posenc arena --tasks copy --seeds 2 --steps 3000 --workers 2 --db arena.sqlite --out . \
    --encodings rope,nope,path,grape_m,grape_a,comrope,rope_pp,cable,dynamic_bias,distance_basis,rope_heads,videorope,hope,vrope
