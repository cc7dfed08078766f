"""The default arena grid is buildable: every encoding at every task's own lengths."""

import numpy as np
import pytest
import torch

from posenc.arena.corpus import Corpus
from posenc.arena.runner import (
    TRAINED,
    VARIANTS,
    ArenaConfig,
    build_model,
    model_kwargs,
    rope_scaling,
    task_config,
)
from posenc.arena.tasks import TASK_NAMES, build_task

TINY_CORPUS = Corpus(
    name="tiny", train=np.arange(4096) % 251, valid=np.arange(4096) % 241, files=0, digest="0"
)


@pytest.mark.parametrize("task_name", TASK_NAMES)
def test_every_default_encoding_builds_and_runs_at_the_task_lengths(task_name):
    cfg = task_config(ArenaConfig(dim=16, heads=2, depth=1), task_name)
    task = build_task(task_name, corpus=TINY_CORPUS)
    rng = np.random.default_rng(0)
    labels = [*TRAINED, *(f"rope+{v}" for v in VARIANTS)]
    for label in labels:
        base, _, variant = label.partition("+")
        kwargs = model_kwargs(task, base, cfg)
        if variant:
            scaling = rope_scaling(variant, cfg.train_len, cfg.eval_lens)
            kwargs["encoding_kwargs"] = dict(kwargs["encoding_kwargs"], scaling=scaling)
        model = build_model(kwargs).eval()
        for length in (cfg.train_len, max(cfg.eval_lens)):
            if base == "learned" and length > cfg.train_len:
                continue  # an n/a row by design (tested end to end)
            batch = task.sample_batch(rng, 2, length)
            with torch.no_grad():
                logits = model(batch.inputs)
            assert logits.shape == (2, length, task.vocab_size), (label, length)
            assert torch.isfinite(logits).all(), (label, length)
