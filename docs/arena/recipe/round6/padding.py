"""Why short instances lagged with randomized positions: a trained model's exact match at every
size 1..L, with positions drawn two ways, one draw per instance each:

  own     a subset of the instance's own length from [0, sample_len) (validation, evaluation)
  padded  the first tokens of a subset of the longest instance's length (what training gave a
          short instance in a right-padded batch before round 6)

    python docs/arena/recipe/round6/padding.py "OUT/models/*-randomized-*"  # OUT: the run's --out
"""

import glob
import sys

import numpy as np
import torch

from posenc.arena.backbones import build_model
from posenc.arena.tasks import PAD, build_task
from posenc.arena.train import read_checkpoint

torch.manual_seed(0)
print("model  learned  steps  size: own / padded exact match (256 instances)")
for path in sorted(glob.glob(sys.argv[1])):
    ck = read_checkpoint(path, path)
    model = build_model(ck["config"]).eval()
    model.load_state_dict(ck["model"])
    name = path.rsplit("/", 1)[-1]
    task = build_task(name.split("-")[0])
    L = int(name.split("-L")[1].split("-")[0])
    longest = task.tokens(L)
    cols = []
    for n in range(task.min_size, L + 1):
        x, y, mask = task.sample_batch(np.random.default_rng([7, n]), 256, n)[:3]
        B, T = x.shape
        padded = torch.full((B, longest), PAD, dtype=x.dtype)
        padded[:, :T] = x
        with torch.no_grad():
            own = model(x, positions=torch.arange(T).expand(B, T))
            pad = model(padded, positions=torch.arange(longest).expand(B, longest))[:, :T]
        em = [((z.argmax(-1) == y) | ~mask).all(1).float().mean().item() for z in (own, pad)]
        cols.append(f"{n}: {em[0]:.2f} / {em[1]:.2f}")
    arena = ck["arena"]
    print(name.rsplit("-", 1)[0], arena["learned"], arena["steps"], "  ".join(cols), flush=True)
