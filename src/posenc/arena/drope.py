"""DroPE (Gelberg et al. 2025): the trained <name> model with its encoding dropped ("nope") and
recalibrated briefly at L (config.drope_recipe), checkpointed like any training and saved beside
the trained model, keyed by its hash and the recipe (docs/arena/README.md, DroPE).
"""

from __future__ import annotations

import os

import numpy as np
import torch
from torch import nn

from posenc.arena.backbones import build_model
from posenc.arena.cells import Cell, config_hash
from posenc.arena.config import TaskConfig, split_label
from posenc.arena.train import fit, load_final, param_groups, task_seed

ENCODING_KEYS = ("encodings.", "encoding.")  # TransformerLM's encodings, HFLlama's encoding


def dropped_kwargs(kwargs: dict) -> dict:
    """A trained model's settings with its encoding replaced by "nope" (no positions at all)."""
    if not isinstance(kwargs["encoding"], str):
        raise ValueError("DroPE drops one shared encoding; a per-layer schedule is not one")
    return dict(kwargs, encoding="nope", encoding_kwargs={})


def transfer(trained: nn.Module, dropped: nn.Module) -> None:
    """Copy every weight but the encoding's from the trained model into the dropped one;
    ValueError if anything else does not match (the two must differ only in the encoding)."""
    sd = {k: v for k, v in trained.state_dict().items() if not k.startswith(ENCODING_KEYS)}
    missing, unexpected = dropped.load_state_dict(sd, strict=False)
    missing = [k for k in missing if not k.startswith(ENCODING_KEYS)]
    if missing or unexpected:
        raise ValueError(f"DroPE: the models differ beyond the encoding: {missing + unexpected}")
    scales = (getattr(trained, "embed_scale", 1.0), getattr(dropped, "embed_scale", 1.0))
    if scales[0] != scales[1]:
        raise ValueError(f"DroPE: the token embedding scale changes ({scales[0]} -> {scales[1]})")


def drope_key(cell: Cell) -> str:
    """What decides the recalibrated weights: the trained model and the recipe."""
    return config_hash({"trained": cell.train_hash, "drope": cell.cfg["drope"]})


def drope_path(out: str, cell: Cell) -> str:
    base = split_label(cell.label)[0].replace(":", "-")
    name = f"{cell.task}-{base}+drope-s{cell.seed}-L{cell.train_len}-{drope_key(cell)}.ckpt"
    return os.path.join(out, "models", name)


def recalibrate(model: nn.Module, cell: Cell, task, tc: TaskConfig, *, out: str, device: str,
                checkpoint_seconds: float) -> nn.Module:  # fmt: skip
    """The trained `model` with its encoding dropped and recalibrated per cell.cfg["drope"]
    (or the saved result of an earlier run); in eval mode. `model` is left as it is."""
    recipe, key = cell.cfg["drope"], drope_key(cell)
    kwargs, final = dropped_kwargs(cell.train_cfg["model"]), drope_path(out, cell)
    done = load_final(final, key, kwargs, cell.name)
    if done is not None:
        return done.to(device).eval()

    def fresh():
        torch.manual_seed(cell.seed)
        dropped = build_model(kwargs).to(device)
        transfer(model, dropped)
        opt = torch.optim.AdamW(param_groups(dropped), lr=recipe["lr"], betas=(0.9, 0.98))
        # fresh batches: a stream of its own, not the training's first steps again
        rng = np.random.default_rng([cell.seed, task_seed(cell.task), task_seed("drope")])
        return dropped, opt, rng

    warm, lr = recipe["warmup"], recipe["lr"]
    lr_of = lambda step: lr * min(1.0, (step + 1) / warm)  # noqa: E731
    meta = {"trained": cell.train_hash, "drope": recipe}
    dropped = fit(f"{cell.name} (recalibration)", key, final, fresh, recipe["steps"], lr_of, task,
                  tc, device=device, checkpoint_seconds=checkpoint_seconds, kwargs=kwargs,
                  meta=meta)  # fmt: skip
    return dropped.eval()
