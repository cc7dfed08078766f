#!/usr/bin/env bash
# The 2024-2026 schemes (issue 16) in the arena, beside RoPE and NoPE. Run from this folder.
set -euo pipefail
posenc arena --tasks lm --seeds 1 --workers 1 --db arena.sqlite --out . \
    --encodings rope,nope,rope_nd,pope,fope,liere,fox,dape,stickbreaking
