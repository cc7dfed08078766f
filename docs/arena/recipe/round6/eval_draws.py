"""How much one position draw per instance moves a randomized model's exact match at L on the
evaluation's own instances: 16 draws (16 seeds) of the same 128 instances per model.

    python docs/arena/recipe/round6/eval_draws.py "OUT/models/*-randomized-*"  # OUT: the run's --out
"""

import glob
import statistics
import sys

import torch

from posenc.arena.backbones import build_model
from posenc.arena.config import ArenaConfig, task_config
from posenc.arena.evaluate import EVAL_SEED, eval_batch
from posenc.arena.tasks import build_task
from posenc.arena.train import per_instance, read_checkpoint

print("model  exact match at L over 16 draws: mean [min-max]")
for path in sorted(glob.glob(sys.argv[1])):
    ck = read_checkpoint(path, path)
    model = build_model(ck["config"]).eval()
    model.load_state_dict(ck["model"])
    name = path.rsplit("/", 1)[-1]
    task_name = name.split("-")[0]
    task, L = build_task(task_name), int(name.split("-L")[1].split("-")[0])
    x, y, mask = eval_batch(task, task_config(ArenaConfig(tasks=[task_name]), task_name), L)[:3]
    em = []
    for draw in range(16):
        torch.manual_seed(EVAL_SEED + L + 1000 * draw)
        with torch.no_grad():
            hit = per_instance(model, x, mask).argmax(-1) == y
        em.append((hit | ~mask).all(1).float().mean().item())
    print(f"{name.rsplit('-', 1)[0]}  {statistics.fmean(em):.3f} [{min(em):.3f}-{max(em):.3f}]")
