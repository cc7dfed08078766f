"""Exact match of a trained randomized model at one size, per position draw: the arena draws one
sorted subset per batch, so every instance of a size shares it. Usage (a model of the recorded
run, trained by `posenc arena` into its --out folder; models are not committed):
    python docs/arena/recipe/round5/draws.py OUT/models/addition-randomized-rope-s0-L5-*.ckpt"""

import os
import sys

import numpy as np
import torch

from posenc.arena.backbones import build_model
from posenc.arena.tasks import build_task

torch.set_num_threads(1)
ck = torch.load(sys.argv[1], weights_only=False)
model = build_model(ck["config"])  # the model's keywords
model.load_state_dict(ck["model"])
model.eval()
task = build_task(os.path.basename(sys.argv[1]).split("-")[0])  # copy-..., addition-...
for n in (1, 3, 5):
    x, y, mask = task.sample_batch(np.random.default_rng([7, n]), 256, n)[:3]  # [B, T]
    per_batch = []
    for seed in range(8):
        torch.manual_seed(seed)
        with torch.no_grad():
            hit = model(x).argmax(-1) == y
        per_batch.append(round((hit | ~mask).all(1).float().mean().item(), 3))
    torch.manual_seed(0)
    B, T = x.shape
    with torch.no_grad():  # [B, T] positions: one draw per instance
        hit = model(x, positions=torch.arange(T).expand(B, T)).argmax(-1) == y
    row = round((hit | ~mask).all(1).float().mean().item(), 3)
    print(f"size {n}: one draw per batch, 8 draws: {per_batch}; one draw per instance: {row}")
