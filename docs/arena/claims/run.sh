#!/usr/bin/env bash
# The arena cells the seeds' training claims read (posenc explain --claims --arena ...).
# Run from this folder: bash run.sh  (resumes where it stopped; results in arena.sqlite)
set -euo pipefail
A="posenc arena --seeds 1 --workers 2 --db arena.sqlite --out arena_out"
# copy at L = 8 (the recipe before issue 29: 5000 fixed steps, whose learning curve claim 003's
# bounded-trains check reads): naive baselines, seed 001's variants, the LSTM
$A --tasks copy --fixed-steps --steps 5000 --encodings "index,phase,learned(max_len=64),learned_window(max_len=64),sinusoidal(learned_scale=true),sinusoidal(fusion=concat),lstm:nope,lstm:sinusoidal"
# passkey at L = 32: the key at growing distance, with and without positions
$A --tasks passkey --encodings "sinusoidal,learned(max_len=256)"
# lm learning curves at L = 64 (train_loss at 1/8 .. all of the steps)
$A --tasks lm --train-len 64 --encodings "learned(max_len=512),sinusoidal"
# seed 002's lengths: trained at 512, judged at 600; the learned table has 1024 rows
$A --tasks lm --train-len 512 --eval-lens 512,600 --steps 400 --encodings "learned(max_len=1024),sinusoidal"
