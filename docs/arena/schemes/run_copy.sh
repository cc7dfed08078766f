#!/usr/bin/env bash
# The second wave (issue 28) beside RoPE and NoPE on copy, trained to the bar (issue 29's
# recipe), 2 seeds. Run from this folder, into the same database as run.sh's lm cells.
set -euo pipefail
posenc arena --tasks copy --seeds 2 --workers 1 --db arena.sqlite --out . \
    --encodings rope,nope,path,grape_m,grape_a,comrope,rope_pp,cable,dynamic_bias,distance_basis,rope_heads,videorope,hope,vrope
